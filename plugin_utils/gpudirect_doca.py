"""DOCA-Host repository layout: which distro directory a DOCA release publishes for an OS.

NVIDIA's repository is <base>/<release>/<distro>/<arch>/. Debian and Ubuntu directories
name the OS release (debian12, ubuntu22.04, ubuntu24.04) in every DOCA release. For EL
the layout changed with DOCA 3.2.0:

* up to 3.1.x: one directory per EL minor release (doca/2.9.1/rhel9.4/, doca/2.9.3/rhel9.6/,
  doca/3.1.0/rhel9.6/, doca/3.1.0/rhel10.0/);
* from 3.2.0: one directory per EL major release (doca/3.2.0/rhel9/, doca/3.2.1/rhel10/,
  doca/3.5.0/rhel10/); the modules are built on the node by DKMS, so one directory serves
  every minor release ("NVIDIA no longer publishes repositories for minor OS releases",
  DOCA 3.3.0 DOCA-Host Installation and DKMS Management Guide).

The public sources of each fact are named in tests/fixtures/doca/repo_layouts.yml, which
the unit tests check this function against. An empty answer means "not known here": the
role then fails before any change, naming gpudirect_mlnx_ofed_repo_distro.
"""

import re

# the first DOCA release whose EL directories are per major release (rhel9, rhel10)
EL_MAJOR_ONLY_FROM = (3, 2, 0)


def parse_release(release):
    """'3.2.1' -> (3, 2, 1); anything that is not dotted numbers -> None."""
    text = str(release).strip()
    if not re.match(r"^[0-9]+(\.[0-9]+)*$", text):
        return None
    numbers = tuple(int(part) for part in text.split("."))
    return numbers + (0,) * (3 - len(numbers)) if len(numbers) < 3 else numbers


def el_layout(release):
    """'major' (rhel9/) or 'minor' (rhel9.4/) for a DOCA release; None when unparseable."""
    numbers = parse_release(release)
    if numbers is None:
        return None
    return "major" if numbers >= EL_MAJOR_ONLY_FROM else "minor"


def repo_distro(release, os_family, distribution, version):
    """The distro directory of DOCA release `release` for a node, or '' when not known.

    os_family, distribution, version: ansible_facts os_family, distribution and
    distribution_version (e.g. RedHat, Rocky, 9.4; Debian, Ubuntu, 24.04; Debian, Debian, 12.7).
    """
    family = str(os_family)
    version = str(version).strip()
    match = re.match(r"^([0-9]+)(?:\.([0-9]+))?", version)
    if not match:
        return ""
    major, minor = match.group(1), match.group(2)
    if family == "RedHat":
        layout = el_layout(release)
        if layout == "major":
            return "rhel" + major
        if layout == "minor" and minor is not None:
            return "rhel%s.%s" % (major, minor)
        return ""
    if family == "Debian":
        if str(distribution) == "Ubuntu" and minor is not None:
            return "ubuntu%s.%s" % (major, minor)
        if str(distribution) == "Debian":
            return "debian" + major
    return ""
