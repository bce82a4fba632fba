# -*- coding: utf-8 -*-
"""Running and default boot kernel of a host, shared by the project's modules.

``gpudirect_facts`` publishes both; ``gpudirect_dkms`` builds DKMS modules for
both. One implementation keeps them agreeing on which kernel boots next.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import shlex

from ansible.module_utils.gpudirect_host import C_LOCALE, read_text  # noqa: F401  C_LOCALE: imported from here by the modules
from ansible.module_utils.gpudirect_versions import KERNEL_RELEASE_RE

VMLINUZ_LINKS = ("boot/vmlinuz", "vmlinuz")

# A kernel release as ``uname -r`` prints it (gpudirect_versions.KERNEL_RELEASE_RE). The release
# is the name of /lib/modules/<release>, /boot/vmlinuz-<release> and a DKMS tree directory, so
# it is one path component: no "/", no whitespace, no shell metacharacters, never "." or "..";
# utsname holds at most 64 characters (__NEW_UTS_LEN).
KERNEL_RELEASE_MAX = 64


def _token_problem(value, longest, too_long, allowed):
    """Why ``value`` is not one non-empty string token of at most ``longest`` characters, made of
    ASCII letters, digits and the characters in ``allowed`` (``too_long``: the sentence for a
    longer one, with a %d for ``longest``); None when it is one."""
    if not isinstance(value, str):
        return "it is a %s, not a string" % type(value).__name__
    if not value:
        return "it is empty"
    if len(value) > longest:
        return too_long % longest
    bad = sorted(set(c for c in value if not (c.isalnum() and c.isascii()) and c not in allowed))
    if bad:
        return "it contains %s" % ", ".join(repr(c) for c in bad)
    return None


def release_problem(value):
    """Why ``value`` is not a kernel release (a sentence), or None when it is one."""
    problem = _token_problem(value, KERNEL_RELEASE_MAX, "it is longer than the %d characters a kernel release can have",
                             "._+~-")
    if problem:
        return problem
    if value in (".", ".."):
        return "it is a directory reference, not a release"
    if not KERNEL_RELEASE_RE.match(value):
        return "it does not start with VERSION.PATCHLEVEL (digits, a dot, digits) or has empty parts"
    return None


# A package version as apt-cache policy and rpm print it (gpudirect_kernel_update_target): Debian
# policy 5.6.12 [epoch:]upstream_version[-debian_revision], the upstream part starting with a digit
# and made of letters, digits and . + ~ -; RPM's [epoch:]version-release also uses _ and ^
# (5.14.0-427.13.1.el9_4). One token: never a blank, "/", "=" or a shell character.
PACKAGE_VERSION_RE = re.compile(r"^(?:[0-9]+:)?[0-9][A-Za-z0-9.+~^_-]*\Z")
PACKAGE_VERSION_MAX = 128


def package_version_problem(value):
    """Why ``value`` is not a package version (a sentence), or None when it is one."""
    problem = _token_problem(value, PACKAGE_VERSION_MAX, "it is longer than %d characters", ".+~^_-:")
    if problem:
        return problem
    if not PACKAGE_VERSION_RE.match(value):
        return "it does not start with a digit (or an epoch, digits and a colon, then a digit)"
    return None


def is_release(value):
    """True when ``value`` looks like a kernel release (:func:`release_problem` has nothing)."""
    return release_problem(value) is None


def validate_release(value, source="kernel release"):
    """``value`` when it is a kernel release; otherwise ValueError naming the value and
    ``source`` (the knob, file or command it came from)."""
    problem = release_problem(value)
    if problem:
        raise ValueError("%s: %r is not a kernel release as uname -r prints it (e.g. 6.1.0-50-amd64, "
                         "5.14.0-427.13.1.el9_4.x86_64): %s" % (source, value, problem))
    return value


def invalid_releases(values, source="kernels"):
    """One message per value of ``values`` that is not a kernel release (an empty list when all are)."""
    out = []
    for value in values or []:
        try:
            validate_release(value, source)
        except ValueError as exc:
            out.append(str(exc))
    return out


def under(root, relative):
    """``relative`` (absolute or not) below ``root`` (a test's fake tree; "/" on a node)."""
    return os.path.join(root or "/", (relative or "").lstrip("/"))


def _read_first_line(path):
    try:
        with open(path) as handle:
            return handle.readline().strip() or None
    except (IOError, OSError):
        return None


def running_kernel(root="/", live=False):
    """Release of the running kernel: ``<root>/proc/sys/kernel/osrelease``, else
    ``uname -r`` when ``live`` (root describes this host); None when unknown."""
    path = under(root, "proc/sys/kernel/osrelease")
    release, source = _read_first_line(path), path
    if not release and live:
        release, source = os.uname()[2], "uname -r"
    return validate_release(release, source) if release else release


def _release_of_image(path):
    """``/boot/vmlinuz-6.1.0-20-amd64`` -> ``6.1.0-20-amd64``; None otherwise."""
    base = os.path.basename((path or "").strip())
    if base.startswith("vmlinuz-") and is_release(base[len("vmlinuz-"):]):
        return base[len("vmlinuz-"):]
    return None   # not an image of a release (vmlinuz-0-rescue-<machine-id>, a stray name)


def default_boot_kernel(root="/", runner=None, live=False):
    """Kernel release booted next, and where that came from.

    Read the way the boot loader chooses it: GRUB's default entry in
    ``<root>/boot/grub/grub.cfg`` with its environment block (Debian/Ubuntu:
    GRUB_DEFAULT, ``saved`` + grubenv ``saved_entry``, ``next_entry``, numbers,
    titles, ids and ``A>B`` submenu paths; see :func:`resolve_grub_default`).
    EL keeps its entries in BLS files that grub.cfg does not list; there, and only
    when ``live`` (``grubby`` describes this host, not ``root``), ``grubby
    --default-kernel`` names the default entry's image. Without either, the
    symlink ``/boot/vmlinuz`` (or ``/vmlinuz``) that Debian keeps on the newest
    kernel is the last resort.

    ``runner`` provides ``get_bin_path(name)`` and ``run_command(args,
    environ_update=...)`` (an AnsibleModule); None runs nothing.

    Returns ``(release or None, source or None, warnings)``; source is
    ``/boot/grub/grub.cfg``, ``grubby``, ``/boot/vmlinuz`` or ``/vmlinuz``.
    A grub.cfg whose default entry loads no Linux kernel gives None (with a
    warning), not a guess from the symlink.
    """
    warnings = []
    grub = grub_default_entry(root)
    if grub is not None and (grub["release"] or grub["title"]):
        warnings.extend(grub["warnings"])
        return grub["release"], grub["source"], warnings
    if live and runner is not None:
        try:
            grubby = runner.get_bin_path("grubby")
        except Exception:
            grubby = None
        if grubby:
            rc, out, err = runner.run_command([grubby, "--default-kernel"], environ_update=dict(C_LOCALE))
            release = _release_of_image(out) if rc == 0 else None
            if release:
                return release, "grubby", warnings
            warnings.append("grubby --default-kernel gave rc=%s %s" % (rc, (err or out or "").strip()))
            return None, None, warnings
    for link in VMLINUZ_LINKS:
        candidate = under(root, link)
        if os.path.islink(candidate):
            release = _release_of_image(os.readlink(candidate))
            if release:
                return release, "/" + link, warnings
    return None, None, warnings


# ---------------------------------------------------------------------------
# GRUB: which entry boots next, and with which arguments
#
# GRUB 2 reads /boot/grub/grub.cfg. grub-mkconfig writes GRUB_DEFAULT from
# /etc/default/grub into it as `set default="..."` (`"${saved_entry}"` for
# GRUB_DEFAULT=saved, read from the environment block /boot/grub/grubenv, where
# grub-set-default writes it); a `next_entry` in grubenv (grub-reboot) wins for
# one boot. The value is an entry number, title or --id, and `A>B` walks into
# submenu A. An entry that matches nothing makes GRUB boot the first entry of
# that menu (grub-core/normal/menu.c), as does an unset default.

GRUB_CFG = "boot/grub/grub.cfg"
GRUBENV = "boot/grub/grubenv"
# The one-shot entry a new kernel command line is booted with before it becomes the
# default (see "Boot once, then promote" below).
TRIAL_ID = "gpudirect-trial"
_LINUX_COMMANDS = ("linux", "linuxefi", "linux16")
_SET_DEFAULT_RE = re.compile(r"""^\s*(?:set\s+)?default=(?P<value>"[^"]*"|'[^']*'|\S*)\s*(?:;.*)?$""")
_REMAP_RE = re.compile(r"""^\s*if \[ "x\$default" = '(?P<old>(?:[^']|'\\'')*)' \]; then default='(?P<new>(?:[^']|'\\'')*)'; fi;?\s*$""")


def _unquote(value):
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _words(text):
    """Shell words of a grub.cfg line as GRUB's parser sees them (quotes removed)."""
    try:
        return shlex.split(text, comments=False, posix=True)
    except ValueError:
        return text.split()


def parse_grubenv(text):
    """``/boot/grub/grubenv`` (``# GRUB Environment Block``, ``name=value`` lines,
    padded with ``#``) -> dict."""
    env = {}
    for line in (text or "").splitlines():
        if not line or line.startswith("#") or "=" not in line:
            continue
        name, value = line.split("=", 1)
        env[name.strip()] = value
    return env


def parse_grub_cfg(text):
    """grub.cfg -> ``{"default": raw value or None, "next_entry_block": bool,
    "remap": {old title: new path}, "entries": [entry, ...]}``.

    An entry is ``{"kind": "menuentry"|"submenu", "title", "id", "image",
    "args" (list), "entries" (submenu children), "body" (a menuentry's raw lines
    between its braces)}``; ``image``/``args`` come from the entry's first
    ``linux`` line (None/[] for chainloader entries)."""
    top = {"entries": []}
    stack = [top]
    default = None
    next_block = False
    remap = {}
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        current = stack[-1]
        owner = next((e for e in reversed(stack) if e.get("kind") == "menuentry"), None)
        if line.startswith("}"):
            if len(stack) > 1:
                closed = stack.pop()
                if owner is not None and closed is not owner:
                    owner["body"].append(raw)
            continue
        if owner is not None:
            owner["body"].append(raw)
        words = _words(line[:-1]) if line.endswith("{") else None
        if words and words[0] in ("menuentry", "submenu") and len(words) > 1:
            entry_id = None
            for i, word in enumerate(words):
                if word in ("$menuentry_id_option", "${menuentry_id_option}", "--id") and i + 1 < len(words):
                    entry_id = words[i + 1]
            entry = {"kind": words[0], "title": words[1], "id": entry_id, "image": None, "args": [], "entries": [],
                     "body": []}
            current.setdefault("entries", []).append(entry)
            stack.append(entry)
            continue
        if line.endswith("{"):
            # function bodies and other blocks: nothing in them is a menu entry
            stack.append({"kind": "block", "entries": []})
            continue
        if len(stack) == 1:
            match = _SET_DEFAULT_RE.match(line)
            if match:
                value = _unquote(match.group("value"))
                if "next_entry" in value:
                    next_block = True
                else:
                    default = value
                continue
            match = _REMAP_RE.match(line)
            if match:
                remap[match.group("old").replace("'\\''", "'")] = match.group("new").replace("'\\''", "'")
            continue
        if current.get("kind") == "menuentry" and current["image"] is None:
            words = _words(line)
            if words and words[0] in _LINUX_COMMANDS and len(words) > 1:
                current["image"] = words[1]
                current["args"] = words[2:]
    return {"default": default, "next_entry_block": next_block, "remap": remap, "entries": top["entries"]}


def _expand(value, env):
    return re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", lambda m: env.get(m.group(1), ""), value or "")


def _split_path(spec):
    """``A>B`` -> [A, B]; ``>>`` is a literal ``>`` in a title."""
    parts, part, i = [], "", 0
    while i < len(spec):
        if spec[i] == ">":
            if spec[i + 1:i + 2] == ">":
                part += ">"
                i += 2
                continue
            parts.append(part)
            part = ""
        else:
            part += spec[i]
        i += 1
    parts.append(part)
    return parts


def resolve_grub_default(cfg, env=None, ignore_next=()):
    """The entry GRUB boots, as ``{"spec", "path" (titles), "entry", "warnings"}``;
    ``entry`` is None when the menu has none. ``cfg`` comes from
    :func:`parse_grub_cfg`, ``env`` from :func:`parse_grubenv`. A grubenv
    ``next_entry`` named in ``ignore_next`` is left out: the entry is then the
    default that boots after that one-shot boot."""
    env = env or {}
    warnings = []
    if cfg["next_entry_block"] and env.get("next_entry") and env["next_entry"] not in ignore_next:
        spec = env["next_entry"]
        warnings.append("grubenv next_entry=%s boots once (grub-reboot), before the default" % spec)
    else:
        spec = _expand(cfg["default"], env) if cfg["default"] is not None else ""
    spec = cfg["remap"].get(spec, spec)
    menu = cfg["entries"]
    path = []
    entry = None
    parts = _split_path(spec) if spec else ["0"]
    while True:
        if not menu:
            return {"spec": spec, "path": path, "entry": None, "warnings": warnings + ["the GRUB menu has no entry"]}
        part = parts.pop(0) if parts else "0"
        if part.isdigit():
            index = int(part)
            chosen = menu[index] if index < len(menu) else None
        else:
            chosen = next((e for e in menu if part in (e["title"], e["id"])), None)
        if chosen is None:
            warnings.append("GRUB default %r: no entry %r in %s, GRUB boots its first entry" %
                            (spec, part, "the menu" if not path else "submenu " + repr(path[-1])))
            chosen = menu[0]
        path.append(chosen["title"])
        entry = chosen
        if chosen["kind"] != "submenu":
            break
        menu = chosen["entries"]
    return {"spec": spec, "path": path, "entry": entry, "warnings": warnings}


def grub_default_entry(root="/", ignore_next=()):
    """The default entry of ``<root>/boot/grub/grub.cfg`` with the environment
    block next to it: ``{"release", "image", "args", "title", "source",
    "warnings", "body", "next_entry"}``, or None when there is no grub.cfg.
    ``ignore_next``: see :func:`resolve_grub_default`."""
    text = read_text(under(root, GRUB_CFG))
    if text is None:
        return None
    cfg = parse_grub_cfg(text)
    env = parse_grubenv(read_text(under(root, GRUBENV)))
    chosen = resolve_grub_default(cfg, env, ignore_next)
    entry = chosen["entry"] or {}
    warnings = list(chosen["warnings"])
    release = _release_of_image(entry.get("image"))
    if entry.get("image") and not release:
        # `linux /vmlinuz`: the symlink Debian keeps on a kernel, under / or /boot
        for candidate in (entry["image"], "boot/" + entry["image"].lstrip("/")):
            if os.path.islink(under(root, candidate)):
                release = _release_of_image(os.readlink(under(root, candidate)))
                break
    if chosen["entry"] is not None and not entry.get("image"):
        warnings.append("the default GRUB entry %s loads no Linux kernel" % " > ".join(chosen["path"]))
    return {"release": release, "image": entry.get("image"),
            "args": list(entry.get("args") or []), "title": " > ".join(chosen["path"]),
            "source": "/" + GRUB_CFG, "warnings": warnings, "body": list(entry.get("body") or []),
            "next_entry": env.get("next_entry") or None,
            "trial_entry": any(e.get("id") == TRIAL_ID for e in cfg["entries"])}


def parse_grubby_info(text):
    """``grubby --info=DEFAULT`` (``index=``, ``kernel="..."``, ``args="..."``
    lines) -> ``{"kernel", "args" (list), "title"}`` of the first entry."""
    info = {}
    for line in (text or "").splitlines():
        if "=" not in line:
            continue
        name, value = line.split("=", 1)
        name = name.strip()
        if name == "index" and info:
            break
        info[name] = _unquote(value.strip())
    return {"kernel": info.get("kernel"), "args": _words(info.get("args", "")), "title": info.get("title")}


# ---------------------------------------------------------------------------
# Kernel arguments: compare what is wanted with what boots and what runs

# Keys whose value is a comma-separated list of options that several owners share
# (pci=realloc,config_acs=...): compared and merged per option.
COMMA_KEYS = ("pci",)


def arg_units(args):
    """Kernel arguments as comparable units: quotes removed (GRUB and the kernel
    drop them), ``pci=a,b`` split into ``pci=a`` and ``pci=b``; ``$var`` words of
    grub.cfg (expanded at boot) left out."""
    units = []
    for arg in args or []:
        arg = arg.replace('"', "")
        if not arg or arg.startswith("$"):
            continue
        key, sep, value = arg.partition("=")
        pieces = ["%s=%s" % (key, option) for option in value.split(",") if option] \
            if sep and key in COMMA_KEYS else [arg]
        for piece in pieces:
            if piece not in units:
                units.append(piece)
    return units


def missing_args(wanted, present):
    """Units of ``wanted`` that ``present`` (a list of arguments) lacks, in order."""
    have = set(arg_units(present))
    return [unit for unit in arg_units(wanted) if unit not in have]


def grubby_edit(current, wanted, owned_before):
    """grubby arguments that turn the entry's ``current`` arguments into ones that
    carry ``wanted`` and no longer carry what this owner set before and no longer
    wants: ``(remove, add)`` lists of arguments (empty when nothing to do).
    ``pci=`` options of others are kept: the merged ``pci=`` replaces the old."""
    wanted_units = arg_units(wanted)
    stale = [u for u in arg_units(owned_before) if u not in wanted_units]
    remove, add = [], []
    for key in COMMA_KEYS:
        prefix = key + "="
        now = [a for a in current if a.replace('"', "").startswith(prefix)]
        options = [u[len(prefix):] for u in arg_units(now)]
        want = [a for a in wanted if a.replace('"', "").startswith(prefix)]
        want_options = [o for a in want for o in a[len(prefix):].split(",") if o]
        want_plain = [o.replace('"', "") for o in want_options]
        kept = [o for o in options if prefix + o not in stale and o not in want_plain]
        merged = kept + want_options
        if [o.replace('"', "") for o in merged] != options:
            remove.extend(now)
            if merged:
                add.append(prefix + ",".join(merged))
    have = set(arg_units(current))
    for arg in wanted:
        if not any(arg.replace('"', "").startswith(k + "=") for k in COMMA_KEYS) and arg.replace('"', "") not in have:
            add.append(arg)
    for unit in stale:
        if not any(unit.startswith(k + "=") for k in COMMA_KEYS) and unit in have:
            remove.extend(a for a in current if a.replace('"', "") == unit)
    return remove, add


def parse_dropin_args(text):
    """The arguments a drop-in written by :func:`render_dropin` adds (its
    ``GRUB_CMDLINE_LINUX="${GRUB_CMDLINE_LINUX} ..."`` line, also without the
    braces as earlier gpudirect_pcie_acs drop-ins have it), [] when none."""
    for line in (text or "").splitlines():
        match = re.match(r'^GRUB_CMDLINE_LINUX="\$\{?GRUB_CMDLINE_LINUX\}?\s*((?:[^"\\]|\\.)*)"\s*$', line.strip())
        if match:
            value = re.sub(r"\\(.)", r"\1", match.group(1))
            return value.split()
    return []


def render_dropin(owner, args):
    """The /etc/default/grub.d drop-in that appends ``args`` to
    GRUB_CMDLINE_LINUX. Values are written in escaped double quotes: GRUB treats
    ``;`` as a command separator and removes the quotes before the kernel sees
    the argument."""
    escaped = " ".join(a.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$").replace("`", "\\`")
                       for a in args)
    return ("# Managed by Ansible (role gpudirect_reboot, for %s): kernel arguments for GPUDirect RDMA.\n"
            "# Takes effect at the next boot, after update-grub rebuilt /boot/grub/grub.cfg.\n"
            'GRUB_CMDLINE_LINUX="${GRUB_CMDLINE_LINUX} %s"\n' % (owner, escaped))


def kernel_args_plan(method, wanted, owned_before, cmdline, boot_args, tool_present):
    """What one owner's kernel arguments need on this node.

    ``method``: ``grub_dropin`` (Debian/Ubuntu), ``grubby`` (EL) or ``none``;
    ``wanted``: the owner's arguments now ([] removes them); ``owned_before``:
    what the owner set earlier (its drop-in, or its record on EL); ``cmdline``:
    /proc/cmdline split; ``boot_args``: the default boot entry's arguments (the
    generated grub.cfg's ``linux`` line, or ``grubby --info=DEFAULT``), None when
    unknown; ``tool_present``: update-grub or grubby is installed.

    The generated boot configuration is compared, not the drop-in: a drop-in
    whose update-grub failed or was interrupted is regenerated on the next run.
    """
    wanted_units = arg_units(wanted)
    stale = [u for u in arg_units(owned_before) if u not in wanted_units]
    cmdline_units = set(arg_units(cmdline))
    plan = {
        "applicable": bool(tool_present) and method in ("grub_dropin", "grubby"),
        "missing_cmdline": missing_args(wanted, cmdline),
        "stale_cmdline": [u for u in stale if u in cmdline_units],
        "missing_boot": [], "stale_boot": [], "regenerate": False,
        "grubby_remove": [], "grubby_add": [], "reboot": False, "changes": [],
    }
    if not plan["applicable"]:
        return plan
    if boot_args is not None:
        boot_units = set(arg_units(boot_args))
        plan["missing_boot"] = missing_args(wanted, boot_args)
        plan["stale_boot"] = [u for u in stale if u in boot_units]
    if method == "grub_dropin":
        # an unknown default entry (no grub.cfg, an entry without Linux) is not guessed
        # from the running kernel: update-grub then runs only when the drop-in changes
        plan["regenerate"] = boot_args is not None and bool(plan["missing_boot"] or plan["stale_boot"])
        if plan["regenerate"]:
            plan["changes"].append("regenerate grub.cfg: the default boot entry %s" % _lacks(plan))
    elif boot_args is not None:
        plan["grubby_remove"], plan["grubby_add"] = grubby_edit(boot_args, wanted, owned_before)
        if plan["grubby_remove"] or plan["grubby_add"]:
            plan["changes"].append("grubby --update-kernel=ALL%s%s" % (
                " --remove-args=" + " ".join(plan["grubby_remove"]) if plan["grubby_remove"] else "",
                " --args=" + " ".join(plan["grubby_add"]) if plan["grubby_add"] else ""))
    plan["reboot"] = bool(plan["missing_cmdline"] or plan["stale_cmdline"])
    if plan["reboot"]:
        plan["changes"].append("reboot: the running kernel %s" % _lacks(plan, "cmdline"))
    return plan


def _lacks(plan, where="boot"):
    missing, stale = plan["missing_" + where], plan["stale_" + where]
    parts = (["lacks " + " ".join(missing)] if missing else []) + (["still has " + " ".join(stale)] if stale else [])
    return " and ".join(parts)


# ---------------------------------------------------------------------------
# Boot once, then promote (issue #29, outcome 3). On GRUB, a new kernel command line is
# not written as the default at once: the default entry is copied into one extra entry
# (id gpudirect-trial, an /etc/grub.d script, so update-grub keeps it) whose `linux` line
# carries the new arguments, and `grub-reboot gpudirect-trial` boots it once. GRUB clears
# next_entry at that boot, so any later boot (a power event, a failed verification)
# lands on the last proven default again. Only after the node verified on it do the
# owners' drop-ins and update-grub make the arguments the default.

_GRUB_SAFE_WORD = re.compile(r"^[A-Za-z0-9_.,:/=+@%^-]+$")
_GRUB_VAR_WORD = re.compile(r"^\$(\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)$")


def _grub_quote(word):
    """A word for a grub.cfg line: plain when safe, ``$var`` left to expand at boot,
    else in single quotes (GRUB's script quoting is the shell's)."""
    if _GRUB_SAFE_WORD.match(word) or _GRUB_VAR_WORD.match(word):
        return word
    return "'" + word.replace("'", "'\\''") + "'"


def kernel_word(arg):
    """A GRUB_CMDLINE_LINUX word (what a drop-in holds, e.g. ``pci=config_acs="a;b"``) as
    the kernel receives it once grub-mkconfig has written it into grub.cfg and GRUB's
    parser has read it there: the shell-style quotes dropped (``pci=config_acs=a;b``).
    A value that holds a space keeps the double quotes the kernel's own parser strips
    (``key="a b"``), else the kernel would split it in two."""
    if not any(c in arg for c in "\"'\\"):
        return arg
    word = "".join(_words(arg))
    if not any(c.isspace() for c in word):
        return word
    key, sep, value = word.partition("=")
    return '%s="%s"' % (key, value) if sep else '"%s"' % word


def edit_args(current, edits):
    """``current`` arguments after each ``{"args", "owned_before"}`` edit in turn:
    the owner's wanted arguments added, the ones it set before and no longer wants
    removed (``pci=`` options merged, as :func:`grubby_edit` does)."""
    args = list(current)
    for edit in edits:
        remove, add = grubby_edit(args, edit.get("args") or [], edit.get("owned_before") or [])
        args = [a for a in args if a not in remove] + add
    return args


def render_trial_script(entry, args, owners):
    """The /etc/grub.d script whose output is the trial entry: ``entry`` (from
    :func:`grub_default_entry`, with its ``body``) loading the same kernel with
    ``args`` on its ``linux`` line. Returns None when the entry has no ``linux`` line
    to copy."""
    body, done = [], False
    for raw in entry.get("body") or []:
        words = _words(raw.strip())
        if not done and words and words[0] in _LINUX_COMMANDS and len(words) > 1:
            indent = raw[:len(raw) - len(raw.lstrip())]
            body.append(indent + " ".join([words[0], _grub_quote(words[1])] + [_grub_quote(a) for a in args]))
            done = True
        else:
            body.append(raw)
    if not done:
        return None
    title = "GPUDirect trial: %s with %s" % (entry.get("title") or "the default entry", " ".join(args))
    header = [
        "#!/bin/sh",
        "# Managed by Ansible (role gpudirect_reboot, for %s): the default boot entry with a new" % " ".join(owners),
        "# kernel command line, booted once (grub-reboot %s) before it becomes the default. Removed" % TRIAL_ID,
        "# when it is promoted, after the node verified on it; until then the default is unchanged.",
    ]
    header.append('exec tail -n +%d "$0"' % (len(header) + 2))
    entry_lines = ["menuentry %s --id %s {" % (_grub_quote(title) if not _GRUB_SAFE_WORD.match(title)
                                                 else title, TRIAL_ID)] + body + ["}"]
    return "\n".join(header + entry_lines) + "\n"


def trial_plan(plan, boot, edits, owners, dropin_changed):
    """Boot once or promote, for one owner on GRUB (``plan`` from
    :func:`kernel_args_plan`, ``boot`` from :func:`grub_default_entry` read without
    the trial's next_entry, ``edits``: every pending owner's ``{"args",
    "owned_before"}`` of this run, this one last; ``dropin_changed``: the owner's
    drop-in differs from what its arguments need).

    Returns ``{"trial": script or None, "trial_args", "deferred", "unavailable"}``:
    ``trial`` when the running kernel lacks the change and the default does not carry
    it yet (boot it once first); ``deferred`` when the running kernel already carries
    it but the default does not (written after verification); ``unavailable``: why no
    trial entry can be made (no default entry to copy: the change then becomes the
    default at once, as without boot_once), "" otherwise."""
    out = {"trial": None, "trial_args": [], "deferred": False, "unavailable": ""}
    needs_write = plan["regenerate"] or dropin_changed
    if not needs_write:
        return out
    if not plan["reboot"]:
        out["deferred"] = True
        return out
    if boot is None or not boot.get("image"):
        out["unavailable"] = ("the default GRUB entry cannot be read (no /boot/grub/grub.cfg yet, or a default entry "
                              "that loads no Linux kernel), so there is no proven entry to copy")
        return out
    # boot["args"] are grub.cfg's words as GRUB passes them; the edits are drop-in words,
    # which grub-mkconfig would copy into grub.cfg for GRUB to unquote: unquote them
    # here too, so that the trial entry hands the kernel what the promoted one will
    trial_args = edit_args(boot["args"], [
        {"args": [kernel_word(a) for a in edit.get("args") or []],
         "owned_before": [kernel_word(a) for a in edit.get("owned_before") or []]} for edit in edits])
    script = render_trial_script(boot, trial_args, owners)
    if script is None:
        out["unavailable"] = "the default GRUB entry %s has no linux line to copy" % boot.get("title")
        return out
    out["trial"], out["trial_args"] = script, trial_args
    return out


# ---------------------------------------------------------------------------
# Boot default hold (issue #13, outcome 3): a kernel update whose chain (DKMS in
# dependency order, reboot, drivers, verification) was not proven on a node must not
# leave the new kernel as the boot loader's default, or an unplanned boot lands on a
# kernel whose modules were not built in chain order. The kernel the node runs stays
# the default until a later run proves the chain on the new one.
#
# GRUB (Debian/Ubuntu): a drop-in that sets GRUB_DEFAULT to the running kernel's own
# entry (its --id path, "submenu id>entry id"), then update-grub. It works whatever
# GRUB_DEFAULT the admin had (0, saved, a title) and survives a reboot, unlike
# grub-reboot's one-shot next_entry; removing the drop-in (and update-grub) releases it.
# EL: grubby --set-default /boot/vmlinuz-<running>; the release sets the kernel the hold
# replaced back as the default.

BOOT_HOLD_DROPIN = "/etc/default/grub.d/99-gpudirect-boot-hold.cfg"


def _recovery(entry):
    words = [entry.get("id") or "", entry.get("title") or ""]
    return "single" in (entry.get("args") or []) or any("recovery" in w for w in words)


def grub_entry_path(cfg, release):
    """The GRUB_DEFAULT value that selects the normal (not recovery) entry loading
    ``vmlinuz-<release>`` in ``cfg`` (from :func:`parse_grub_cfg`): the entries' ids
    (titles where an entry has none) joined with ``>``; None when no entry loads it.

    An entry inside a submenu wins over a top-level one: Debian's top-level entry
    ("Debian GNU/Linux", id ``gnulinux-simple-<uuid>``) loads whichever kernel is newest
    when grub.cfg is generated, so after the next update-grub it would name another kernel.
    """
    found = []

    def walk(entries, path):
        for entry in entries:
            step = entry.get("id") or (entry.get("title") or "").replace(">", ">>")
            if entry["kind"] == "submenu":
                walk(entry.get("entries") or [], path + [step])
            elif entry["kind"] == "menuentry" and not _recovery(entry) \
                    and _release_of_image(entry.get("image")) == release:
                found.append(path + [step])

    walk(cfg.get("entries") or [], [])
    if not found:
        return None
    nested = [p for p in found if len(p) > 1]
    return ">".join((nested or found)[0])


def _grub_default_line(grub_default):
    """``GRUB_DEFAULT="..."`` for a drop-in that /etc/default/grub's shell sources."""
    return 'GRUB_DEFAULT="%s"' % grub_default.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$").replace("`", "\\`")


def render_hold_dropin(grub_default, release, instead_of):
    """The drop-in that holds the default boot entry on ``grub_default``."""
    return ("# Managed by Ansible (playbooks/kernel_update.yml): the default boot kernel is held on %s,\n"
            "# the kernel running when the update's chain failed, instead of %s, whose modules were not\n"
            "# proven. A later kernel_update.yml run removes this file when it starts on the node.\n"
            '%s\n' % (release, instead_of or "the newest kernel", _grub_default_line(grub_default)))


def boot_hold_decision(running, default, proven):
    """Whether the default boot kernel must be held on the running one.

    ``running``/``default``: releases (None when unknown); ``proven``: this run's
    chain passed verification on the running kernel. Returns ``{"action", "reason"}``
    with action ``hold`` (make ``running`` the default), ``none`` (nothing to do) or
    ``unknown`` (the default boot kernel cannot be read: nothing is changed, and the
    reason says so).
    """
    if not running:
        return {"action": "unknown", "reason": "the running kernel is unknown: the default boot kernel is left as it is"}
    if not default:
        return {"action": "unknown", "reason": "the default boot kernel cannot be read (no GRUB default entry with a "
                                               "Linux kernel, no grubby): it is left as it is; check it by hand"}
    if default == running:
        return {"action": "none", "reason": "the default boot kernel is the running one (%s)" % running}
    if proven:
        return {"action": "none", "reason": "the chain was proven on %s in this run" % running}
    return {"action": "hold", "reason": "the default boot kernel %s was not proven in chain order: hold %s, the "
                                        "running kernel, as the default" % (default, running)}


# ---------------------------------------------------------------------------
# A new kernel boots once before it becomes the default (issue #43, outcome 4)
#
# Debian/Ubuntu (GRUB): before the kernel packages are installed, the default boot entry
# is pinned on the last proven kernel (the hold drop-in above, and a record with
# ``boot_once``), so the packages' update-grub does not make the new kernel the default.
# Just before the reboot, grub-reboot names the new kernel's entry as grubenv's one-shot
# ``next_entry``; GRUB clears it as it boots it, so a node that panics, hangs or is
# power-cycled on the new kernel boots the pinned one next. Once the node verified on the
# new kernel the pin is removed (update-grub) and GRUB_DEFAULT chooses again; a node that
# did not verify keeps the pin, and any one-shot boot still pending is cleared.
# The record: {"kernel": last proven, "boot_once": true, "trial": new kernel or null,
# "instead_of": the same, "method": "grub", "since": epoch}.


def newest_grub_kernel(cfg):
    """The kernel GRUB boots with ``GRUB_DEFAULT=0`` and no one-shot entry: the first
    entry of the menu, which grub-mkconfig gives to the newest kernel (the kernel a
    package install makes the default when nothing pins it). None when that entry
    loads no Linux kernel."""
    chosen = resolve_grub_default(dict(cfg, default="0", next_entry_block=False, remap={}))
    return _release_of_image((chosen["entry"] or {}).get("image"))


def kernels_without_grub_entry(root, cfg):
    """The kernel releases with an image in ``<root>/boot`` (``vmlinuz-<release>``, not the
    symlinks) that no normal entry of ``cfg`` loads: grub.cfg was not regenerated since they
    were installed (a node with grub-common but no grub-pc/grub-efi package, whose
    /etc/kernel/postinst.d/zz-update-grub would have run update-grub)."""
    folder = under(root, "boot")
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    releases = [_release_of_image(n) for n in names if not os.path.islink(os.path.join(folder, n))]
    return [r for r in releases if r and grub_entry_path(cfg, r) is None]


def boot_once_decision(running, newest, record):
    """Which kernel is pinned as the default while a new one is tried, and which one is
    tried. ``running``: the running kernel; ``newest``: the kernel a plain update-grub makes
    the default (:func:`newest_grub_kernel`; None before the install or when unknown);
    ``record``: the boot-hold record (None when none).

    The last proven kernel is the one an earlier trial's record pinned (an earlier run's
    trial that did not verify keeps it), else the running kernel. Returns ``{"action":
    "try" | "pin" | "unknown", "proven", "trial", "reason"}``: ``try`` pins ``proven`` and
    boots ``trial`` once; ``pin`` only pins (nothing newer to try, or not known yet).
    """
    record = record if isinstance(record, dict) and record.get("boot_once") else {}
    if not running:
        return {"action": "unknown", "proven": None, "trial": None,
                "reason": "the running kernel is unknown: the default boot kernel is left as it is"}
    proven = record.get("kernel") or running
    if newest is None:
        return {"action": "pin", "proven": proven, "trial": None,
                "reason": "the default boot kernel is pinned on %s, the last proven kernel, until a new kernel "
                          "verified" % proven}
    if newest == proven:
        return {"action": "pin", "proven": proven, "trial": None,
                "reason": "the newest kernel is %s, the last proven one: there is nothing to boot once" % proven}
    if not record and running == newest:
        # no trial of this toolkit booted it: the node came up on it before this run
        return {"action": "pin", "proven": proven, "trial": None,
                "reason": "%s, the newest kernel, runs already (booted before this run, not by a trial of this "
                          "toolkit): it is verified as it runs" % running}
    return {"action": "try", "proven": proven, "trial": newest,
            "reason": "%s boots once (grub-reboot) and becomes the default boot kernel only after the node "
                      "verified on it; until then %s, the last proven kernel, stays the default" % (newest, proven)}


def boot_once_end(running, record, proven_chain):
    """At the end of a kernel update's chain on a node with a boot-once record: ``promote``
    (the node verified on the tried kernel, or nothing was tried and it verified: the pin
    is removed) or ``keep`` (the pin stays on the last proven kernel, and a one-shot boot
    still pending is cleared). Returns ``{"action", "reason"}``."""
    trial, kernel = record.get("trial"), record.get("kernel")
    if proven_chain and trial and running == trial:
        return {"action": "promote",
                "reason": "%s verified: it becomes the default boot kernel (the pin on %s is removed)" % (trial, kernel)}
    if proven_chain and not trial and running == kernel:
        return {"action": "promote",
                "reason": "%s verified and nothing newer was tried: the pin is removed" % running}
    if trial and running == trial:
        why = "%s booted but was not proven in this run" % trial
    elif trial:
        why = "%s was not booted and proven in this run (the node runs %s)" % (trial, running or "?")
    else:
        why = "the chain was not proven on %s in this run" % (running or "?")
    return {"action": "keep", "reason": "%s: %s, the last proven kernel, stays the default boot kernel" % (why, kernel)}


def render_pin_dropin(grub_default, proven):
    """The drop-in that pins the default boot entry on ``grub_default``, the last proven
    kernel's (``proven``), while a new kernel boots once and is verified."""
    return ("# Managed by Ansible (playbooks/kernel_update.yml): the default boot kernel is pinned on %s,\n"
            "# the last kernel this node verified on, while a new kernel boots once (grub-reboot) and is\n"
            "# verified. kernel_update.yml removes this file when the node verified on the new kernel.\n"
            '%s\n' % (proven, _grub_default_line(grub_default)))
