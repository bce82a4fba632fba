"""The default boot entry as GRUB chooses it, and kernel argument comparison.

Texts: tests/fixtures/boot/ (README there names their sources).
"""

import os
import re
import sys

import pytest

import gpudirect_kernel_args
from ansible.module_utils.gpudirect_kernel import (
    arg_units, default_boot_kernel, edit_args, grub_default_entry, grubby_edit, kernel_args_plan, missing_args,
    kernel_word, parse_dropin_args, parse_grub_cfg, parse_grubby_info, parse_grubenv, render_dropin,
    render_trial_script, resolve_grub_default, trial_plan)
from conftest import PROJECT_FIXTURES, ROOT

HERE = os.path.join(PROJECT_FIXTURES, "boot")
NEW = "4.9.0-3-amd64"
OLD = "2.6.32-openvz-042stab123.9-amd64"
UUID = "e025e52b-91c4-4f64-962d-79f244caa92a"


def _text(name):
    with open(os.path.join(HERE, name), encoding="utf-8") as handle:
        return handle.read()


def _cfg(default=None):
    """The Debian grub.cfg as grub-mkconfig writes it for GRUB_DEFAULT=<default>
    (00_header: GRUB_DEFAULT=saved becomes set default="${saved_entry}")."""
    text = _text("debian9-grub.cfg")
    if default is not None:
        text = text.replace('set default="0"', 'set default="%s"' % default)
    return text


def _resolve(default=None, grubenv="grubenv-empty"):
    return resolve_grub_default(parse_grub_cfg(_cfg(default)), parse_grubenv(_text(grubenv)))


def _image(chosen):
    return os.path.basename(chosen["entry"]["image"])


def test_grub_cfg_menu_tree():
    cfg = parse_grub_cfg(_cfg())
    assert cfg["default"] == "0" and cfg["next_entry_block"] is True
    assert [e["title"] for e in cfg["entries"]] == ["Debian GNU/Linux", "Advanced options for Debian GNU/Linux"]
    first, sub = cfg["entries"]
    assert first["id"] == "gnulinux-simple-" + UUID and first["image"] == "/boot/vmlinuz-" + NEW
    assert first["args"] == ["root=/dev/sda", "ro", "console=ttyS0,19200n8", "net.ifnames=0"]
    assert sub["kind"] == "submenu" and sub["id"] == "gnulinux-advanced-" + UUID
    assert [e["id"] for e in sub["entries"]] == [
        "gnulinux-%s-advanced-%s" % (NEW, UUID), "gnulinux-%s-recovery-%s" % (NEW, UUID),
        "gnulinux-%s-advanced-%s" % (OLD, UUID), "gnulinux-%s-recovery-%s" % (OLD, UUID)]
    assert "single" in sub["entries"][3]["args"]


def test_grub_default_zero_is_the_first_entry():
    chosen = _resolve()
    assert chosen["path"] == ["Debian GNU/Linux"] and _image(chosen) == "vmlinuz-" + NEW
    assert chosen["warnings"] == []


@pytest.mark.parametrize("default", [
    "1>2",
    "Advanced options for Debian GNU/Linux>Debian GNU/Linux, with Linux " + OLD,
    "gnulinux-advanced-%s>gnulinux-%s-advanced-%s" % (UUID, OLD, UUID),
    "1>gnulinux-%s-advanced-%s" % (OLD, UUID),
])
def test_grub_default_pinned_to_the_older_kernel_in_the_submenu(default):
    chosen = _resolve(default)
    assert chosen["path"] == ["Advanced options for Debian GNU/Linux", "Debian GNU/Linux, with Linux " + OLD]
    assert _image(chosen) == "vmlinuz-" + OLD and "single" not in chosen["entry"]["args"]


def test_grub_default_saved_reads_saved_entry_from_grubenv():
    chosen = _resolve("${saved_entry}", "grubenv-saved-openvz")
    assert _image(chosen) == "vmlinuz-" + OLD
    # GRUB_DEFAULT=saved before anything was saved: GRUB boots the first entry
    chosen = _resolve("${saved_entry}", "grubenv-empty")
    assert chosen["path"] == ["Debian GNU/Linux"] and chosen["warnings"] == []


