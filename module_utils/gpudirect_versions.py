"""Version strings of the vendors, read one way everywhere (controller filters and target modules).

One parser for each thing the toolkit reads:

``parse_ofed_info_s``
    ``ofed_info -s``: ``MLNX_OFED_LINUX-5.8-3.0.7.0:`` (MLNX_OFED) or
    ``OFED-internal-24.10-1.1.4.0.200:`` (DOCA-OFED, whose build suffix ``.0.200``
    some releases add); the trailing colon is optional; ANSI colour codes and blank
    lines around it are ignored; of the full ``ofed_info`` output only the first line
    counts (``MLNX_OFED_LINUX-4.5-1.0.1.0 (OFED-4.5-1.0.1):``).
``parse_ofed_info_n``
    ``ofed_info -n``: the bare version, ``24.10-1.1.4.0.200``.
``parse_package_version``
    A Debian or RPM package version: ``[epoch:]upstream[-revision]``
    (``3:580.95.05-1.el9``, ``24.10.OFED.24.10.1.1.4.1-1``, ``2410mlnx54-1.2410068``).
``parse_rdma_core_version`` / ``parse_libibverbs_file``
    rdma-core: its package version (``50.0-2ubuntu0.2``, DOCA's ``2410mlnx54-1.2410068``
    is upstream 54) and the version in ``libibverbs.so.1``'s file name (``.so.1.14.50.0``).
``parse_driver_version``
    An NVIDIA driver version: ``580.95.05``, ``535.104.12``, ``550.54``.
``parse_proc_driver_version``
    ``/proc/driver/nvidia/version``, open (``NVIDIA UNIX Open Kernel Module for x86_64
    580.159.04  Release Build ...``) or proprietary (``NVIDIA UNIX x86_64 Kernel Module
    535.104.05  Sat Aug 19 ...``).
``parse_dkms_version``
    ``dkms --version`` (``dkms-3.0.10``) -> ``(3, 0, 10)``.
``KERNEL_RELEASE_RE`` / ``parse_kernel_version``
    A kernel release as ``uname -r`` prints it, and its ``(VERSION, PATCHLEVEL)``.
``find_nccl_version``
    The version in nccl-tests' ``NCCL version 2.21.5+cuda12.4`` line.

The matching rule (``compare_wanted``)
--------------------------------------
A version the admin asks for (``wanted``) is a list of numbers; the installed version
is another.  The installed numbers are cut to as many numbers as the wanted one has
(missing ones count as 0), then compared as lists: equal means the installed version
IS the wanted one; otherwise the first differing number orders them.  So:

* ``24.10-1.1.4.0.200`` matches ``24.10-1.1.4`` (DOCA's build suffix is finer than asked);
* ``24.10-1.1.4`` matches ``24.10-1.1.4.0`` (a missing trailing number counts as 0);
* ``24.10-1.1.40`` does not match ``24.10-1.1.4`` (numbers, not text: 40 > 4, newer);
* ``580.95.05`` matches ``580.95`` and ``580``, not ``580.95.5.1``.

The OFED decision (``mlnx_ofed_action``), ``ofed_version_compare`` and the gpudirect_mlnx_ofed
post-install check use this rule.  ``gpudirect_nvidia_driver_version`` is an exact pin
(``<version>-*``), so the driver decision requires all numbers equal instead.

Every parser raises ``VersionError`` (a ``ValueError``) naming the text it could not read.
"""

from __future__ import absolute_import, division, print_function

import re

__metaclass__ = type


class VersionError(ValueError):
    """Text that is not the version it should be; the message quotes it."""


# A CSI escape sequence (ECMA-48 5.4): ESC [, parameter bytes 0x30-0x3F ("0-9:;<=>?"), intermediate
# bytes 0x20-0x2F, one final byte 0x40-0x7E. Colours ("\x1b[1;31m", "\x1b[38:5:1m"), underline around
# nvidia-smi's header, cursor moves ("\x1b[2K", "\x1b[?25l"). The one pattern for every parser.
ANSI_ESCAPE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")


def strip_ansi(text):
    """``text`` without CSI escape sequences (terminal colours and cursor moves); None reads as ""."""
    return ANSI_ESCAPE.sub("", text or "")

# <major>.<minor>-<n>[.<n>...]: the numbering MLNX_OFED and DOCA-OFED share.
_OFED_NUMBERS = r"\d+\.\d+-\d+(?:\.\d+)*"
_OFED_S = re.compile(r"(?P<flavor>[A-Za-z][A-Za-z0-9_]*(?:-[A-Za-z][A-Za-z0-9_]*)*)-(?P<version>"
                     + _OFED_NUMBERS + r")(?:\s+\((?P<upstream>[^()]*)\))?\s*:?")
_OFED_N = re.compile(_OFED_NUMBERS)
# Debian policy: upstream starts with a digit; RPM releases may carry "_" (el9_4).
_PACKAGE = re.compile(r"(?:(?P<epoch>\d+):)?(?P<upstream>\d[A-Za-z0-9.+~_]*(?:-[A-Za-z0-9.+~_]+)*?)"
                      r"(?:-(?P<revision>[A-Za-z0-9.+~_]+))?")
