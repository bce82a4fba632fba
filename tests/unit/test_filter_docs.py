"""Every Jinja2 filter in filter_plugins/ has documentation ansible-doc can read (issue #31).

A filter plugin file defines several filters, and Ansible reads a filter's
documentation from a YAML file next to the plugin named after the filter, not after
the .py file: ``filter_plugins/<filter>.yml`` with DOCUMENTATION, EXAMPLES and
RETURN. Nothing read those files before, so a filter added without one, a sidecar
left behind by a renamed filter, or an argument added to a filter without its
documentation went unnoticed; ``ansible-doc -t filter -l`` listed every project
filter as UNDOCUMENTED. The checks:

* the filters are what ``FilterModule().filters()`` of each filter_plugins/*.py
  returns, the files loaded by path as scripts/build-collection.sh loads them; every
  filter has a sidecar and every sidecar names a filter;
* each sidecar loads with ``yaml.safe_load`` and holds what ansible-doc shows:
  DOCUMENTATION with the filter's name, short_description, description, options
  (``_input`` and every other with description and type), RETURN ``_value`` with
  description and type, EXAMPLES that load as YAML and use the filter;
* ``positional`` names exactly the function's parameters after the input, in order
  (from ``inspect.signature``), each an option; no option names something the
  function does not take; an option is ``required`` exactly when its parameter has
  no default, and a documented default is the function's;
* ``ansible-doc -t filter --json`` (every filter in one call) exits 0 and returns
  each filter's documentation from its sidecar, and ``ansible-doc -t filter -l``
  lists no project filter as UNDOCUMENTED. Both run from a folder that is not the
  repository with ANSIBLE_CONFIG unset, so the project's ansible.cfg plays no part;
  ANSIBLE_FILTER_PLUGINS points at filter_plugins/.

Each failure names the filter and what is missing or wrong.
"""

import importlib.util
import inspect
import json
import os
import subprocess
import sys

import pytest
import yaml

from conftest import ROOT
from hang_guard import HANG_GUARD_S

FILTER_PLUGINS = os.path.join(ROOT, "filter_plugins")
ANSIBLE_DOC = os.path.join(os.path.dirname(sys.executable), "ansible-doc")
SIDECAR_SUFFIXES = (".yml", ".yaml")


def _load_filters():
    """{filter name: [(function, plugin file), ...]} over every filter_plugins/*.py."""
    found = {}
    for fname in sorted(os.listdir(FILTER_PLUGINS)):
        if not fname.endswith(".py"):
            continue
        spec = importlib.util.spec_from_file_location("_filter_docs_" + fname[:-3], os.path.join(FILTER_PLUGINS, fname))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for name, function in module.FilterModule().filters().items():
            found.setdefault(name, []).append((function, fname))
    return found


DEFINED = _load_filters()
FILTERS = {name: entries[0][0] for name, entries in DEFINED.items()}
NAMES = sorted(FILTERS)
SIDECARS = {}
for _fname in sorted(os.listdir(FILTER_PLUGINS)):
    if _fname.endswith(SIDECAR_SUFFIXES):
        SIDECARS.setdefault(os.path.splitext(_fname)[0], []).append(_fname)


def _sidecar(name):
    """The filter's sidecar loaded with yaml.safe_load (the test fails naming the filter otherwise)."""
    if name not in SIDECARS:
        pytest.fail("filter %s has no documentation: write filter_plugins/%s.yml" % (name, name))
    path = os.path.join(FILTER_PLUGINS, SIDECARS[name][0])
    with open(path, encoding="utf-8") as handle:
        try:
            data = yaml.safe_load(handle)
        except yaml.YAMLError as exc:
            pytest.fail("filter %s: %s is not valid YAML: %s" % (name, SIDECARS[name][0], exc))
    if not isinstance(data, dict):
        pytest.fail("filter %s: %s is not a mapping" % (name, SIDECARS[name][0]))
    return data


def _parameters(function):
    """The function's named parameters, *args and **kwargs left out."""
    return [p for p in inspect.signature(function).parameters.values()
            if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]


def _plain(value):
    return list(value) if isinstance(value, tuple) else value


def _ansible_doc(tmp_path, *args):
    env = dict(os.environ)
    env.pop("ANSIBLE_CONFIG", None)
    env["ANSIBLE_FILTER_PLUGINS"] = FILTER_PLUGINS
    env["ANSIBLE_NOCOLOR"] = "1"
    return subprocess.run([ANSIBLE_DOC, "-t", "filter"] + list(args), cwd=str(tmp_path), env=env,
                          capture_output=True, text=True, timeout=HANG_GUARD_S)


def test_every_filter_is_found():
    # a guard against a parametrization over nothing
    assert len(NAMES) >= 40, NAMES
    assert "gpudirect_hosts" in NAMES and "gpudirect_verify_verdict" in NAMES
    twice = {name: [f for _, f in entries] for name, entries in DEFINED.items() if len(entries) > 1}
    assert not twice, "filters defined in more than one file: %s" % twice


def test_every_filter_has_a_sidecar_and_every_sidecar_a_filter():
    missing = [name for name in NAMES if name not in SIDECARS]
    extra = sorted(f for name, files in SIDECARS.items() if name not in FILTERS for f in files)
    both = sorted(f for files in SIDECARS.values() if len(files) > 1 for f in files)
    problems = []
    if missing:
        problems.append("filters without documentation (write filter_plugins/NAME.yml): %s" % ", ".join(missing))
    if extra:
        problems.append("sidecars that name no filter of filter_plugins/*.py: %s" % ", ".join(extra))
    if both:
        problems.append("one filter, two sidecars: %s" % ", ".join(both))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", NAMES)