def test_grub_next_entry_wins_for_one_boot():
    # grub-reboot "1>2" after grub-set-default 0: the older kernel boots once
    chosen = _resolve("${saved_entry}", "grubenv-next-entry")
    assert chosen["spec"] == "1>2" and _image(chosen) == "vmlinuz-" + OLD
    assert chosen["warnings"] == ["grubenv next_entry=1>2 boots once (grub-reboot), before the default"]


def test_grub_next_entry_index_walks_the_submenu():
    env = parse_grubenv(_text("grubenv-next-entry"))
    assert env == {"saved_entry": "0", "next_entry": "1>2"}
    chosen = resolve_grub_default(parse_grub_cfg(_cfg()), env)
    assert _image(chosen) == "vmlinuz-" + OLD


def test_grub_unknown_default_falls_back_to_the_first_entry_with_a_warning():
    chosen = _resolve("Debian GNU/Linux, with Linux 9.9.9-removed")
    assert chosen["path"] == ["Debian GNU/Linux"]
    assert chosen["warnings"] and "GRUB boots its first entry" in chosen["warnings"][0]
    # an index past the submenu's end: GRUB boots the submenu's first entry
    chosen = _resolve("1>9")
    assert chosen["path"][-1] == "Debian GNU/Linux, with Linux " + NEW


def test_grub_submenu_alone_boots_its_first_entry():
    chosen = _resolve("1")
    assert chosen["path"] == ["Advanced options for Debian GNU/Linux", "Debian GNU/Linux, with Linux " + NEW]


def test_grub_old_style_title_is_remapped_into_the_submenu():
    # 10_linux writes this correction when GRUB_DEFAULT names a title that moved
    # into the "Advanced options" submenu (title_correction_code)
    remap = ("if [ \"x$default\" = 'Debian GNU/Linux, with Linux %s' ]; then default='Advanced options for "
             "Debian GNU/Linux>Debian GNU/Linux, with Linux %s'; fi;\n" % (OLD, OLD))
    text = _cfg("Debian GNU/Linux, with Linux " + OLD).replace("### END /etc/grub.d/10_linux ###",
                                                               remap + "### END /etc/grub.d/10_linux ###")
    chosen = resolve_grub_default(parse_grub_cfg(text), {})
    assert _image(chosen) == "vmlinuz-" + OLD and chosen["warnings"] == []


def _tree(tmp_path, cfg, grubenv=None, link=None):
    (tmp_path / "boot" / "grub").mkdir(parents=True)
    if cfg is not None:
        (tmp_path / "boot" / "grub" / "grub.cfg").write_text(cfg)
    if grubenv:
        (tmp_path / "boot" / "grub" / "grubenv").write_text(_text(grubenv))
    if link:
        os.symlink("vmlinuz-" + link, str(tmp_path / "boot" / "vmlinuz"))
    return str(tmp_path)


def test_default_boot_kernel_follows_grub_not_the_newest_vmlinuz_link(tmp_path):
    root = _tree(tmp_path, _cfg("${saved_entry}"), "grubenv-saved-openvz", link=NEW)
    assert default_boot_kernel(root) == (OLD, "/boot/grub/grub.cfg", [])
    entry = grub_default_entry(root)
    assert entry["args"] == ["root=/dev/sda", "ro", "console=ttyS0,19200n8", "net.ifnames=0"]
    assert entry["title"] == "Advanced options for Debian GNU/Linux > Debian GNU/Linux, with Linux " + OLD


def test_default_boot_kernel_without_a_linux_default_entry_is_unknown(tmp_path):
    cfg = ("set default=\"0\"\nmenuentry 'UEFI Firmware Settings' $menuentry_id_option 'uefi-firmware' {\n"
           "\tfwsetup\n}\n")
    release, source, warnings = default_boot_kernel(_tree(tmp_path, cfg, link=NEW))
    assert (release, source) == (None, "/boot/grub/grub.cfg")
    assert warnings == ["the default GRUB entry UEFI Firmware Settings loads no Linux kernel"]


def test_grubby_info_default():
    info = parse_grubby_info(_text("rocky9-grubby-info-default.txt"))
    assert info["kernel"] == "/boot/vmlinuz-5.14.0-162.6.1.el9_1.x86_64"
    assert info["args"] == ["ro", "crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M", "rd.lvm.lv=rl_devmaster1/root",
                            "net.ifnames=0"]


