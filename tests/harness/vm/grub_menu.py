"""Which entry GRUB boots from a guest's grub.cfg, for the VM harness's boot loader stand-in.

The test VMs boot with qemu -kernel/-initrd/-append: no GRUB runs. When the guest
has a GRUB configuration (/boot/grub/grub.cfg, written by update-grub), its
shutdown handoff (gpudirect-boot-handoff, tests/harness/vm/build-image.sh) puts
grub.cfg, grubenv and the kernels under /boot into the archive it hands over, and
vm.py boots what GRUB would: the default entry's `linux` image with that entry's
arguments and its `initrd`.

This is deliberately a second, independent reading of GRUB's rules: the toolkit's
own reading (module_utils/gpudirect_kernel.py) is what the VM test checks, so the
VM's boot loader must not share its code. GRUB 2 behaviour followed here
(grub-core/normal/menu.c, GRUB manual "default", "Environment block"):

* `set default=...` at top level (00_header writes `"${next_entry}"` in the branch
  taken when grubenv holds a next_entry, and GRUB_DEFAULT in the other one:
  `0`, a title, an id, `A>B`, or `"${saved_entry}"` for GRUB_DEFAULT=saved);
* `$name` / `${name}` expand from grubenv (`name=value` lines);
* the value is split on `>` (`>>` is a literal `>`); each part is an entry number,
  else the title or id of an entry of that menu; a part that matches nothing, or
  an unset/empty default, means that menu's first entry; a submenu walks on into
  its entries with the rest;
* 00_header's remap lines (`if [ "x$default" = 'OLD' ]; then default='NEW'; fi`)
  translate an old-style title before the walk.

Python standard library only (vm.py runs on the host without the project's venv).
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

LINUX_COMMANDS = ("linux", "linuxefi", "linux16")
INITRD_COMMANDS = ("initrd", "initrdefi", "initrd16")
_SET_DEFAULT = re.compile(r"""^(?:set\s+)?default=(?P<v>"[^"]*"|'[^']*'|[^\s;]*)\s*;?\s*$""")
_REMAP = re.compile(
    r"""if \[ "x\$default" = '(?P<old>(?:[^']|'\\'')*)' \]; then default='(?P<new>(?:[^']|'\\'')*)'; fi;?""")
_VAR = re.compile(r"\$(?:\{(?P<b>[A-Za-z_][A-Za-z0-9_]*)\}|(?P<n>[A-Za-z_][A-Za-z0-9_]*))")


class GrubCfgError(ValueError):
    """grub.cfg cannot be read as GRUB would (unbalanced braces, no entries, an
    entry that loads no Linux kernel): the harness then boots as if there were no GRUB."""


@dataclass
class Entry:
    kind: str                      # "menuentry" or "submenu"
    title: str
    id: str | None
    line: int
    kernel: str | None = None      # path of the first `linux` line
    args: list[str] = field(default_factory=list)
    initrd: list[str] = field(default_factory=list)
    entries: list["Entry"] = field(default_factory=list)


@dataclass
class Menu:
    entries: list[Entry]
    default: str | None            # the top-level `set default=` value outside the next_entry branch
    next_entry_default: bool       # 00_header's `set default="${next_entry}"` branch is there
    remap: dict[str, str]


@dataclass
class Choice:
    spec: str                      # the default after expansion and remap, as GRUB walks it
    path: list[str]                # titles from the top menu down to the entry
    entry_id: str | None
    kernel: str
    initrd: list[str]
    args: list[str]
    notes: list[str]
    boot_once: bool = False        # chosen by grubenv's next_entry (grub-reboot), not the default


