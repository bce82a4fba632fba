"""Filters of the gpudirect_verify role's cross-checks (perftest's ib_write_bw, nccl-tests).

Thin wrappers: the parsers and the judgment live in ``module_utils/gpudirect_crosscheck.py``
(one implementation, also used by ``library/gpudirect_perftest.py`` on the node).
"""

import os

from ansible.errors import AnsibleFilterError

import ansible.module_utils

_MODULE_UTILS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "module_utils")
if _MODULE_UTILS not in ansible.module_utils.__path__:
    ansible.module_utils.__path__.append(_MODULE_UTILS)

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
