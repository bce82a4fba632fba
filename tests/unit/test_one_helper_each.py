"""Issue #31, outcome 4: one helper each.

Small helpers used to exist several times with different behaviour (four C-locale dicts, one of
them without LC_MESSAGES; two ``read_text`` that disagreed on stripping and on bytes that are not
UTF-8; two ANSI patterns; six dpkg-query parsers; four table renderers). Each now has one home,
and this test fails when a copy comes back anywhere the modules, filters and callbacks live:
import the helper instead.
"""

import ast
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCANNED = ("library", "module_utils", "plugin_utils", "filter_plugins", "callback_plugins")


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


def _catches_oserror(handler):
    names = []
    for node in ast.walk(handler.type) if handler.type is not None else []:
        if isinstance(node, ast.Name):
            names.append(node.id)
    return handler.type is None or bool({"IOError", "OSError", "EnvironmentError", "Exception"} & set(names))


def _is_whole_read(expr):
    """``handle.read()``, optionally ``.strip()``/``.decode(..)``-ed: the whole file as the answer."""
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) \
            and expr.func.attr in ("strip", "rstrip", "decode"):
        expr = expr.func.value
    return (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "read"
            and not expr.args and isinstance(expr.func.value, ast.Name))


def _reads_or_default(node):
    """``try: with open(..) as h: return h.read() except OSError: return <default>``."""
    if not isinstance(node, ast.Try) or len(node.body) != 1 or not isinstance(node.body[0], ast.With):
        return False
    block = node.body[0]
    opens = any(isinstance(item.context_expr, ast.Call) and getattr(item.context_expr.func, "id", "") == "open"
                for item in block.items)
    returns = len(block.body) == 1 and isinstance(block.body[0], ast.Return) and _is_whole_read(block.body[0].value)
    answers = any(_catches_oserror(h) and any(isinstance(n, ast.Return) for n in h.body) for h in node.handlers)
    return opens and returns and answers


def reader_copies(rel, text):
    """A file reader that answers a default when the file is missing or unreadable, written here
    instead of gpudirect_host.read_text / read_attr / read_bytes, whatever the function is called."""
    found = []
    for func in ast.walk(ast.parse(text)):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if func.name in ("read_text", "read_attr", "read_bytes"):
            found.append("%s:%d: def %s" % (rel, func.lineno, func.name))
        elif any(_reads_or_default(node) for node in ast.walk(func)):
            found.append("%s:%d: %s() reads a file and answers a default" % (rel, func.lineno, func.name))
    return found


