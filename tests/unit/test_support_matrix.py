"""The root README's support matrix says, per distribution, which test tier ran each group of
roles (issue #31 outcome 6: the README listed EL nodes as managed while every EL path is linted
only). The matrix must exist, name every distribution the README calls a managed node, and
cite only tiers that exist: a Molecule scenario that scripts/test.sh runs in that tier (a
container scenario on the Debian 12 image, a VM scenario on tests/harness/vm/), and the GPU
node harness for the GPU node tier."""

import os
import re

from conftest import ROOT

TIERS = {
    "container tier": "container",
    "VM tier (Debian 12 kernel)": "vm",
    "GPU node (lent VM: Ubuntu 24.04 userland, real H100/H200)": "gpu_node",
    "lint only": None,
}


def _readme():
    with open(os.path.join(ROOT, "README.md")) as f:
        return f.read()


def _matrix():
    text = _readme()
    start = text.index("### Support matrix")
    rows = [line for line in text[start:].splitlines() if line.startswith("|")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    body = [[c.strip() for c in r.strip("|").split("|")] for r in rows[2:]]
    return header, body


def _test_sh_stages():
    """scenario -> tier, from scripts/test.sh's stage functions"""
    with open(os.path.join(ROOT, "scripts", "test.sh")) as f:
        text = f.read()
    stages = {}
    for stage, names in re.findall(r"^stage_(\w+)\(\) \{.*?scenarios ([\w ]+);", text, re.M):
        for name in names.split():
            # the slurm stage's nodes are containers of the node image with Slurm added
            stages[name] = "container" if stage in ("container", "slurm") else "vm"
    return stages


def _cell_tiers(cell):
    """[(tier label, [scenario names cited after it])] of one cell"""
    found = []
    for part in re.split(r";\s*", cell):
        label = next((t for t in TIERS if part.startswith(t)), None)
        assert label, "cell part names no known tier: %r" % part
        cited = re.match(re.escape(label) + r"\s*(?::[^(]*)?(\(([^)]*)\))?", part)
        names = re.findall(r"`([\w]+)`", cited.group(2) or "") if label in ("container tier", "VM tier (Debian 12 kernel)") else []
        found.append((label, names))
    return found


def test_the_matrix_names_every_managed_distribution():
    header, body = _matrix()
    managed = re.search(r"^- Managed nodes: (.*?), with Python 3\.", _readme(), re.M).group(1)
    assert header[1:] == ["Debian 12", "Ubuntu 24.04", "Ubuntu 22.04", "RHEL/Rocky/Alma 8/9"]
    for dist in ("Debian 12", "Ubuntu 22.04/24.04", "RHEL/Rocky/Alma 8/9"):
        assert dist in managed
    assert body and all(len(row) == len(header) for row in body)


def test_every_cited_tier_exists_and_runs_where_the_matrix_says():
    _, body = _matrix()
    stages = _test_sh_stages()
    cited = set()
    for row in body:
        for column, cell in enumerate(row[1:], start=1):
            for label, names in _cell_tiers(cell):
                tier = TIERS[label]
                if tier in ("container", "vm"):
                    assert column == 1, "the %s runs Debian 12 only: %r" % (label, row)
                    assert names, "no scenario cited for %s in %r" % (label, row)
                if tier == "gpu_node":
                    assert column == 2
                    assert os.path.isfile(os.path.join(ROOT, "tests", "harness", "gpu_node", "run.sh"))
                for name in names:
                    cited.add(name)
                    scenario = os.path.join(ROOT, "molecule", name)
                    assert os.path.isfile(os.path.join(scenario, "molecule.yml")), name
                    assert stages.get(name) == tier, "%s: scripts/test.sh runs it as %s" % (name, stages.get(name))
                    with open(os.path.join(scenario, "molecule.yml")) as f:
                        spec = f.read()
                    if tier == "container":
                        assert re.search(r"image: .*gpudirect-node:debian12", spec) or "tests/harness/slurm/" in spec, name
                    else:
                        assert "vm.py" in spec or "harness/vm" in spec, name
    # every scenario scripts/test.sh runs is cited somewhere
    assert cited == set(stages), (cited, stages)


def test_el_and_ubuntu_2204_are_lint_only():
    header, body = _matrix()
    for row in body:
        for dist in ("Ubuntu 22.04", "RHEL/Rocky/Alma 8/9"):
            assert row[header.index(dist)] == "lint only", row
