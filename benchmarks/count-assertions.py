#!/usr/bin/env python3
"""Count the assertions of each Molecule scenario, to show that a change to the suite
(to make it faster, issue #26) kept every one of them.

Per scenario: the `assert` tasks in the playbooks the scenario runs (its own YAML files
and the shared ones under molecule/resources that they name, followed through
`../resources/...` references), the testinfra tests (`def test_`) of its verifier
directory, and the findings its own checker scripts can report (`found.append(` in
files/check_*.py, e.g. rolling's check_rolling.py). Static counts: a task that loops or
runs on three nodes counts once.

    python3 benchmarks/count-assertions.py            # this checkout
    python3 benchmarks/count-assertions.py --rev REV  # a commit, read with git show
"""

import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
ASSERT_RE = re.compile(r"^\s*(?:-\s+)?(?:ansible\.builtin\.)?assert:\s*$", re.M)
TEST_RE = re.compile(r"^def test_", re.M)
FINDING_RE = re.compile(r"\bfound\.append\(")
REF_RE = re.compile(r"(?:\.\./)+resources/[\w./-]+\.(?:ya?ml|py)")


class Tree(object):
    """Files of the checkout, or of a commit through git."""

    def __init__(self, rev=None):
        self.rev = rev
        if rev:
            out = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, "molecule"], cwd=ROOT,
                                 stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout
            self.files = set(out.split())
        else:
            self.files = set()
            for d, _sub, names in os.walk(os.path.join(ROOT, "molecule")):
                for name in names:
                    self.files.add(os.path.relpath(os.path.join(d, name), ROOT))

    def read(self, path):
        if self.rev:
            return subprocess.run(["git", "show", "%s:%s" % (self.rev, path)], cwd=ROOT, stdout=subprocess.PIPE,
                                  universal_newlines=True, check=True).stdout
        with open(os.path.join(ROOT, path)) as handle:
            return handle.read()


def scenario_files(tree, scenario):
    """The scenario's own YAML files and the molecule/resources files they reach."""
    base = "molecule/%s/" % scenario
    todo = [f for f in tree.files if f.startswith(base) and f.endswith((".yml", ".yaml"))]
    seen = set()
    while todo:
        path = todo.pop()
        if path in seen or path not in tree.files:
            continue
        seen.add(path)
        for ref in REF_RE.findall(tree.read(path)):
            target = os.path.normpath(os.path.join(os.path.dirname(path), ref))
            if target.endswith((".yml", ".yaml")):
                todo.append(target)
    return sorted(seen)


def verifier_dir(tree, scenario):
    text = tree.read("molecule/%s/molecule.yml" % scenario)
    match = re.search(r"^verifier:\n(?:  .*\n)*?  directory: (\S+)", text, re.M)
    rel = match.group(1) if match else "tests"
    return os.path.normpath(os.path.join("molecule", scenario, rel))


def count(tree):
    rows = []
    scenarios = sorted(set(f.split("/")[1] for f in tree.files if f.endswith("/molecule.yml")))
    for scenario in scenarios:
        asserts = sum(len(ASSERT_RE.findall(tree.read(f))) for f in scenario_files(tree, scenario))
        vdir = verifier_dir(tree, scenario) + "/"
        tests = sum(len(TEST_RE.findall(tree.read(f))) for f in tree.files
                    if f.startswith(vdir) and os.path.basename(f).startswith("test_") and f.endswith(".py"))
        checks = sum(len(FINDING_RE.findall(tree.read(f))) for f in tree.files
                     if f.startswith("molecule/%s/files/check" % scenario) and f.endswith(".py"))
        rows.append((scenario, asserts, tests, checks))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rev", help="a commit to count instead of the checkout")
    args = parser.parse_args()
    rows = count(Tree(args.rev))
    print("| scenario | assert tasks | testinfra tests | checker findings |")
    print("|---|---|---|---|")
    for row in rows:
        print("| %s | %d | %d | %d |" % row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