def test_sidecar_holds_what_ansible_doc_needs(name):
    data = _sidecar(name)
    problems = ["no %s" % key for key in ("DOCUMENTATION", "EXAMPLES", "RETURN") if key not in data]
    doc = data.get("DOCUMENTATION") if isinstance(data.get("DOCUMENTATION"), dict) else {}
    if doc.get("name") != name:
        problems.append("DOCUMENTATION name is %r" % doc.get("name"))
    for field in ("short_description", "description"):
        if not doc.get(field):
            problems.append("DOCUMENTATION has no %s" % field)
    options = doc.get("options") if isinstance(doc.get("options"), dict) else {}
    if "_input" not in options:
        problems.append("options has no _input (the value left of the pipe)")
    for opt, spec in options.items():
        for field in ("description", "type"):
            if not (isinstance(spec, dict) and spec.get(field)):
                problems.append("option %s has no %s" % (opt, field))
    returned = data.get("RETURN") if isinstance(data.get("RETURN"), dict) else {}
    value = returned.get("_value")
    for field in ("description", "type"):
        if not (isinstance(value, dict) and value.get(field)):
            problems.append("RETURN _value has no %s" % field)
    examples = data.get("EXAMPLES")
    if not (isinstance(examples, str) and examples.strip()):
        problems.append("EXAMPLES is empty")
    else:
        if name not in examples:
            problems.append("EXAMPLES do not use the filter")
        try:
            yaml.safe_load(examples)
        except yaml.YAMLError as exc:
            problems.append("EXAMPLES are not valid YAML: %s" % exc)
    assert not problems, "filter %s (filter_plugins/%s.yml): %s" % (name, name, "; ".join(problems))


@pytest.mark.parametrize("name", NAMES)
def test_positional_and_options_match_the_function(name):
    doc = _sidecar(name).get("DOCUMENTATION") or {}
    options = doc.get("options") or {}
    params = _parameters(FILTERS[name])
    expected = [p.name for p in params[1:]]
    positional = doc.get("positional")
    documented = [p.strip() for p in positional.split(",")] if isinstance(positional, str) else []
    problems = []
    if positional is not None and not isinstance(positional, str):
        problems.append("positional must be a comma-separated string, got %r" % (positional,))
    if documented != expected:
        problems.append("positional is %s, the function takes %s after its input" % (
            documented or "absent", expected or "nothing"))
    for arg in documented:
        if arg not in options:
            problems.append("positional %s is not an option" % arg)
    known = {p.name: p for p in params[1:]}
    for opt, spec in options.items():
        if opt == "_input":
            continue
        if opt not in known:
            problems.append("option %s is not a parameter of %s" % (opt, FILTERS[name].__name__))
            continue
        spec = spec if isinstance(spec, dict) else {}
        has_default = known[opt].default is not inspect.Parameter.empty
        if bool(spec.get("required")) == has_default:
            problems.append("option %s is %srequired, but the parameter has %s default" % (
                opt, "" if spec.get("required") else "not ", "a" if has_default else "no"))
        if has_default and "default" in spec and spec["default"] != _plain(known[opt].default):
            problems.append("option %s documents default %r, the function's is %r" % (
                opt, spec["default"], known[opt].default))
    assert not problems, "filter %s (filter_plugins/%s.yml): %s" % (name, name, "; ".join(problems))


def test_ansible_doc_returns_every_filters_documentation(tmp_path):
    proc = _ansible_doc(tmp_path, "--json", *NAMES)
    assert proc.returncode == 0, "ansible-doc -t filter --json failed (rc %d); its errors name the filter:\n%s" % (
        proc.returncode, proc.stderr[-6000:])
    data = json.loads(proc.stdout)
    problems = []
    for name in NAMES:
        entry = data.get(name)
        if not isinstance(entry, dict) or not isinstance(entry.get("doc"), dict):
            problems.append("%s: no documentation" % name)
            continue
        doc = entry["doc"]
        if doc.get("name") != name:
            problems.append("%s: doc name is %r" % (name, doc.get("name")))
        if doc.get("filename") != os.path.join(FILTER_PLUGINS, name + ".yml"):
            problems.append("%s: documentation read from %r, not its sidecar" % (name, doc.get("filename")))
        if not doc.get("short_description"):
            problems.append("%s: no short_description" % name)
        if not (entry.get("examples") or "").strip():
            problems.append("%s: no EXAMPLES" % name)
        if not (entry.get("return") or {}).get("_value"):
            problems.append("%s: no RETURN _value" % name)
    assert not problems, "ansible-doc -t filter --json:\n" + "\n".join(problems)


def test_ansible_doc_lists_no_project_filter_undocumented(tmp_path):
    proc = _ansible_doc(tmp_path, "-l")
    assert proc.returncode == 0, "ansible-doc -t filter -l failed (rc %d):\n%s" % (proc.returncode, proc.stderr[-6000:])
    listed, undocumented = set(), []
    for line in proc.stdout.splitlines():
        fields = line.split()
        if not fields:
            continue
        short = fields[0].rsplit(".", 1)[-1]
        if fields[0] in (short, "ansible.legacy." + short) and short in FILTERS:
            listed.add(short)
            if "UNDOCUMENTED" in fields[1:2]:
                undocumented.append(short)
    assert not undocumented, "ansible-doc -t filter -l lists these filters as UNDOCUMENTED: %s" % ", ".join(
        sorted(undocumented))
    assert listed == set(NAMES), "ansible-doc -t filter -l does not list %s" % ", ".join(sorted(set(NAMES) - listed))
