"""Issue #31, outcome 4: one helper each.

Small helpers used to exist several times with different behaviour (four C-locale dicts, one of
them without LC_MESSAGES; two ``read_text`` that disagreed on stripping and on bytes that are not
UTF-8; two ANSI patterns; six dpkg-query parsers). Each now has one home, and this test fails when
a copy comes back anywhere the modules, filters and callbacks live: import the helper instead.
"""

import ast
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCANNED = ("library", "module_utils", "filter_plugins", "callback_plugins")


def _sources(root=ROOT):
    for folder in SCANNED:
        base = os.path.join(root, folder)
        for name in sorted(os.listdir(base)):
            if name.endswith(".py"):
                rel = "%s/%s" % (folder, name)
                with open(os.path.join(base, name), encoding="utf-8") as handle:
                    yield rel, handle.read()


def _string_values(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node


def locale_copies(rel, text):
    """A C-locale environment built here instead of imported from gpudirect_host."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "C_LOCALE" for t in targets):
                found.append("%s:%d: C_LOCALE defined" % (rel, node.lineno))
        if isinstance(node, ast.Dict):
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant)]
            if "LC_ALL" in keys:
                found.append("%s:%d: a dict with LC_ALL" % (rel, node.lineno))
        if isinstance(node, ast.Call) and any(k.arg == "LC_ALL" for k in node.keywords):
            found.append("%s:%d: LC_ALL= in a call" % (rel, node.lineno))
    return found


def ansi_copies(rel, text):
    """A pattern for terminal escape sequences written here instead of gpudirect_versions.strip_ansi."""
    found = []
    for node in _string_values(ast.parse(text)):
        if re.search(r"(\\x1b|\\033|\\e|\x1b|\\u001b)\\?\[", node.value):
            found.append("%s:%d: an escape-sequence pattern %r" % (rel, node.lineno, node.value))
    return found


# family -> (its one home, the finder of copies)
FAMILIES = {
    "C_LOCALE": ("module_utils/gpudirect_host.py", locale_copies),
    "ANSI": ("module_utils/gpudirect_versions.py", ansi_copies),
}


def _copies(family, sources):
    home, finder = FAMILIES[family]
    found = []
    for rel, text in sources:
        if rel != home:
            found.extend(finder(rel, text))
    return found


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_helper_has_one_home(family):
    home = FAMILIES[family][0]
    assert os.path.isfile(os.path.join(ROOT, home)), home
    copies = _copies(family, _sources())
    assert copies == [], "%s has one home, %s; import it instead of: %s" % (family, home, copies)


@pytest.mark.parametrize("family, copy", [
    ("C_LOCALE", 'C_LOCALE = {"LC_ALL": "C", "LANG": "C"}\n'),
    ("C_LOCALE", 'def run(m, argv):\n    return m.run_command(argv, environ_update={"LC_ALL": "C"})\n'),
    ("C_LOCALE", 'import os\nENV = dict(os.environ, LC_ALL="C")\n'),
    ("ANSI", 'import re\n_ANSI = re.compile(r"\\x1b\\[[0-9;]*[A-Za-z]")\n'),
    ("ANSI", 'import re\nCOLOUR = re.compile("\\033\\\\[[0-9;]*m")\n'),
])
def test_a_reintroduced_copy_is_found(family, copy):
    """The guard itself: a copy written into a module is reported."""
    assert _copies(family, [("library/a_new_module.py", copy)]) != []