_RDMA_CORE_MLNX = re.compile(r"\d+mlnx(\d+)")
_LIBIBVERBS = re.compile(r"libibverbs\.so\.1\.\d+\.(\d+(?:\.\d+)*)$")
_DRIVER = re.compile(r"(?P<branch>\d{3})\.\d+(?:\.\d+)?")
_PROC_OPEN = re.compile(r"NVRM version:\s+NVIDIA UNIX Open Kernel Module for (?P<arch>\S+)\s+"
                        r"(?P<version>\d+(?:\.\d+)+)(?:\s|$)")
_PROC_PROPRIETARY = re.compile(r"NVRM version:\s+NVIDIA UNIX (?P<arch>\S+) Kernel Module\s+"
                               r"(?P<version>\d+(?:\.\d+)+)(?:\s|$)")


def _text(value, what):
    if value is None:
        raise VersionError("%s: no text (None)" % what)
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if not isinstance(value, str):
        raise VersionError("%s: expected text, got %r" % (what, value))
    return value


def _first_line(value, what):
    """``(number, line)`` of the first non-blank line, without ANSI colour codes and surrounding blanks."""
    for number, line in enumerate(_text(value, what).splitlines(), start=1):
        line = strip_ansi(line).strip()
        if line:
            return number, line
    raise VersionError("%s: empty output %r" % (what, value))


def numbers(version):
    """``"24.10-1.1.4.0.200"`` -> ``[24, 10, 1, 1, 4, 0, 200]`` (every run of digits, in order)."""
    return [int(n) for n in re.findall(r"\d+", str(version))]


def parse_ofed_info_s(text):
    """``ofed_info -s`` (or full ``ofed_info``) -> ``{"flavor", "version", "parts"}``.

    :raises VersionError: when the first non-blank line is no OFED version line.
    """
    number, line = _first_line(text, "ofed_info -s")
    match = _OFED_S.fullmatch(line)
    if not match:
        raise VersionError("ofed_info -s: line %d: %r is not an OFED version line (expected e.g. "
                           "MLNX_OFED_LINUX-5.8-3.0.7.0: or OFED-internal-24.10-1.1.4.0.200:)" % (number, line))
    return {"flavor": match.group("flavor"), "version": match.group("version"),
            "parts": numbers(match.group("version"))}


def parse_ofed_info_n(text):
    """``ofed_info -n`` (or an admin's ``gpudirect_mlnx_ofed_version``) -> ``{"version", "parts"}``.

    :raises VersionError: unless the text is ``<major>.<minor>-<n>[.<n>...]``.
    """
    number, line = _first_line(text, "ofed_info -n")
    if not _OFED_N.fullmatch(line):
        raise VersionError("ofed_info -n: line %d: %r is not an OFED version (expected e.g. 24.10-1.1.4 or "
                           "5.8-3.0.7.0)" % (number, line))
    return {"version": line, "parts": numbers(line)}


def parse_package_version(text):
    """A Debian (``dpkg-query ${Version}``) or RPM (``%{VERSION}-%{RELEASE}``, epoch optional) version.

    ``3:580.95.05-1.el9`` -> ``{"epoch": 3, "upstream": "580.95.05", "revision": "1.el9",
    "version": "3:580.95.05-1.el9"}``; the revision is what follows the LAST hyphen
    (``2.28.3-1+cuda13.0`` -> upstream ``2.28.3``, revision ``1+cuda13.0``).

    :raises VersionError: on empty text, blanks inside, or an upstream not starting with a digit.
    """
    value = _text(text, "package version").strip()
    match = _PACKAGE.fullmatch(value)
    if not value or not match:
        raise VersionError("package version: %r is not a Debian/RPM version ([epoch:]upstream[-revision], "
                           "upstream starting with a digit)" % (text,))
    return {"epoch": int(match.group("epoch") or 0), "upstream": match.group("upstream"),
            "revision": match.group("revision") or "", "version": value}


def parse_rdma_core_version(text):
    """An rdma-core package version -> ``{"version", "upstream", "major"}``.

    ``50.0-2ubuntu0.2`` -> major 50; the MLNX/DOCA form ``2410mlnx54-1.2410068`` is based
    on upstream 54 (the number after ``mlnx``).

    :raises VersionError: on text that is no package version.
    """
    found = parse_package_version(text)
    match = _RDMA_CORE_MLNX.match(found["upstream"]) or re.match(r"(\d+)", found["upstream"])
    return {"version": found["version"], "upstream": found["upstream"], "major": int(match.group(1))}


def parse_libibverbs_file(path):
    """The rdma-core version in the file name of ``libibverbs.so.1``'s real file.

    ``/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.50.0`` -> ``{"version": "50.0", "major": 50}``
    (rdma-core names the library ``libibverbs.so.1.<ABI minor>.<rdma-core version>``).

    :raises VersionError: when the name is not of that form (``libibverbs.so.1`` itself, another library).
    """
    value = _text(path, "libibverbs file name")
    match = _LIBIBVERBS.search(value)
    if not match:
        raise VersionError("libibverbs file name: %r is not libibverbs.so.1.<abi>.<rdma-core version> "
                           "(e.g. libibverbs.so.1.14.50.0)" % (path,))
    return {"version": match.group(1), "major": int(match.group(1).split(".")[0])}


