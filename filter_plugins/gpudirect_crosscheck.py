"""Filters of the gpudirect_verify role's cross-checks (perftest's ib_write_bw, nccl-tests).

Thin wrappers: the parsers and the judgment live in ``module_utils/gpudirect_crosscheck.py``
(one implementation, also used by ``library/gpudirect_perftest.py`` on the node).
"""

import os

from ansible.errors import AnsibleFilterError

import ansible.module_utils

# The project's module_utils/ (shipped to nodes with the modules) and plugin_utils/ (controller
# only), importable here as ansible.module_utils.<name>: Ansible loads this file by path and
# ships module_utils only to modules. The collection build rewrites these imports to the
# collection's plugins/module_utils and plugins/plugin_utils (scripts/build-collection.sh).
_PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _UTILS in (os.path.join(_PROJECT, "module_utils"), os.path.join(_PROJECT, "plugin_utils")):
    if _UTILS not in ansible.module_utils.__path__:
        ansible.module_utils.__path__.append(_UTILS)

from ansible.module_utils import gpudirect_crosscheck as _xc  # noqa: E402


def gpudirect_verify_crosscheck(perftest_results=None, setting="auto", min_ratio=0.0, nccl_result=None,
                                nccl_command=None, check_mode=False, pair_mode=False):
    """One host's cross-check record (see ``crosscheck_record``)."""
    try:
        return _xc.crosscheck_record(perftest_results, setting, float(min_ratio), nccl_result, nccl_command,
                                     bool(check_mode), bool(pair_mode))
    except (_xc.CrosscheckError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("gpudirect_verify_crosscheck: %s" % exc)


def gpudirect_verify_crosscheck_lines(crosscheck):
    """Readable lines of a cross-check record."""
    return _xc.crosscheck_lines(crosscheck)


class FilterModule(object):
    """Cross-check filters of the gpudirect_verify role."""

    def filters(self):
        return {
            "gpudirect_verify_crosscheck": gpudirect_verify_crosscheck,
            "gpudirect_verify_crosscheck_lines": gpudirect_verify_crosscheck_lines,
        }