def dpkg_copies(rel, text):
    """dpkg-query's format or its status letters read here instead of through gpudirect_dpkg
    (dpkg_query_argv, parse_dpkg_query, installed_and_held)."""
    found = []
    tree = ast.parse(text)
    docstrings = set(id(node.body[0].value) for node in ast.walk(tree)
                     if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and node.body
                     and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant))
    for node in _string_values(tree):
        if id(node) not in docstrings and ("${db:Status" in node.value or "${Status}" in node.value):
            found.append("%s:%d: a dpkg-query format %r" % (rel, node.lineno, node.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and "dpkg" in node.name.lower():
            splits = [call for call in ast.walk(node) if isinstance(call, ast.Call)
                      and isinstance(call.func, ast.Attribute) and call.func.attr in ("split", "splitlines")]
            if splits:
                found.append("%s:%d: %s() splits dpkg-query's lines itself" % (rel, node.lineno, node.name))
    return found


# module_utils/gpudirect_lock.py's table() (the drain's left-drained table, "%-*s") is the one
# renderer not yet on gpudirect_table: that file belongs to the drain work under way. Remove it
# from here when it moves, and the guard covers it too.
TABLE_EXCEPTIONS = ()


def table_copies(rel, text):
    """Columns padded to a computed width here instead of by gpudirect_table.text_table."""
    if rel in TABLE_EXCEPTIONS:
        return []
    found = []
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("ljust", "rjust", "center") and node.args:
            found.append("%s:%d: .%s() pads a column" % (rel, node.lineno, node.func.attr))
    for node in _string_values(tree):
        if re.search(r"%-?\*s|\{:[<>^]?\{", node.value):
            found.append("%s:%d: %r pads to a computed width" % (rel, node.lineno, node.value))
    return found


# digits, a dot, digits: the start of every version pattern (r"\d+\.\d+", r"(\d+)\.(\d+)",
# r"[0-9]+\.[0-9]+", r"\d{3}\.\d+"); a speed's r"\d+(?:\.\d+)?" is not one
_VERSION_SHAPE = re.compile(r"(\\d|\[0-9\])(\+|\{\d+(,\d*)?\})\)?\\\.\(?(\\d|\[0-9\])")


def version_copies(rel, text):
    """A version pattern compiled here instead of parsed by gpudirect_versions. Line formats that
    carry a version as one opaque field (dkms status, apt-cache policy, nvidia-imex-ctl) are
    parsers of their own lines, not version parsers: they take ``\\S+`` there."""
    found = []
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "re" and node.args \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            pattern = node.args[0].value
            if _VERSION_SHAPE.search(pattern):
                found.append("%s:%d: a version pattern %r" % (rel, node.lineno, pattern))
    return found


# family -> (its one home, the finder of copies)
FAMILIES = {
    "C_LOCALE": ("module_utils/gpudirect_host.py", locale_copies),
    "ANSI": ("module_utils/gpudirect_versions.py", ansi_copies),
    "read_text": ("module_utils/gpudirect_host.py", reader_copies),
    "dpkg-query": ("module_utils/gpudirect_dpkg.py", dpkg_copies),
    "table": ("module_utils/gpudirect_table.py", table_copies),
    "version": ("module_utils/gpudirect_versions.py", version_copies),
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
    ("read_text", 'def read_text(path):\n    return open(path).read()\n'),
    ("read_text", 'def _read(path, binary=False):\n    try:\n        with open(path, "rb" if binary else "r") as h:\n'
                  '            return h.read()\n    except (IOError, OSError):\n        return None\n'),
    ("read_text", 'def sysfs(path):\n    try:\n        with open(path) as h:\n            return h.read().strip()\n'
                  '    except (IOError, OSError, UnicodeDecodeError):\n        return ""\n'),
    ("dpkg-query", 'ARGV = ["dpkg-query", "-W", "-f=${Version} ${db:Status-Abbrev}", "rdma-core"]\n'),
    ("dpkg-query", 'def parse_dpkg_query(text):\n    return [line.split() for line in text.splitlines()]\n'),
    ("table", 'def table(cells, widths):\n    return ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in cells]\n'),
    ("table", 'def table(cells, w):\n    return ["%-*s  %s" % (w, a, b) for a, b in cells]\n'),
    ("table", 'def table(cells, w):\n    return ["{:<{}}  {}".format(a, w, b) for a, b in cells]\n'),
    ("version", 'import re\nm = re.search(r"(\\d+)\\.(\\d+)(?:\\.(\\d+))?", text)\n'),
    ("version", 'import re\nKERNEL_RELEASE_RE = re.compile(r"^[0-9]+\\.[0-9]+(?:[.+~_-][A-Za-z0-9]+)*$")\n'),
    ("version", 'import re\nDRIVER = re.compile(r"(?P<branch>\\d{3})\\.\\d+")\n'),
    ("ANSI", 'import re\n_ANSI = re.compile(r"\\x1b\\[[0-9;]*[A-Za-z]")\n'),
    ("ANSI", 'import re\nCOLOUR = re.compile("\\033\\\\[[0-9;]*m")\n'),
])
def test_a_reintroduced_copy_is_found(family, copy):
    """The guard itself: a copy written into a module is reported."""
    assert _copies(family, [("library/a_new_module.py", copy)]) != []


# The roles run dpkg-query themselves where a module would be too much (a package list for a
# set_fact): they ask filter_plugins/gpudirect_dpkg.py for the argv and the records, so the
# format is spelled in gpudirect_dpkg.py alone.
_YAML_DPKG = re.compile(r"\$\{(db:Status[^}]*|Status|Package|binary:Package|Version|Architecture)\}|--showformat|"
                        r"\bdpkg-query\b[\"']?\s*,|\[\s*[\"']?dpkg-query\b")


def yaml_dpkg_copies(rel, text):
    """A dpkg-query command line or format spelled in role or playbook YAML (comments aside)."""
    return ["%s:%d: %s" % (rel, number, line.strip()) for number, line in enumerate(text.splitlines(), start=1)
            if not line.lstrip().startswith("#") and _YAML_DPKG.search(line.split(" #", 1)[0])]


def _yaml_sources():
    for folder in ("roles", "playbooks"):
        for base, _dirs, files in os.walk(os.path.join(ROOT, folder)):
            for name in sorted(files):
                if name.endswith((".yml", ".yaml", ".j2")):
                    path = os.path.join(base, name)
                    with open(path, encoding="utf-8") as handle:
                        yield os.path.relpath(path, ROOT), handle.read()


def test_roles_ask_the_dpkg_filters_for_the_query():
    copies = [c for rel, text in _yaml_sources() for c in yaml_dpkg_copies(rel, text)]
    assert copies == [], "use gpudirect_dpkg_query_argv / gpudirect_dpkg_installed instead of: %s" % copies


@pytest.mark.parametrize("line", [
    "    argv: [dpkg-query, -W, \"-f=${Package} ${Version}\\n\", nvidia-smi]",
    "    argv: [dpkg-query, --show, '--showformat=${db:Status-Abbrev} ${Package}\\n']",
    "  dpkg: [\"dpkg-query\", \"-W\"]",
    "      - dpkg-query\n      - -W\n      - -f=${binary:Package}\n",
])
def test_a_dpkg_query_spelled_in_yaml_is_found(line):
    assert yaml_dpkg_copies("roles/x/tasks/main.yml", "---\n- name: x\n" + line + "\n") != []
    assert yaml_dpkg_copies("roles/x/tasks/main.yml", "# dpkg-query -W -f='${Package}'\n") == []
