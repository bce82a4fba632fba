"""Hold the default boot kernel when a kernel update's chain was not proven (issue #13, outcome 3).

module_utils/gpudirect_kernel.py decides (boot_hold_decision, grub_entry_path);
library/gpudirect_boot_default.py acts. The grub.cfg is tests/fixtures/boot/debian9-grub.cfg
(README there names its source): its top-level entry and the first submenu entry load
4.9.0-3-amd64 (the newer kernel), the next one 2.6.32-openvz-042stab123.9-amd64. The
update-grub stand-in does what grub-mkconfig's 00_header does with GRUB_DEFAULT: it writes
the value as ``set default="..."``.
"""

import json
import os
import re
import shutil

import pytest

import gpudirect_boot_default
from ansible.module_utils.gpudirect_kernel import (
    boot_hold_decision, default_boot_kernel, grub_entry_path, parse_grub_cfg, render_hold_dropin)
from conftest import PROJECT_FIXTURES

CFG = os.path.join(PROJECT_FIXTURES, "boot", "debian9-grub.cfg")
NEW = "4.9.0-3-amd64"
OLD = "2.6.32-openvz-042stab123.9-amd64"
UUID = "e025e52b-91c4-4f64-962d-79f244caa92a"
OLD_PATH = "gnulinux-advanced-%s>gnulinux-%s-advanced-%s" % (UUID, OLD, UUID)
DROPIN = "etc/default/grub.d/99-gpudirect-boot-hold.cfg"
RECORD = "var/lib/gpudirect/boot-hold.json"


def parse_hold_dropin(text):
    """The GRUB_DEFAULT value the drop-in sets (shell double quotes undone), None when none."""
    for line in (text or "").splitlines():
        match = re.match(r'^GRUB_DEFAULT="((?:[^"\\]|\\.)*)"\s*$', line.strip())
        if match:
            return re.sub(r"\\(.)", r"\1", match.group(1))
    return None


UPDATE_GRUB = """#!/bin/sh
v=$(sed -n 's/^GRUB_DEFAULT="\\(.*\\)"$/\\1/p' etc/default/grub.d/99-gpudirect-boot-hold.cfg 2>/dev/null)
[ -n "$v" ] || v=0
sed "s|set default=\\"0\\"|set default=\\"$v\\"|" boot/grub/grub.cfg.in > boot/grub/grub.cfg
echo "Generating grub configuration file ..."
"""


def _cfg():
    with open(CFG, encoding="utf-8") as handle:
        return parse_grub_cfg(handle.read())


# -- decisions ---------------------------------------------------------------

def test_unproven_new_default_is_held_on_the_running_kernel():
    decision = boot_hold_decision(OLD, NEW, proven=False)
    assert decision["action"] == "hold"
    assert NEW in decision["reason"] and OLD in decision["reason"]


@pytest.mark.parametrize("running, default, proven", [(NEW, NEW, False), (NEW, NEW, True), (OLD, NEW, True)])
def test_nothing_to_hold_when_the_default_runs_or_the_chain_was_proven(running, default, proven):
    assert boot_hold_decision(running, default, proven)["action"] == "none"


@pytest.mark.parametrize("running, default", [(OLD, None), (None, NEW)])
def test_unknown_kernels_change_nothing_and_say_so(running, default):
    decision = boot_hold_decision(running, default, proven=False)
    assert decision["action"] == "unknown"
    assert "left as it is" in decision["reason"]


def test_grub_entry_path_is_the_kernels_own_entry_in_the_submenu():
    # not the top-level "Debian GNU/Linux" entry: after update-grub it loads the newest kernel
    assert grub_entry_path(_cfg(), NEW) == "gnulinux-advanced-%s>gnulinux-%s-advanced-%s" % (UUID, NEW, UUID)
    assert grub_entry_path(_cfg(), OLD) == OLD_PATH


def test_grub_entry_path_skips_recovery_entries_and_unknown_kernels():
    assert "recovery" not in grub_entry_path(_cfg(), OLD)
    assert grub_entry_path(_cfg(), "6.1.0-20-amd64") is None


def test_hold_dropin_round_trip():
    text = render_hold_dropin(OLD_PATH, OLD, NEW)
    assert parse_hold_dropin(text) == OLD_PATH
    assert parse_hold_dropin("GRUB_CMDLINE_LINUX=\"${GRUB_CMDLINE_LINUX} iommu=pt\"\n") is None


# -- the module on a GRUB tree -------------------------------------------------

