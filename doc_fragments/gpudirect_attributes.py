"""Attribute blocks that several of the project's modules share word for word (issue #31).

A module names them under ``extends_documentation_fragment``; from the checkout (./ansible.cfg:
``doc_fragment_plugins = doc_fragments``) by the short names below, in the collection by
``gpudirect.rdma.<name>``, which scripts/build-collection.sh writes into the staged modules.

* ``gpudirect_attributes``: runs on Linux nodes (platform);
* ``gpudirect_attributes.read_only``: only reads the node, so check mode runs it the same way
  and there is no diff;
* ``gpudirect_attributes.no_diff``: returns no diff (check mode differs per module and stays in
  the module).

A module's own entry for the same attribute is merged over the fragment's.
"""


class ModuleDocFragment(object):

    DOCUMENTATION = r"""
attributes:
  platform:
    support: full
    platforms: linux
    description: Linux nodes.
"""

    READ_ONLY = r"""
attributes:
  check_mode:
    support: full
    description: The module only reads the node; check mode runs it the same way and returns the same result.
  diff_mode:
    support: none
    description: Nothing on the node changes, so there is nothing to diff.
"""

    NO_DIFF = r"""
attributes:
  diff_mode:
    support: none
    description: The module returns no C(diff); its result says what changed or would change.
"""
