"""A new kernel boots once before it becomes the default (issue #43, outcome 4).

module_utils/gpudirect_kernel.py decides (boot_once_decision, boot_once_end,
newest_grub_kernel); library/gpudirect_boot_default.py acts (states pinned, trial, held).
The node is tests/fixtures/boot/debian9-grub.cfg (README there names its source): its
first entries load 4.9.0-3-amd64 (NEW, the newest, as after a kernel install), the next
2.6.32-openvz-042stab123.9-amd64 (OLD, the kernel the node ran and verified on). The
stand-ins do what the real tools do to the files the module reads: update-grub writes
GRUB_DEFAULT as grub-mkconfig's 00_header does (``set default="..."``), grub-reboot writes
grubenv's ``next_entry`` as ``grub-editenv set`` does, grub-editenv unsets it; GRUB itself
would clear ``next_entry`` when it boots the entry, which a test does by hand.
"""

import json
import os
import shutil

import pytest

import gpudirect_boot_default
from ansible.module_utils.gpudirect_kernel import (
    boot_once_decision, boot_once_end, default_boot_kernel, newest_grub_kernel, parse_grub_cfg, render_pin_dropin)
from conftest import PROJECT_FIXTURES
# the test-side reader of the hold drop-in (no module needs one: issue #45 outcome 5)
from test_boot_hold import parse_hold_dropin

CFG = os.path.join(PROJECT_FIXTURES, "boot", "debian9-grub.cfg")
NEW = "4.9.0-3-amd64"
OLD = "2.6.32-openvz-042stab123.9-amd64"
UUID = "e025e52b-91c4-4f64-962d-79f244caa92a"
OLD_PATH = "gnulinux-advanced-%s>gnulinux-%s-advanced-%s" % (UUID, OLD, UUID)
NEW_PATH = "gnulinux-advanced-%s>gnulinux-%s-advanced-%s" % (UUID, NEW, UUID)
DROPIN = "etc/default/grub.d/99-gpudirect-boot-hold.cfg"
RECORD = "var/lib/gpudirect/boot-hold.json"
GRUBENV = "boot/grub/grubenv"

UPDATE_GRUB = """#!/bin/sh
v=$(sed -n 's/^GRUB_DEFAULT="\\(.*\\)"$/\\1/p' etc/default/grub.d/99-gpudirect-boot-hold.cfg 2>/dev/null)
[ -n "$v" ] || v=$(sed -n 's/^GRUB_DEFAULT=//p' etc/default/grub 2>/dev/null)
[ -n "$v" ] || v=0
[ "$v" = saved ] && v='${saved_entry}'
sed "s|set default=\\"0\\"|set default=\\"$v\\"|" boot/grub/grub.cfg.in > boot/grub/grub.cfg
echo "Generating grub configuration file ..."
echo x >> update-grub.calls
"""
# grub-reboot ENTRY: grub-editenv /boot/grub/grubenv set next_entry=ENTRY
GRUB_REBOOT = """#!/bin/sh
{ echo '# GRUB Environment Block'; grep -v -e '^#' -e '^next_entry=' boot/grub/grubenv 2>/dev/null; echo "next_entry=$1"; } > boot/grub/grubenv.new
mv boot/grub/grubenv.new boot/grub/grubenv
"""
# grub-set-default ENTRY: grub-editenv /boot/grub/grubenv set saved_entry=ENTRY
GRUB_SET_DEFAULT = """#!/bin/sh
{ echo '# GRUB Environment Block'; grep -v -e '^#' -e '^saved_entry=' boot/grub/grubenv 2>/dev/null; echo "saved_entry=$1"; } > boot/grub/grubenv.new
mv boot/grub/grubenv.new boot/grub/grubenv
"""
# grub-editenv FILE unset next_entry (FILE absolute: taken under the tree)
GRUB_EDITENV = """#!/bin/sh
[ "$2" = unset ] && [ "$3" = next_entry ] || { echo "stand-in: unexpected $*" >&2; exit 2; }
sed -i '/^next_entry=/d' ".$1"
"""


