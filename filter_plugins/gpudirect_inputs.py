"""Ansible filter: the digest of what the controller brings to a run.

``gpudirect_inputs_digest``
    ``variables | gpudirect_inputs_digest(project_root, ansible_version)``:
    SHA-256 over the variables (JSON, keys sorted) and over the content of the
    toolkit's code and templates under ``project_root`` (``site.yml``,
    ``playbooks/``, ``roles/``, ``library/``, ``module_utils/``,
    ``filter_plugins/``), less documentation (``*.md``: a README edit changes
    no node; the filters' ``filter_plugins/*.yml`` for ansible-doc) and Python bytecode. The
    ``gpudirect_state`` role stores it with the node's fingerprint, so a changed
    inventory variable, role default or module makes the next run a full one.

Input that cannot be digested raises ``AnsibleFilterError`` naming the problem.
"""

from __future__ import annotations

import hashlib
import json
import os

from ansible.errors import AnsibleFilterError

TOOLKIT_PARTS = ("site.yml", "playbooks", "roles", "library", "module_utils", "filter_plugins")
SKIP_DIRS = ("__pycache__", ".pytest_cache")
# documentation and caches: they cannot change what a run does to a node
SKIP_SUFFIXES = (".md", ".pyc")


def _filter_doc(part, name):
    """A filter's documentation for ansible-doc (filter_plugins/NAME.yml, beside the code)."""
    return part == "filter_plugins" and name.endswith((".yml", ".yaml"))


def _toolkit_files(project_root):
    found = []
    for part in TOOLKIT_PARTS:
        top = os.path.join(project_root, part)
        if os.path.isfile(top):
            found.append(top)
            continue
        for current, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
            found.extend(os.path.join(current, f) for f in sorted(files)
                         if not f.endswith(SKIP_SUFFIXES) and not _filter_doc(part, f))
    return found


def inputs_digest(variables, project_root, ansible_version=""):
    if not isinstance(variables, dict):
        raise AnsibleFilterError("gpudirect_inputs_digest: expected a dict of variables, got %s"
                                 % type(variables).__name__)
    if not project_root or not os.path.isfile(os.path.join(str(project_root), "site.yml")):
        raise AnsibleFilterError("gpudirect_inputs_digest: %r is not the toolkit's directory (no site.yml there)"
                                 % (project_root,))
    digest = hashlib.sha256()
    try:
        digest.update(json.dumps(variables, sort_keys=True, default=str).encode("utf-8"))
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("gpudirect_inputs_digest: the variables cannot be serialised: %s" % exc)
    digest.update(("\nansible %s\n" % ansible_version).encode("utf-8"))
    root = str(project_root)
    for path in _toolkit_files(root):
        digest.update(("%s\n" % os.path.relpath(path, root)).encode("utf-8"))
        with open(path, "rb") as handle:
            digest.update(hashlib.sha256(handle.read()).digest())
    return digest.hexdigest()


class FilterModule(object):
    def filters(self):
        return {"gpudirect_inputs_digest": inputs_digest}
