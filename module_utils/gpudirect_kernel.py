# -*- coding: utf-8 -*-
"""Running and default boot kernel of a host, shared by the project's modules.

``gpudirect_facts`` publishes both; ``gpudirect_dkms`` builds DKMS modules for
both. One implementation keeps them agreeing on which kernel boots next.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

C_LOCALE = {"LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C"}
VMLINUZ_LINKS = ("boot/vmlinuz", "vmlinuz")


def _under(root, relative):
    return os.path.join(root or "/", relative.lstrip("/"))


def _read_first_line(path):
    try:
        with open(path) as handle:
            return handle.readline().strip() or None
    except (IOError, OSError):
        return None


def running_kernel(root="/", live=False):
    """Release of the running kernel: ``<root>/proc/sys/kernel/osrelease``, else
    ``uname -r`` when ``live`` (root describes this host); None when unknown."""
    release = _read_first_line(_under(root, "proc/sys/kernel/osrelease"))
    if not release and live:
        release = os.uname()[2]
    return release


def _release_of_image(path):
    """``/boot/vmlinuz-6.1.0-20-amd64`` -> ``6.1.0-20-amd64``; None otherwise."""
    base = os.path.basename((path or "").strip())
    if base.startswith("vmlinuz-") and len(base) > len("vmlinuz-"):
        return base[len("vmlinuz-"):]
    return None


def default_boot_kernel(root="/", runner=None, live=False):
    """Kernel release booted next, and where that came from.

    Debian/Ubuntu keep the symlink ``/boot/vmlinuz`` (or ``/vmlinuz``) on the
    newest installed kernel, which is GRUB's default entry. EL has no such link;
    there, and only when ``live`` (``grubby`` describes this host, not ``root``),
    ``grubby --default-kernel`` names the default boot entry's image.

    ``runner`` provides ``get_bin_path(name)`` and ``run_command(args,
    environ_update=...)`` (an AnsibleModule); None runs nothing.

    Returns ``(release or None, source or None, warnings)``; source is
    ``/boot/vmlinuz``, ``/vmlinuz`` or ``grubby``.
    """
    warnings = []
    for link in VMLINUZ_LINKS:
        candidate = _under(root, link)
        if os.path.islink(candidate):
            release = _release_of_image(os.readlink(candidate))
            if release:
                return release, "/" + link, warnings
    if not live or runner is None:
        return None, None, warnings
    try:
        grubby = runner.get_bin_path("grubby")
    except Exception:
        grubby = None
    if not grubby:
        return None, None, warnings
    rc, out, err = runner.run_command([grubby, "--default-kernel"], environ_update=dict(C_LOCALE))
    release = _release_of_image(out) if rc == 0 else None
    if release:
        return release, "grubby", warnings
    warnings.append("grubby --default-kernel gave rc=%s %s" % (rc, (err or out or "").strip()))
    return None, None, warnings