def _cfg():
    with open(CFG, encoding="utf-8") as handle:
        return parse_grub_cfg(handle.read())


def _tool(root, path, text):
    full = root / path
    full.parent.mkdir(parents=True, exist_ok=True)
    full.write_text(text)
    os.chmod(full, 0o755)


@pytest.fixture
def node(tmp_path):
    """A Debian node running OLD, its kernel update (NEW) installed: grub.cfg's first entry loads NEW."""
    (tmp_path / "boot" / "grub").mkdir(parents=True)
    shutil.copy(CFG, tmp_path / "boot" / "grub" / "grub.cfg.in")
    shutil.copy(CFG, tmp_path / "boot" / "grub" / "grub.cfg")
    boots(tmp_path, OLD)
    _tool(tmp_path, "usr/sbin/update-grub", UPDATE_GRUB)
    _tool(tmp_path, "usr/sbin/grub-reboot", GRUB_REBOOT)
    _tool(tmp_path, "usr/bin/grub-editenv", GRUB_EDITENV)
    _tool(tmp_path, "usr/sbin/grub-set-default", GRUB_SET_DEFAULT)
    return tmp_path


def boots(root, release):
    """The node (re)booted into ``release``; GRUB cleared the one-shot entry it used."""
    (root / "proc" / "sys" / "kernel").mkdir(parents=True, exist_ok=True)
    (root / "proc" / "sys" / "kernel" / "osrelease").write_text(release + "\n")
    env = root / GRUBENV
    if env.exists():
        env.write_text("".join(line + "\n" for line in env.read_text().splitlines() if not line.startswith("next_entry=")))


def next_entry(root):
    env = root / GRUBENV
    lines = env.read_text().splitlines() if env.exists() else []
    return next((line.split("=", 1)[1] for line in lines if line.startswith("next_entry=")), None)


def _run(run_module, root, check_mode=False, **args):
    return run_module(gpudirect_boot_default, dict(args, root=str(root)), check_mode=check_mode)


# -- decisions ---------------------------------------------------------------

def test_the_newest_kernel_is_the_first_entry_grub_mkconfig_writes():
    assert newest_grub_kernel(_cfg()) == NEW


def test_a_new_kernel_is_tried_with_the_running_one_pinned():
    decision = boot_once_decision(OLD, NEW, {"kernel": OLD, "boot_once": True, "trial": None})
    assert (decision["action"], decision["proven"], decision["trial"]) == ("try", OLD, NEW)
    assert "boots once" in decision["reason"] and OLD in decision["reason"]


def test_an_earlier_trial_that_did_not_verify_keeps_its_proven_kernel():
    # the node still runs NEW from the earlier run's trial: NEW is not the proven kernel
    record = {"kernel": OLD, "boot_once": True, "trial": NEW}
    decision = boot_once_decision(NEW, NEW, record)
    assert (decision["action"], decision["proven"], decision["trial"]) == ("try", OLD, NEW)


def test_nothing_is_tried_when_the_newest_kernel_is_the_proven_one():
    decision = boot_once_decision(OLD, OLD, None)
    assert (decision["action"], decision["trial"]) == ("pin", None)
    assert "nothing to boot once" in decision["reason"]


def test_a_newest_kernel_running_before_the_run_is_verified_as_it_runs():
    decision = boot_once_decision(NEW, NEW, {"kernel": "5.10.0-9-amd64", "boot_once": False})
    assert (decision["action"], decision["proven"], decision["trial"]) == ("pin", NEW, None)


def test_before_the_install_only_the_pin_is_decided():
    decision = boot_once_decision(OLD, None, None)
    assert (decision["action"], decision["proven"], decision["trial"]) == ("pin", OLD, None)
    assert boot_once_decision(None, NEW, None)["action"] == "unknown"