def test_arg_units_drop_quotes_split_pci_options_and_skip_grub_variables():
    assert arg_units(['pci=realloc,config_acs="0x00000@0000:02:08.0"', "iommu=pt", "$vt_handoff", "iommu=pt"]) == [
        "pci=realloc", "pci=config_acs=0x00000@0000:02:08.0", "iommu=pt"]


def test_missing_args_against_proc_cmdline():
    cmdline = "BOOT_IMAGE=/boot/vmlinuz-6.1.0-18-amd64 root=UUID=x ro intel_iommu=on iommu=pt quiet".split()
    assert missing_args(["iommu=pt"], cmdline) == []
    assert missing_args(["iommu=pt", "pci=realloc"], cmdline) == ["pci=realloc"]
    # the kernel sees the value without GRUB's quotes, in one pci= or in several
    assert missing_args(['pci=config_acs="0x0@0000:02:08.0"'], ["pci=realloc,config_acs=0x0@0000:02:08.0"]) == []
    assert missing_args(['pci=config_acs="0x0@0000:02:08.0"'], ["pci=config_acs=0x1@0000:02:08.0"]) == [
        "pci=config_acs=0x0@0000:02:08.0"]


def test_grubby_edit_merges_pci_options_and_removes_only_our_stale_ones():
    current = parse_grubby_info(_text("rocky9-grubby-info-default.txt"))["args"] + ["pci=realloc"]
    assert grubby_edit(current, ['pci=config_acs="0x0@0000:02:08.0"', "iommu=pt"], []) == (
        ["pci=realloc"], ['pci=realloc,config_acs="0x0@0000:02:08.0"', "iommu=pt"])
    after = current[:-1] + ['pci=realloc,config_acs="0x0@0000:02:08.0"', "iommu=pt"]
    assert grubby_edit(after, ['pci=config_acs="0x0@0000:02:08.0"', "iommu=pt"],
                       ['pci=config_acs="0x0@0000:02:08.0"', "iommu=pt"]) == ([], [])
    # the owner no longer wants its arguments: only those go, realloc stays
    assert grubby_edit(after, [], ['pci=config_acs="0x0@0000:02:08.0"', "iommu=pt"]) == (
        ['pci=realloc,config_acs="0x0@0000:02:08.0"', "iommu=pt"], ["pci=realloc"])


def test_dropin_round_trip_keeps_quotes_for_grub():
    args = ['pci=config_acs="0x0@0000:02:08.0;0x0@0000:03:00.0"', "iommu=pt"]
    text = render_dropin("pcie_acs", args)
    assert 'GRUB_CMDLINE_LINUX="${GRUB_CMDLINE_LINUX} pci=config_acs=\\"0x0@0000:02:08.0;0x0@0000:03:00.0\\" iommu=pt"' in text
    assert parse_dropin_args(text) == args
    # the drop-ins earlier releases of gpudirect_host_prereqs and gpudirect_pcie_acs wrote
    assert parse_dropin_args('GRUB_CMDLINE_LINUX="${GRUB_CMDLINE_LINUX} iommu=pt"\n') == ["iommu=pt"]
    assert parse_dropin_args('GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX pci=config_acs=\\"0x0@0000:02:08.0\\""') == [
        'pci=config_acs="0x0@0000:02:08.0"']
    assert parse_dropin_args("# nothing\n") == []


# ---------------------------------------------------------------------------
# the plan of one owner's arguments (module gpudirect_kernel_args)

CMDLINE = "BOOT_IMAGE=/boot/vmlinuz-4.9.0-3-amd64 root=/dev/sda ro console=ttyS0,19200n8 net.ifnames=0\n"


def _node(tmp_path, cfg, dropin=None, cmdline=CMDLINE, update_grub=True):
    root = _tree(tmp_path, cfg)
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "cmdline").write_text(cmdline)
    if update_grub:
        (tmp_path / "usr" / "sbin").mkdir(parents=True)
        (tmp_path / "usr" / "sbin" / "update-grub").write_text("#!/bin/sh\n")
    if dropin is not None:
        (tmp_path / "etc" / "default" / "grub.d").mkdir(parents=True)
        (tmp_path / "etc" / "default" / "grub.d" / "90-gpudirect-iommu.cfg").write_text(dropin)
    return root


