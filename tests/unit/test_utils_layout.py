"""Which helper goes where (issue #31): module_utils/ holds what the modules import, and so what
Ansible ships to the nodes with them; plugin_utils/ holds what only the controller runs (the
filters' and callbacks' helpers). The import graph decides, read from the sources."""

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _stems(folder):
    return sorted(f[:-3] for f in os.listdir(os.path.join(ROOT, folder)) if f.endswith(".py"))


def _imports(path):
    """The project helpers a Python file imports (``ansible.module_utils.<stem>``, either spelling)."""
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), path)
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "ansible.module_utils":
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ansible.module_utils."):
            out.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            out.update(a.name.split(".")[2] for a in node.names if a.name.startswith("ansible.module_utils."))
    return {name for name in out if name.startswith("gpudirect_")}


MODULE_UTILS = _stems("module_utils")
PLUGIN_UTILS = _stems("plugin_utils")
HELPER_PATH = dict([(s, os.path.join(ROOT, "module_utils", s + ".py")) for s in MODULE_UTILS]
                   + [(s, os.path.join(ROOT, "plugin_utils", s + ".py")) for s in PLUGIN_UTILS])


def _closure(paths):
    seen, pending = set(), [p for p in paths]
    while pending:
        for name in _imports(pending.pop()):
            if name in HELPER_PATH and name not in seen:
                seen.add(name)
                pending.append(HELPER_PATH[name])
    return seen


def _files(folder):
    return [os.path.join(ROOT, folder, s + ".py") for s in _stems(folder)]


def test_a_helper_lives_in_one_of_the_two_folders_only():
    assert set(MODULE_UTILS) & set(PLUGIN_UTILS) == set()
    assert MODULE_UTILS and PLUGIN_UTILS


def test_every_module_utils_file_is_shipped_with_some_module():
    shipped = _closure(_files("library"))
    controller_only = sorted(set(MODULE_UTILS) - shipped)
    assert controller_only == [], (
        "no module imports %s: move it to plugin_utils/ (and its imports stay as they are)" % controller_only)


def test_no_module_and_no_module_utils_file_reaches_a_controller_only_helper():
    for path in _files("library") + _files("module_utils"):
        reached = _closure([path]) & set(PLUGIN_UTILS)
        assert reached == set(), "%s imports the controller-only %s: a module cannot ship it" % (
            os.path.relpath(path, ROOT), sorted(reached))


def test_every_plugin_utils_file_serves_a_filter_or_a_callback():
    used = _closure(_files("filter_plugins") + _files("callback_plugins"))
    unused = sorted(set(PLUGIN_UTILS) - used)
    assert unused == [], "no filter or callback imports %s" % unused


def test_the_import_reader_sees_all_three_spellings(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("from ansible.module_utils import gpudirect_a, gpudirect_b as b\n"
                      "from ansible.module_utils.gpudirect_c import x\n"
                      "import ansible.module_utils.gpudirect_d\n"
                      "from ansible.module_utils.basic import AnsibleModule\n")
    assert _imports(str(sample)) == {"gpudirect_a", "gpudirect_b", "gpudirect_c", "gpudirect_d"}
