"""GDRCopy, DCGM and module signing checks of ``gpudirect_verify``, and their place in the host's record.

* ``gpudirect_gdrcopy_check`` judges the registered runs of ``gdrcopy_sanity`` and
  ``gdrcopy_copybw`` (parsers: ``plugin_utils/gpudirect_gdrcopy.py``).
* ``gpudirect_dcgm_check`` judges the registered run of ``dcgmi diag -r N -j``
  (parser: ``plugin_utils/gpudirect_dcgm.py``).
* ``gpudirect_signing_check`` judges gpudirect_module_signing's read-only check of
  the chain for the running and the next boot kernel
  (``module_utils/gpudirect_secure_boot.py`` ``verification_check``).
* ``gpudirect_fabric_check`` judges each GPU's whole NVLink Fabric section from the facts
  (``module_utils/gpudirect_nvlink.py`` ``judge_fabric``): Completed/Success with no Health
  fault, or a failure naming the GPUs, the faulty Health rows and any field or value the
  toolkit does not know; skipped where no GPU is on a fabric.
* ``gpudirect_in_service_check`` judges, read-only, a node in service whose data path
  the role leaves alone (``plugin_utils/gpudirect_in_service.py``): driver, an ACTIVE
  RDMA port, a peer-memory path.
The verdict filter ``gpudirect_verify_verdict`` (filter_plugins/gpudirect_verify.py)
puts the checks in the host's record: each one under ``checks`` and as a line of
``notes``; a failed check turns a passed host, or one in service whose loopback was left
out, into a failed one, with a diagnosis naming the check.

A check that was not run (tools absent, DCGM not installed, level 0, check mode, where
the command module runs nothing and says so) is
``skipped`` with its reason, and changes no verdict. A check whose tools ran but could not
measure anything on this node (GDRCopy's tools on a node without GPU) is ``not_measured``,
with the tools' own error as its reason, and changes no verdict either.
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

from ansible.module_utils import gpudirect_dcgm as _dcgm  # noqa: E402
from ansible.module_utils import gpudirect_gdrcopy as _gdrcopy  # noqa: E402
from ansible.module_utils import gpudirect_in_service as _in_service  # noqa: E402
from ansible.module_utils import gpudirect_nvlink as _nvlink  # noqa: E402
from ansible.module_utils import gpudirect_secure_boot as _secure_boot  # noqa: E402

def _run(registered):
    """A registered command result, or None when the task was skipped or absent."""
    if not isinstance(registered, dict) or registered.get("skipped") or "rc" not in registered:
        return None
    return {"stdout": registered.get("stdout") or "", "stderr": registered.get("stderr") or "",
            "rc": registered.get("rc")}


def _skip_message(*registered):
    """Why registered command tasks did not run, in the command module's own words.

    In check mode the command module runs nothing and says so ("Command would have
    run if not in check mode"); the role passes that on rather than reading check
    mode itself.
    """
    for r in registered:
        if isinstance(r, dict) and r.get("skipped") and r.get("msg"):
            return "check mode or skipped: %s" % r["msg"]
    return ""


def gpudirect_gdrcopy_check(sanity, copybw=None, missing="", gpu_count=None):
    """The gdrcopy check from the registered runs (or the reason they were not run); ``gpu_count``
    the NVIDIA GPUs the node's facts list (``None``: unknown), which tells a tool that could not
    measure on a node without GPU (not_measured) from one that failed on a node with GPUs."""
    sanity_run, copybw_run = _run(sanity), _run(copybw)
    if sanity_run is None and copybw_run is None:
        missing = missing or _skip_message(sanity, copybw)
        if not missing:
            raise AnsibleFilterError("gpudirect_gdrcopy_check: neither gdrcopy_sanity nor gdrcopy_copybw ran, "
                                     "and no reason was given")
    if gpu_count in (None, "", "None"):
        gpu_count = None
    else:
        try:
            gpu_count = int(gpu_count)
        except (TypeError, ValueError):
            raise AnsibleFilterError("gpudirect_gdrcopy_check: gpu_count must be a number of GPUs or none, got %r"
                                     % (gpu_count,))
    return _gdrcopy.judge(sanity_run, copybw_run, missing or None, gpu_count)


def gpudirect_dcgm_check(diag, level=None, missing=""):
    """The DCGM check from the registered ``dcgmi diag`` run (or the reason it was not run)."""
    run = _run(diag)
    if run is None:
        missing = missing or _skip_message(diag)
        if not missing:
            raise AnsibleFilterError("gpudirect_dcgm_check: dcgmi diag did not run, and no reason was given")
    return _dcgm.judge(run, int(level) if level not in (None, "") else None, missing or None)


def gpudirect_fabric_check(facts):
    """The NVLink fabric check from the node's GPUDirect facts (``ansible_facts.gpudirect``)."""
    if not isinstance(facts, dict):
        raise AnsibleFilterError("gpudirect_fabric_check expects ansible_facts.gpudirect, got %r" % (facts,))
    nvlink = facts.get("nvlink") or {}
    try:
        return _nvlink.judge_fabric(facts.get("gpus") or [], bool(nvlink.get("fabric_available")),
                                    nvlink.get("fabric_reason") or nvlink.get("reason"))
    except ValueError as exc:
        raise AnsibleFilterError("gpudirect_fabric_check: %s" % exc)


def gpudirect_in_service_check(facts):
    """The read-only check of a node in service from its GPUDirect facts (``ansible_facts.gpudirect``)."""
    try:
        return _in_service.judge(facts)
    except ValueError as exc:
        raise AnsibleFilterError("gpudirect_in_service_check: %s" % exc)


def gpudirect_signing_check(result, cert_configured=True):
    """The module signing check from the registered gpudirect_module_signing check run."""
    if not isinstance(result, dict) or result.get("skipped") or "secure_boot" not in result:
        raise AnsibleFilterError("gpudirect_signing_check expects gpudirect_module_signing's check result, got %r"
                                 % (result,))
    return _secure_boot.verification_check(result, bool(cert_configured))


class FilterModule(object):
    """GDRCopy, DCGM and module signing checks for gpudirect_verify."""

    def filters(self):
        return {
            "gpudirect_fabric_check": gpudirect_fabric_check,
            "gpudirect_in_service_check": gpudirect_in_service_check,
            "gpudirect_gdrcopy_check": gpudirect_gdrcopy_check,
            "gpudirect_dcgm_check": gpudirect_dcgm_check,
            "gpudirect_signing_check": gpudirect_signing_check,
        }