def _plan(run_module, root, args, method="grub_dropin"):
    return run_module(gpudirect_kernel_args, {
        "method": method, "owner": "host_prereqs", "args": args, "root": root,
        "dropin": "/etc/default/grub.d/90-gpudirect-iommu.cfg", "tool": "/usr/sbin/update-grub"}, check_mode=True)


def test_plan_fresh_node_writes_regenerates_and_asks_for_a_reboot(tmp_path, run_module):
    result = _plan(run_module, _node(tmp_path, _cfg()), ["iommu=pt"])
    assert result["changed"] is False and result["applicable"] is True
    assert result["boot_entry"] == "Debian GNU/Linux" and result["owned_before"] == []
    assert result["missing_boot"] == ["iommu=pt"] and result["regenerate"] is True
    assert result["missing_cmdline"] == ["iommu=pt"] and result["reboot"] is True
    assert 'GRUB_CMDLINE_LINUX="${GRUB_CMDLINE_LINUX} iommu=pt"' in result["dropin_content"]


def test_plan_repairs_a_dropin_whose_update_grub_failed(tmp_path, run_module):
    # the drop-in is in place from the failed run, grub.cfg was never regenerated
    dropin = 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX iommu=pt"\n'
    result = _plan(run_module, _node(tmp_path, _cfg(), dropin=dropin), ["iommu=pt"])
    assert result["owned_before"] == ["iommu=pt"] and result["regenerate"] is True and result["reboot"] is True


def test_plan_converged_and_after_update_grub_before_the_reboot(tmp_path, run_module):
    dropin = 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX iommu=pt"\n'
    cfg = _cfg().replace("ro console=ttyS0,19200n8 net.ifnames=0", "ro console=ttyS0,19200n8 net.ifnames=0 iommu=pt")
    result = _plan(run_module, _node(tmp_path, cfg, dropin=dropin), ["iommu=pt"])
    assert result["regenerate"] is False and result["reboot"] is True and result["missing_cmdline"] == ["iommu=pt"]
    result = _plan(run_module, _node(tmp_path / "b", cfg, dropin=dropin, cmdline=CMDLINE.strip() + " iommu=pt"),
                   ["iommu=pt"])
    assert result["regenerate"] is False and result["reboot"] is False and result["changes"] == []


def test_plan_removal_regenerates_and_reboots_away_from_the_argument(tmp_path, run_module):
    dropin = 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX iommu=pt"\n'
    cfg = _cfg().replace("ro console=ttyS0,19200n8 net.ifnames=0", "ro console=ttyS0,19200n8 net.ifnames=0 iommu=pt")
    result = _plan(run_module, _node(tmp_path, cfg, dropin=dropin, cmdline=CMDLINE.strip() + " iommu=pt"), [])
    assert result["stale_boot"] == ["iommu=pt"] and result["regenerate"] is True
    assert result["stale_cmdline"] == ["iommu=pt"] and result["reboot"] is True and result["dropin_content"] == ""


def test_plan_without_grub_applies_nothing_and_asks_for_no_reboot(tmp_path, run_module):
    result = _plan(run_module, _node(tmp_path, _cfg(), update_grub=False), ["iommu=pt"])
    assert result["applicable"] is False and result["tool_present"] is False
    assert result["regenerate"] is False and result["reboot"] is False and result["changes"] == []
    result = _plan(run_module, _node(tmp_path / "b", _cfg()), ["iommu=pt"], method="none")
    assert result["applicable"] is False and result["reboot"] is False


def test_plan_cmdline_only_names_what_the_running_kernel_lacks(tmp_path, run_module):
    root = _node(tmp_path, _cfg(), cmdline=CMDLINE.strip() + " iommu=pt pci=realloc,config_acs=0x0@0000:02:08.0")
    result = run_module(gpudirect_kernel_args, {"method": "cmdline", "root": root,
                                                "args": ["iommu=pt", 'pci=config_acs="0x0@0000:02:08.0"', "x=1"]})
    assert result["missing_cmdline"] == ["x=1"] and result["reboot"] is False


def test_plan_rejects_arguments_with_blanks(tmp_path, run_module):
    result = run_module(gpudirect_kernel_args, {"method": "cmdline", "root": str(tmp_path), "args": ["a b"]})
    assert result["failed"] and "without blanks" in result["msg"]