def _words(line: str, lineno: int) -> list[str]:
    try:
        return shlex.split(line, comments=False, posix=True)
    except ValueError as e:
        raise GrubCfgError(f"line {lineno}: cannot split {line!r} into words ({e})") from None


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def parse(text: str) -> Menu:
    """grub.cfg text -> Menu. Raises GrubCfgError on what GRUB itself would reject
    or what leaves no entry to boot."""
    top: list[Entry] = []
    # stack of open blocks: ("menu", Entry) for menuentry/submenu, ("block", None) for
    # function bodies (GRUB's `function x {`); `if/fi` needs no tracking
    stack: list[tuple[str, Entry | None]] = []
    default: str | None = None
    next_branch = False
    remap: dict[str, str] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line == "}":
            if not stack:
                raise GrubCfgError(f"line {lineno}: '}}' closes no block")
            stack.pop()
            continue
        if line.endswith("{"):
            words = _words(line[:-1], lineno)
            if words and words[0] in ("menuentry", "submenu"):
                if len(words) < 2:
                    raise GrubCfgError(f"line {lineno}: {words[0]} without a title")
                entry_id = None
                for i, w in enumerate(words[2:], 2):
                    if w in ("$menuentry_id_option", "${menuentry_id_option}", "--id") and i + 1 < len(words):
                        entry_id = words[i + 1]
                entry = Entry(kind=words[0], title=words[1], id=entry_id, line=lineno)
                parent = next((e for kind, e in reversed(stack) if kind == "menu"), None)
                if parent is not None and parent.kind != "submenu":
                    raise GrubCfgError(f"line {lineno}: {words[0]} {words[1]!r} inside menuentry {parent.title!r}")
                (parent.entries if parent is not None else top).append(entry)
                stack.append(("menu", entry))
            else:
                stack.append(("block", None))
            continue
        inner = stack[-1][1] if stack else None
        if not stack:
            m = _SET_DEFAULT.match(line)
            if m:
                value = _unquote(m.group("v"))
                if re.search(r"\$\{?next_entry\}?", value):
                    next_branch = True
                else:
                    default = value
                continue
            # 10_linux writes every title correction of a run on one line
            for m in _REMAP.finditer(line):
                remap[m.group("old").replace("'\\''", "'")] = m.group("new").replace("'\\''", "'")
            continue
        if inner is not None and inner.kind == "menuentry":
            words = _words(line, lineno)
            if words and words[0] in LINUX_COMMANDS and inner.kernel is None:
                if len(words) < 2:
                    raise GrubCfgError(f"line {lineno}: {words[0]} without a kernel path")
                inner.kernel, inner.args = words[1], words[2:]
            elif words and words[0] in INITRD_COMMANDS and not inner.initrd:
                inner.initrd = words[1:]
    if stack:
        kind, entry = stack[-1]
        what = f"{entry.kind} {entry.title!r} (line {entry.line})" if entry else "a block"
        raise GrubCfgError(f"end of file inside {what}: unbalanced braces")
    if not top:
        raise GrubCfgError("no menuentry in grub.cfg")
    return Menu(entries=top, default=default, next_entry_default=next_branch, remap=remap)


def parse_grubenv(text: str | None) -> dict[str, str]:
    """grubenv (`# GRUB Environment Block`, `name=value` lines, `#` padding) -> dict."""
    env: dict[str, str] = {}
    for line in (text or "").splitlines():
        if line and not line.startswith("#") and "=" in line:
            name, value = line.split("=", 1)
            env[name] = value
    return env


def _expand(value: str, env: dict[str, str]) -> str:
    return _VAR.sub(lambda m: env.get(m.group("b") or m.group("n"), ""), value)


def _first_part(spec: str) -> tuple[str, str | None]:
    """`A>B>C` -> ("A", "B>C"); `>>` is a literal `>` in A."""
    part, i = "", 0
    while i < len(spec):
        if spec[i] == ">":
            if spec[i + 1:i + 2] == ">":
                part += ">"
                i += 2
                continue
            return part, spec[i + 1:]
        part += spec[i]
        i += 1
    return part, None


def choose(cfg_text: str, grubenv_text: str | None = None) -> Choice:
    """The entry GRUB boots with this grub.cfg and grubenv. Raises GrubCfgError
    when the menu cannot be read or the chosen entry loads no Linux kernel."""
    menu = parse(cfg_text)
    env = parse_grubenv(grubenv_text)
    notes: list[str] = []
    if menu.next_entry_default and env.get("next_entry"):
        spec = _expand(env["next_entry"], env)
        notes.append(f"grubenv next_entry={env['next_entry']} boots once (grub-reboot); GRUB would clear it, "
                     "the harness cannot: it stays until the guest clears it (grub-editenv)")
    else:
        spec = _expand(menu.default or "", env)
    if spec in menu.remap:
        notes.append(f"default {spec!r} remapped to {menu.remap[spec]!r} by grub.cfg")
        spec = menu.remap[spec]
    entries, rest, path = menu.entries, spec, []
    while True:
        part, tail = _first_part(rest) if rest else ("", None)
        chosen = None
        if part.isdigit():
            index = int(part)
            chosen = entries[index] if index < len(entries) else None
        elif part:
            chosen = next((e for e in entries if part in (e.title, e.id)), None)
        if chosen is None:
            if part:
                where = f"submenu {path[-1]!r}" if path else "the top menu"
                notes.append(f"default part {part!r} matches no entry of {where}: GRUB boots its first entry")
            chosen = entries[0]
        path.append(chosen.title)
        if chosen.kind == "menuentry":
            break
        if not chosen.entries:
            raise GrubCfgError(f"submenu {chosen.title!r} (line {chosen.line}) has no entry")
        entries, rest = chosen.entries, tail
    if chosen.kernel is None:
        raise GrubCfgError(f"the default entry {' > '.join(path)!r} (line {chosen.line}) has no linux line")
    return Choice(spec=spec, path=path, entry_id=chosen.id, kernel=chosen.kernel,
                  initrd=list(chosen.initrd), args=list(chosen.args), notes=notes,
                  boot_once=bool(menu.next_entry_default and env.get("next_entry")))