@pytest.mark.parametrize("running, proven, action", [
    (NEW, True, "promote"),    # verified on the tried kernel
    (NEW, False, "keep"),      # booted it, verification failed
    (OLD, False, "keep"),      # never booted it (a failure before the reboot, or it fell back)
    (OLD, True, "keep"),       # verified, but on the old kernel: the new one was not proven
])
def test_the_chain_end_promotes_only_the_tried_kernel_verified(running, proven, action):
    decision = boot_once_end(running, {"kernel": OLD, "boot_once": True, "trial": NEW}, proven)
    assert decision["action"] == action
    if action == "keep":
        assert "%s, the last proven kernel, stays the default" % OLD in decision["reason"]


def test_the_pin_dropin_names_the_proven_entry():
    assert parse_hold_dropin(render_pin_dropin(OLD_PATH, OLD)) == OLD_PATH


# -- the module on a GRUB tree -------------------------------------------------

def test_fixture_boots_the_new_kernel_when_nothing_pins_it(node):
    assert default_boot_kernel(str(node))[0] == NEW


def test_pin_before_the_install_keeps_the_running_kernel_the_default(node, run_module):
    result = _run(run_module, node, state="pinned")
    assert result["changed"] and result["held"] and (result["kernel"], result["default"]) == (OLD, OLD)
    assert parse_hold_dropin((node / DROPIN).read_text()) == OLD_PATH
    record = json.loads((node / RECORD).read_text())
    assert (record["kernel"], record["boot_once"], record["trial"]) == (OLD, True, None)
    assert default_boot_kernel(str(node))[0] == OLD
    again = _run(run_module, node, state="pinned")
    assert not again["changed"]
    assert (node / "update-grub.calls").read_text().count("x") == 1


def test_trial_boots_the_new_kernel_once_and_the_pinned_one_after(node, run_module):
    _run(run_module, node, state="pinned")
    result = _run(run_module, node, state="trial")
    assert result["changed"] and (result["trial"], result["kernel"], result["default"]) == (NEW, OLD, NEW)
    assert next_entry(node) == NEW_PATH
    assert json.loads((node / RECORD).read_text())["trial"] == NEW
    assert not _run(run_module, node, state="trial")["changed"]
    # GRUB boots NEW once and clears next_entry: the boot after that is OLD's
    boots(node, NEW)
    assert default_boot_kernel(str(node))[0] == OLD


def test_verified_on_the_new_kernel_it_becomes_the_default(node, run_module):
    _run(run_module, node, state="pinned")
    _run(run_module, node, state="trial")
    boots(node, NEW)
    result = _run(run_module, node, state="held", proven=True)
    assert result["changed"] and not result["held"] and result["default"] == NEW
    assert not (node / DROPIN).exists() and not (node / RECORD).exists()
    assert default_boot_kernel(str(node))[0] == NEW
    assert not _run(run_module, node, state="held", proven=True)["changed"]


def test_with_grub_default_saved_the_verified_kernel_becomes_the_saved_entry(node, run_module):
    # the admin's GRUB_DEFAULT=saved with grub-set-default on OLD: no package install moves saved_entry
    (node / "etc" / "default").mkdir(parents=True)
    (node / "etc" / "default" / "grub").write_text("GRUB_DEFAULT=saved\n")
    (node / GRUBENV).write_text("# GRUB Environment Block\nsaved_entry=%s\n" % OLD_PATH)
    _run(run_module, node, state="pinned")
    _run(run_module, node, state="trial")
    boots(node, NEW)
    result = _run(run_module, node, state="held", proven=True)
    assert result["default"] == NEW and "saved_entry=%s" % NEW_PATH in (node / GRUBENV).read_text()


def test_a_failed_verification_keeps_the_proven_kernel_next(node, run_module):
    _run(run_module, node, state="pinned")
    _run(run_module, node, state="trial")
    boots(node, NEW)
    result = _run(run_module, node, state="held", proven=False)
    assert not result["changed"] and result["held"]
    assert (result["kernel"], result["trial"], result["default"]) == (OLD, NEW, OLD)
    assert "was not proven" in result["reason"]
    assert (node / DROPIN).exists() and default_boot_kernel(str(node))[0] == OLD