def test_plan_grubby_from_the_default_entry():
    boot = parse_grubby_info(_text("rocky9-grubby-info-default.txt"))["args"]
    plan = kernel_args_plan("grubby", ["iommu=pt"], [], ["ro"], boot, True)
    assert (plan["grubby_remove"], plan["grubby_add"], plan["reboot"]) == ([], ["iommu=pt"], True)
    plan = kernel_args_plan("grubby", ["iommu=pt"], ["iommu=pt"], ["ro", "iommu=pt"], boot + ["iommu=pt"], True)
    assert (plan["grubby_add"], plan["grubby_remove"], plan["reboot"], plan["changes"]) == ([], [], False, [])


def test_plan_without_a_readable_default_entry_regenerates_only_for_a_changed_dropin(tmp_path, run_module):
    cfg = "set default=\"0\"\nmenuentry 'UEFI Firmware Settings' $menuentry_id_option 'uefi-firmware' {\n\tfwsetup\n}\n"
    dropin = 'GRUB_CMDLINE_LINUX="${GRUB_CMDLINE_LINUX} iommu=pt"\n'
    result = _plan(run_module, _node(tmp_path, cfg, dropin=dropin), ["iommu=pt"])
    assert result["boot_args"] is None and result["regenerate"] is False
    # the reboot request still follows the running kernel
    assert result["reboot"] is True


def test_grub_entry_through_the_vmlinuz_symlink(tmp_path):
    # a hand-written (or stand-in) grub.cfg that boots the link Debian keeps on a kernel
    cfg = "menuentry 'Debian GNU/Linux' {\n\tlinux /vmlinuz root=/dev/vda ro iommu=pt\n}\n"
    root = _tree(tmp_path, cfg, link=NEW)
    entry = grub_default_entry(root)
    assert entry["release"] == NEW and entry["args"] == ["root=/dev/vda", "ro", "iommu=pt"]


# ---------------------------------------------------------------------------
# boot once, then promote (issue #29, outcome 3): the trial entry is a copy of the
# default entry of the real Debian grub.cfg with the new arguments, and both readings
# of grub.cfg (the toolkit's and the VM harness's boot loader stand-in) boot it once

def _boot_once(run_module, root, args, pending=()):
    return run_module(gpudirect_kernel_args, {
        "method": "grub_dropin", "owner": "host_prereqs", "args": args, "root": root, "boot_once": True,
        "pending": list(pending), "dropin": "/etc/default/grub.d/90-gpudirect-iommu.cfg",
        "tool": "/usr/sbin/update-grub"}, check_mode=True)


def _with_trial(cfg, script):
    """grub.cfg as update-grub writes it with the trial script in /etc/grub.d: the
    script's output (from its `exec tail` line on) appended after 10_linux's entries."""
    lines = script.splitlines()
    start = int(re.search(r"tail -n \+(\d+)", script).group(1))
    return cfg + "\n### BEGIN /etc/grub.d/42_gpudirect_trial ###\n" + "\n".join(lines[start - 1:]) + \
        "\n### END /etc/grub.d/42_gpudirect_trial ###\n"


def test_boot_once_fresh_node_plans_a_trial_entry_not_a_new_default(tmp_path, run_module):
    result = _boot_once(run_module, _node(tmp_path, _cfg()), ["iommu=pt"])
    assert result["trial"] and result["deferred"] is False and result["reboot"] is True
    assert result["trial_args"] == ["root=/dev/sda", "ro", "console=ttyS0,19200n8", "net.ifnames=0", "iommu=pt"]
    assert not any(c.startswith("regenerate grub.cfg") for c in result["changes"])
    assert any("grub-reboot gpudirect-trial" in c for c in result["changes"])
    script = result["trial"]
    assert script.startswith("#!/bin/sh\n") and "--id gpudirect-trial {" in script
    # the copy keeps the default entry's body (search, insmod, initrd), only the linux line changes
    assert "search --no-floppy --fs-uuid --set=root e025e52b-91c4-4f64-962d-79f244caa92a" in script
    assert "initrd  /boot/initrd.img-4.9.0-3-amd64" in script
    assert "linux /boot/vmlinuz-4.9.0-3-amd64 root=/dev/sda ro console=ttyS0,19200n8 net.ifnames=0 iommu=pt" in script