@pytest.fixture
def grub_node(tmp_path):
    (tmp_path / "boot" / "grub").mkdir(parents=True)
    shutil.copy(CFG, tmp_path / "boot" / "grub" / "grub.cfg.in")
    shutil.copy(CFG, tmp_path / "boot" / "grub" / "grub.cfg")
    (tmp_path / "proc" / "sys" / "kernel").mkdir(parents=True)
    (tmp_path / "proc" / "sys" / "kernel" / "osrelease").write_text(OLD + "\n")
    (tmp_path / "usr" / "sbin").mkdir(parents=True)
    (tmp_path / "usr" / "sbin" / "update-grub").write_text(UPDATE_GRUB)
    os.chmod(tmp_path / "usr" / "sbin" / "update-grub", 0o755)
    return tmp_path


def _run(run_module, root, check_mode=False, **args):
    return run_module(gpudirect_boot_default, dict(args, root=str(root)), check_mode=check_mode)


def test_fixture_boots_the_new_kernel_while_the_old_one_runs(grub_node):
    assert default_boot_kernel(str(grub_node))[0] == NEW


def test_hold_makes_the_running_kernel_the_default_and_survives_a_rerun(grub_node, run_module):
    result = _run(run_module, grub_node, state="held", proven=False)
    assert result["changed"] and result["held"] and result["method"] == "grub"
    assert (result["default"], result["instead_of"]) == (OLD, NEW)
    assert default_boot_kernel(str(grub_node))[0] == OLD
    assert parse_hold_dropin((grub_node / DROPIN).read_text()) == OLD_PATH
    assert json.loads((grub_node / RECORD).read_text())["instead_of"] == NEW
    again = _run(run_module, grub_node, state="held", proven=False)
    assert not again["changed"] and again["held"] and again["instead_of"] == NEW


def test_hold_in_check_mode_changes_nothing(grub_node, run_module):
    result = _run(run_module, grub_node, check_mode=True, state="held")
    assert result["changed"] and result["default"] == OLD
    assert not (grub_node / DROPIN).exists() and not (grub_node / RECORD).exists()
    assert default_boot_kernel(str(grub_node))[0] == NEW


def test_proven_chain_holds_nothing(grub_node, run_module):
    result = _run(run_module, grub_node, state="held", proven=True)
    assert not result["changed"] and not result["held"]
    assert default_boot_kernel(str(grub_node))[0] == NEW


def test_release_makes_the_new_kernel_the_default_again(grub_node, run_module):
    _run(run_module, grub_node, state="held")
    assert _run(run_module, grub_node, check_mode=True, state="released")["changed"]
    assert (grub_node / DROPIN).exists()
    result = _run(run_module, grub_node, state="released")
    assert result["changed"] and not result["held"] and result["default"] == NEW
    assert not (grub_node / DROPIN).exists() and not (grub_node / RECORD).exists()
    assert not _run(run_module, grub_node, state="released")["changed"]


def test_hold_fails_when_no_entry_loads_the_running_kernel(grub_node, run_module):
    (grub_node / "proc" / "sys" / "kernel" / "osrelease").write_text("6.1.0-20-amd64\n")
    result = _run(run_module, grub_node, state="held")
    assert result["failed"] and "no normal entry of /boot/grub/grub.cfg loads vmlinuz-6.1.0-20-amd64" in result["msg"]
    assert not (grub_node / DROPIN).exists()


def test_update_grub_failure_fails_naming_it(grub_node, run_module):
    (grub_node / "usr" / "sbin" / "update-grub").write_text("#!/bin/sh\necho '/boot: No space left on device' >&2\nexit 1\n")
    result = _run(run_module, grub_node, state="held")
    assert result["failed"] and "No space left on device" in result["msg"] and "update-grub" in result["msg"]


def test_node_without_grub_or_grubby_says_there_is_nothing_to_hold(tmp_path, run_module):
    (tmp_path / "proc" / "sys" / "kernel").mkdir(parents=True)
    (tmp_path / "proc" / "sys" / "kernel" / "osrelease").write_text(OLD + "\n")
    (tmp_path / "boot").mkdir()
    os.symlink("vmlinuz-" + NEW, tmp_path / "boot" / "vmlinuz")
    result = _run(run_module, tmp_path, state="held")
    assert not result["changed"] and result["method"] == "none" and not result["held"]
    assert "no GRUB" in result["reason"] and "nothing to hold" in result["reason"]