def parse_driver_version(text):
    """An NVIDIA driver version with two or three parts -> ``{"version", "branch", "parts"}``.

    :raises VersionError: on anything else (a bare branch ``580``, four parts, letters).
    """
    value = _text(text, "NVIDIA driver version").strip()
    match = _DRIVER.fullmatch(value)
    if not match:
        raise VersionError("NVIDIA driver version: %r is not <branch>.<minor>[.<patch>] (e.g. 580.95.05, "
                           "550.54)" % (text,))
    return {"version": value, "branch": match.group("branch"), "parts": numbers(value)}


def parse_proc_driver_version(text):
    """``/proc/driver/nvidia/version`` -> ``{"version", "flavor", "arch"}``.

    Reads the ``NVRM version:`` line in its open (``NVIDIA UNIX Open Kernel Module for
    <arch>  <version>  Release Build ...``) or proprietary (``NVIDIA UNIX <arch> Kernel
    Module  <version>  <date>``) form; the ``GCC version:`` line is ignored.

    :raises VersionError: when no line has either form.
    """
    value = _text(text, "/proc/driver/nvidia/version")
    for line in value.splitlines():
        line = strip_ansi(line).strip()
        for flavor, pattern in (("open", _PROC_OPEN), ("proprietary", _PROC_PROPRIETARY)):
            match = pattern.match(line)
            if match:
                return {"version": match.group("version"), "flavor": flavor, "arch": match.group("arch")}
    raise VersionError("/proc/driver/nvidia/version: no 'NVRM version: NVIDIA UNIX ... Kernel Module "
                       "<version>' line in %r" % (value[:200],))


# A kernel release as ``uname -r`` prints it: the kernel's VERSION.PATCHLEVEL[.SUBLEVEL]
# (Makefile) and whatever EXTRAVERSION/LOCALVERSION the builder appended, e.g.
# 6.1.0-50-amd64 (Debian), 5.14.0-427.13.1.el9_4.x86_64 (EL), 6.8.0-1013-nvidia-64k
# (Ubuntu), 6.18.44-fc-v657-gpu (a local build). gpudirect_kernel.release_problem adds the
# path-component rules (no "/", at most 64 characters).
KERNEL_RELEASE_RE = re.compile(r"^[0-9]+\.[0-9]+(?:[.+~_-][A-Za-z0-9]+)*[+~]?$")
_KERNEL_VERSION = re.compile(r"^(\d+)\.(\d+)")
_DKMS = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")
_NCCL_VERSION = re.compile(r"NCCL version (?P<version>\S+)")


def parse_kernel_version(release):
    """``"6.18.44-fc"`` -> (6, 18); None when unparseable."""
    match = _KERNEL_VERSION.match(release or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def parse_dkms_version(text):
    """``dkms --version`` (``dkms-3.0.10``, Debian/Ubuntu ``dkms-2.8.7``) -> ``(3, 0, 10)``.
    Raises ``VersionError`` (a ``ValueError``) when no version is printed."""
    match = _DKMS.search(strip_ansi(text))
    if not match:
        raise VersionError("dkms --version printed no version: %r" % (text or "")[:100])
    return tuple(int(part or 0) for part in match.groups())


# ConnectX firmware, as flint/mstflint query print it and gpudirect_nic_config_firmware pins it:
# "28.43.1014"; a value may carry more ("2.42.5000 (build 12)"). Samples: tests/fixtures/nic_config/.
FIRMWARE_VERSION_RE = re.compile(r"^\d+\.\d+\.\d+$")
_FIRMWARE_VERSION_IN = re.compile(r"(\d+)\.(\d+)\.(\d+)")


def parse_firmware_version(text):
    """``"28.43.1014"`` from ``"28.43.1014"`` or ``"2.42.5000 (build 12)"``, leading zeros dropped
    (``"28.043.1014"`` -> ``"28.43.1014"``); None when the text holds no N.N.N."""
    match = _FIRMWARE_VERSION_IN.search(text or "")
    if not match:
        return None
    return ".".join(str(int(part)) for part in match.groups())


def find_nccl_version(line):
    """The version of nccl-tests' ``NCCL version 2.21.5+cuda12.4`` line, None in any other line."""
    match = _NCCL_VERSION.search(line or "")
    return match.group("version") if match else None


def compare_wanted(installed, wanted):
    """Order an installed version against a wanted one by the matching rule (module docstring).

    :param installed: list of numbers (``parts``) of the installed version.
    :param wanted: list of numbers of the wanted one (non-empty).
    :returns: 0 when installed matches wanted, -1 when it is older, 1 when newer.
    """
    if not wanted:
        raise VersionError("wanted version has no numbers")
    cut = list(installed[:len(wanted)]) + [0] * (len(wanted) - len(installed))
    wanted = list(wanted)
    return (cut > wanted) - (cut < wanted)