def test_a_failure_before_the_reboot_clears_the_pending_one_shot_boot(node, run_module):
    _run(run_module, node, state="pinned")
    _run(run_module, node, state="trial")
    # the reboot never happened: an unplanned boot would start NEW, whose chain did not finish
    result = _run(run_module, node, state="held", proven=False)
    assert result["changed"] and next_entry(node) is None
    assert default_boot_kernel(str(node))[0] == OLD


def test_the_next_run_tries_again_and_promotes(node, run_module):
    _run(run_module, node, state="pinned")
    _run(run_module, node, state="trial")
    boots(node, NEW)
    _run(run_module, node, state="held", proven=False)
    # a power cycle later the node runs OLD again; the next campaign run pins, tries, verifies
    boots(node, OLD)
    assert not _run(run_module, node, state="pinned")["changed"]
    assert _run(run_module, node, state="trial")["trial"] == NEW
    boots(node, NEW)
    assert _run(run_module, node, state="held", proven=True)["default"] == NEW


def test_check_mode_changes_nothing(node, run_module):
    pinned = _run(run_module, node, check_mode=True, state="pinned")
    assert pinned["changed"] and pinned["default"] == OLD
    trial = _run(run_module, node, check_mode=True, state="trial")
    assert trial["changed"] and trial["default"] == NEW
    assert not (node / DROPIN).exists() and not (node / RECORD).exists() and next_entry(node) is None
    assert default_boot_kernel(str(node))[0] == NEW


def test_a_kernel_grub_cfg_does_not_list_yet_is_listed_before_the_trial(node, run_module):
    # the packages did not run update-grub (grub-common without grub-pc/grub-efi): grub.cfg
    # lists only OLD while /boot holds NEW too; reading the newest from it would try nothing
    _run(run_module, node, state="pinned")
    # then the install: NEW in /boot, grub.cfg as the pin left it, NEW not listed
    cfg = (node / "boot" / "grub" / "grub.cfg").read_text()
    (node / "boot" / "grub" / "grub.cfg").write_text(cfg.replace(NEW, OLD))
    for release in (OLD, NEW):
        (node / "boot" / ("vmlinuz-" + release)).write_text("kernel image\n")
    os.symlink("vmlinuz-" + NEW, node / "boot" / "vmlinuz")
    result = _run(run_module, node, state="trial")
    assert result["changed"] and result["refreshed_for"] == [NEW] and result["trial"] == NEW
    assert next_entry(node) == NEW_PATH
    assert "refreshed_for" not in _run(run_module, node, state="trial")


def test_grub_reboot_failure_fails_naming_it(node, run_module):
    _tool(node, "usr/sbin/grub-reboot", "#!/bin/sh\necho 'grub-editenv: error: cannot open /boot/grub/grubenv' >&2\nexit 1\n")
    result = _run(run_module, node, state="trial")
    assert result["failed"] and "grub-reboot" in result["msg"] and "cannot open" in result["msg"]


def test_a_tried_kernel_without_a_grub_entry_fails_before_the_reboot(node, run_module):
    result = _run(run_module, node, state="trial", kernel="6.1.0-28-amd64")
    assert result["failed"] and "no normal entry of /boot/grub/grub.cfg loads vmlinuz-6.1.0-28-amd64" in result["msg"]
    assert next_entry(node) is None


def test_without_grub_boot_once_says_why_and_changes_nothing(tmp_path, run_module):
    boots(tmp_path, OLD)
    (tmp_path / "boot").mkdir(exist_ok=True)
    os.symlink("vmlinuz-" + NEW, tmp_path / "boot" / "vmlinuz")
    result = _run(run_module, tmp_path, state="trial")
    assert not result["changed"] and not result["held"] and result["method"] == "none"
    assert "boot once needs GRUB" in result["reason"] and "as the packages make it" in result["reason"]