def test_boot_once_trial_boots_once_and_the_default_stays(tmp_path, run_module):
    script = _boot_once(run_module, _node(tmp_path, _cfg()), ["iommu=pt"])["trial"]
    cfg = parse_grub_cfg(_with_trial(_cfg(), script))
    nxt = parse_grubenv("next_entry=gpudirect-trial\n")
    once = resolve_grub_default(cfg, nxt)
    assert once["entry"]["id"] == "gpudirect-trial" and "iommu=pt" in once["entry"]["args"]
    assert once["entry"]["image"] == "/boot/vmlinuz-4.9.0-3-amd64"
    # what boots after that one boot (GRUB cleared next_entry), and what the module compares with
    for after in (resolve_grub_default(cfg, {}), resolve_grub_default(cfg, nxt, ignore_next=("gpudirect-trial",))):
        assert after["path"] == ["Debian GNU/Linux"] and "iommu=pt" not in after["entry"]["args"]
    # the VM's boot loader stand-in, an independent reading, boots the same entry once
    sys.path.insert(0, os.path.join(ROOT, "tests", "harness", "vm"))
    import grub_menu
    choice = grub_menu.choose(_with_trial(_cfg(), script), "next_entry=gpudirect-trial\n")
    assert choice.entry_id == "gpudirect-trial" and "iommu=pt" in choice.args and choice.boot_once
    assert "iommu=pt" not in grub_menu.choose(_with_trial(_cfg(), script), "").args


def test_boot_once_trial_pending_does_not_hide_the_default(tmp_path, run_module):
    # a second owner in the same run, after the first wrote the trial and grub-reboot set next_entry:
    # it compares with the default, and its trial carries both owners' arguments
    script = _boot_once(run_module, _node(tmp_path, _cfg()), ["iommu=pt"])["trial"]
    root = _node(tmp_path / "b", _with_trial(_cfg(), script))
    (tmp_path / "b" / "boot" / "grub" / "grubenv").write_text("next_entry=gpudirect-trial\n")
    result = _boot_once(run_module, root, ["pci=config_acs=xxxxxx0@0000:00:04.0"],
                        pending=[{"args": ["iommu=pt"], "owned_before": []}])
    assert result["boot_entry"] == "Debian GNU/Linux" and result["next_entry"] == "gpudirect-trial"
    assert result["trial_entry"] is True
    assert result["trial_args"][-2:] == ["iommu=pt", "pci=config_acs=xxxxxx0@0000:00:04.0"]


def test_boot_once_running_kernel_already_carries_it_defers_the_dropin(tmp_path, run_module):
    # booted the trial (or the admin's own argument): nothing to boot, the drop-in waits for verification
    result = _boot_once(run_module, _node(tmp_path, _cfg(), cmdline=CMDLINE.strip() + " iommu=pt"), ["iommu=pt"])
    assert result["deferred"] is True and result["trial"] is None and result["reboot"] is False
    assert any("after the node verified" in c for c in result["changes"])


def test_boot_once_converged_node_plans_nothing(tmp_path, run_module):
    dropin = render_dropin("host_prereqs", ["iommu=pt"])
    cfg = _cfg().replace("ro console=ttyS0,19200n8 net.ifnames=0", "ro console=ttyS0,19200n8 net.ifnames=0 iommu=pt")
    result = _boot_once(run_module, _node(tmp_path, cfg, dropin=dropin, cmdline=CMDLINE.strip() + " iommu=pt"),
                        ["iommu=pt"])
    assert result["trial"] is None and result["deferred"] is False and result["changes"] == []


def test_boot_once_removal_boots_once_without_the_argument(tmp_path, run_module):
    dropin = render_dropin("host_prereqs", ["iommu=pt"])
    cfg = _cfg().replace("ro console=ttyS0,19200n8 net.ifnames=0", "ro console=ttyS0,19200n8 net.ifnames=0 iommu=pt")
    result = _boot_once(run_module, _node(tmp_path, cfg, dropin=dropin, cmdline=CMDLINE.strip() + " iommu=pt"), [])
    assert result["trial"] and "iommu=pt" not in result["trial_args"] and result["reboot"] is True


