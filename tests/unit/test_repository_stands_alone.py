"""The repository stands alone (issue #33): a plain clone has nothing beside it.

Every git-tracked text file is read, and a line fails the test when it reaches
outside the repository root:

* the folder of captures that used to lie beside the clone (the word "shared"
  followed by "fixtures", or a parent step followed by "shared");
* a step above a variable that holds the repository root (``ROOT``,
  ``repo_root``, ...): Python's os.path.join/dirname and pathlib's ``/`` and
  ``.parent``, and the shell's ``$root/`` followed by a parent step;
* more parent steps, counted from the file's own folder (``__file__`` in Python,
  ``${BASH_SOURCE[0]}`` or ``$0`` in shell), than the file lies deep.

The needles below are split or escaped so that this file does not match them
itself; it is scanned like every other file.
"""

import os
import re
import shutil
import subprocess

import pytest

from conftest import ROOT

UP = re.escape("..")          # one parent step
Q = "[\"']"                   # a quote
ROOT_VAR = r"[A-Za-z_]*root"  # ROOT, repo_root, REPO_ROOT, project_root ...

# (what it is, regex); matched case-insensitively, line by line
NEEDLES = [
    ("the captures folder beside the clone", UP + "/" + "shared" + r"\b"),
    ("the captures folder beside the clone", "shared" + "[/]" + "fixtures"),
    ("the captures folder beside the clone", Q + "shared" + Q + r"\s*,\s*" + Q + "fixtures" + Q),
    ("a path above the repository root", r"join\(\s*" + ROOT_VAR + r"\s*,\s*" + Q + UP + Q),
    ("a path above the repository root", r"dirname\(\s*" + ROOT_VAR + r"\s*\)"),
    ("a path above the repository root", ROOT_VAR + r"\)?\.parents?\b"),
    ("a path above the repository root", ROOT_VAR + r"\)?\s*/\s*" + Q + UP + Q),
    ("a path above the repository root", r"\$\{?" + ROOT_VAR + r"\}?\"?/" + UP + r"(?![\w.])"),
]
NEEDLES = [(what, re.compile(regex, re.IGNORECASE)) for what, regex in NEEDLES]

# parent steps counted from the file's own folder: (regex, steps(match))
STEPS = [
    # os.path.join(os.path.dirname([os.path.abspath(]__file__)), "..", "..")
    (re.compile(r"dirname\(\s*(?:os\.path\.(?:abs|real)path\(\s*)?__file__\s*\)?\s*\)((?:\s*,\s*" + Q + UP + Q + ")+)"),
     lambda m: m.group(1).count("..")),
    # os.path.dirname(os.path.dirname(os.path.abspath(__file__))): one per dirname past the first
    (re.compile(r"((?:os\.path\.dirname\(\s*)+)(?:os\.path\.(?:abs|real)path\(\s*)?__file__"),
     lambda m: m.group(1).count("dirname") - 1),
    # Path(__file__)[.resolve()].parent.parent / .parents[N]
    (re.compile(r"Path\(\s*__file__\s*\)(?:\.resolve\(\))?((?:\.parent\b)+)"), lambda m: m.group(1).count("parent") - 1),
    (re.compile(r"Path\(\s*__file__\s*\)(?:\.resolve\(\))?\.parents\[(\d+)\]"), lambda m: int(m.group(1))),
    # $(dirname "${BASH_SOURCE[0]}")/../..  and  $(dirname "$0")/..
    (re.compile(r"dirname\s+\"?(?:\$\{BASH_SOURCE\[0\]\}|\$\{?0\}?)\"?\s*\)\"?((?:/" + UP + r")+)(?![\w.])"),
     lambda m: m.group(1).count("..")),
]