def test_boot_once_without_a_default_entry_to_copy_writes_the_default_and_says_so(tmp_path, run_module):
    # a default entry without Linux, or no grub.cfg yet (GRUB's tools installed, update-grub never run:
    # molecule/os_release_pin's container): no proven entry to copy, so the old path, with a warning
    cfg = "menuentry 'Windows' --id win {\n  chainloader +1\n}\n"
    for root in (_node(tmp_path / "a", cfg), _node(tmp_path / "bare", None)):
        result = _boot_once(run_module, root, ["iommu=pt"])
        assert result["trial"] is None and result["deferred"] is False and result["reboot"] is True
        assert "no proven entry to copy" in result["unavailable"]
        assert any("gpudirect_reboot_boot_once" in str(w) and "iommu=pt" in str(w) for w in result["warnings"])
        assert result["dropin_changed"] is True


def test_trial_script_quotes_what_grub_would_split():
    entry = {"title": "Debian GNU/Linux", "body": ["\tlinux\t/boot/vmlinuz-6.1.0-40-amd64 root=UUID=x ro quiet",
                                                    "\tinitrd\t/boot/initrd.img-6.1.0-40-amd64"]}
    script = render_trial_script(entry, ["root=UUID=x", "ro", "$vt_handoff", "pci=config_acs=a;b"], ["pcie_acs"])
    line = [ln for ln in script.splitlines() if ln.strip().startswith("linux")][0]
    assert line == "\tlinux /boot/vmlinuz-6.1.0-40-amd64 root=UUID=x ro $vt_handoff 'pci=config_acs=a;b'"
    assert parse_grub_cfg(script.split("\n", 5)[5])["entries"][0]["args"][-1] == "pci=config_acs=a;b"
    assert render_trial_script({"title": "x", "body": ["chainloader +1"]}, ["a"], ["o"]) is None


@pytest.mark.parametrize("dropin_word, kernel_gets", [
    # the form gpudirect_pcie_acs puts in its drop-in; before this, the trial entry
    # single-quoted it whole and Debian 12's kernel logged "Can't parse
    # disable_acs_redir parameter" (secureboot scenario, acs-lockdown branch)
    ('pci=disable_acs_redir="0000:00:04.0"', "pci=disable_acs_redir=0000:00:04.0"),
    ('pci=config_acs="000000@0000:00:04.0;000000@0000:00:05.0"',
     "pci=config_acs=000000@0000:00:04.0;000000@0000:00:05.0"),
    ("iommu=pt", "iommu=pt"),
    ('dyndbg="file pci.c +p"', 'dyndbg="file pci.c +p"'),
])
def test_trial_entry_hands_the_kernel_what_grub_mkconfig_would(dropin_word, kernel_gets):
    """GRUB drops the quotes of a drop-in word that grub-mkconfig copied into grub.cfg;
    the trial entry must give the kernel the same word, read back as GRUB reads it."""
    assert kernel_word(dropin_word) == kernel_gets
    entry = {"title": "Debian GNU/Linux", "image": "/boot/vmlinuz-6.1.0-40-amd64", "args": ["root=UUID=x", "ro"],
             "body": ["\tlinux\t/boot/vmlinuz-6.1.0-40-amd64 root=UUID=x ro", "\tinitrd\t/boot/initrd.img-6.1.0-40-amd64"]}
    plan = {"regenerate": True, "reboot": True}
    once = trial_plan(plan, entry, [{"args": [dropin_word], "owned_before": []}], ["pcie_acs"], True)
    assert once["trial_args"] == ["root=UUID=x", "ro", kernel_gets]
    assert parse_grub_cfg(once["trial"].split("\n", 5)[5])["entries"][0]["args"] == once["trial_args"]
    # a re-run that already owns the word removes nothing and adds nothing twice
    again = trial_plan(plan, dict(entry, args=once["trial_args"]),
                       [{"args": [dropin_word], "owned_before": [dropin_word]}], ["pcie_acs"], True)
    assert again["trial_args"] == once["trial_args"]


def test_edit_args_applies_each_owner_in_turn():
    assert edit_args(["ro", "iommu=pt"], [{"args": [], "owned_before": ["iommu=pt"]},
                                          {"args": ["pci=realloc"], "owned_before": []}]) == ["ro", "pci=realloc"]