def problems_in(path, text):
    """'path:line: what: the line' for each line of text that reaches outside the root."""
    depth = path.count("/")  # parent steps from the file's folder to the root
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        whats = list(dict.fromkeys(what for what, regex in NEEDLES if regex.search(line)))
        whats += ["%d parent steps from a file %d deep" % (steps(m), depth)
                  for regex, steps in STEPS for m in regex.finditer(line) if steps(m) > depth]
        found += ["%s:%d: %s: %s" % (path, number, what, line.strip()[:160]) for what in whats]
    return found


def tracked_files():
    if shutil.which("git") is None or not os.path.exists(os.path.join(ROOT, ".git")):
        pytest.skip("not a git checkout: no list of tracked files")
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, stdout=subprocess.PIPE, check=True).stdout
    return [name for name in out.decode("utf-8").split("\0") if name]


def test_no_tracked_file_reaches_outside_the_repository():
    found = []
    for name in tracked_files():
        full = os.path.join(ROOT, name)
        if os.path.islink(full) or not os.path.isfile(full):
            continue  # a symlink's target is checked where it lies; a deleted file is not there
        with open(full, "rb") as handle:
            data = handle.read()
        if b"\0" in data:
            continue  # binary
        found += problems_in(name, data.decode("utf-8", errors="replace"))
    assert found == [], "files that refer to something outside the repository root:\n" + "\n".join(found)


# the scanner itself, on samples assembled here so that the file holds none of them

BAD = [
    ("README.md", "captured on a real node (`" + ".." + "/shared" + "/fixtures`)"),
    ("tests/unit/conftest.py", "X = os.path.join(ROOT, " + "\"..\", \"shared\"" + ", \"fixtures\")"),
    ("tests/harness/standin_repo/build.sh", "F=$(cd \"$repo_root/" + "..\" && pwd)/x"),
    ("tests/harness/standin_repo/build.sh", "F=${repo_root}/" + "../x"),
    ("tests/unit/x.py", "up = os.path.dirname(" + "ROOT)"),
    ("tests/unit/x.py", "up = Path(ROOT)" + ".parent"),
    ("tests/unit/x.py", "up = ROOT / " + "\"..\""),
    ("tests/unit/x.py", "R = os.path.join(os.path.dirname(__file__), " + "\"..\", \"..\", \"..\")"),
    ("tests/unit/x.py", "M = " + "os.path.dirname(" * 4 + "os.path.abspath(__file__)" + ")" * 5),
    ("tests/unit/x.py", "R = Path(__file__).resolve()" + ".parent.parent.parent.parent"),
    ("tests/unit/x.py", "R = Path(__file__).parents[" + "3]"),
    ("scripts/x.sh", "cd \"$(dirname \"${BASH_SOURCE[0]}\")/" + "../..\""),
    ("x.sh", "cd \"$(dirname \"$0\")/" + "..\""),
]

GOOD = [
    ("tests/unit/conftest.py", "ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), \"..\", \"..\"))"),
    ("filter_plugins/x.py", "M = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), \"m\")"),
    ("tests/harness/gpu_node/run.sh", "cd \"$(dirname \"${BASH_SOURCE[0]}\")/../../..\""),
    ("tests/harness/standin_repo/build.sh", "repo_root=$(cd \"$here/../../..\" && pwd)"),
    ("tests/unit/x.py", "F = os.path.join(ROOT, \"tests\", \"fixtures\", \"gpu_node\", \"h200\", \"capture\")"),
    ("tests/unit/x.py", "extra: {gpudirect_host_prereqs_limits_file: /etc/security/limits.d/../../passwd.conf}"),
    ("tests/unit/x.py", "shared by both lanes; the shared input rules"),
    ("tests/unit/x.py", "vm = Path(__file__).resolve().parent"),
]


@pytest.mark.parametrize("path,line", BAD)
def test_the_scanner_finds(path, line):
    assert problems_in(path, line), line


@pytest.mark.parametrize("path,line", GOOD)
def test_the_scanner_lets_pass(path, line):
    assert problems_in(path, line) == []
