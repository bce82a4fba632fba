"""Every role variable that becomes a path, a unit name, a repository line, an argv, a
package name, a timeout or a key fingerprint has a rule, and the rule rejects bad values.

The test walks every role's meta/argument_specs.yml, classifies each option by its name
(and type), and looks for its rule: ``choices`` in the spec (checked with ansible-core's
own ArgumentSpecValidator), or an entry in a ``*_input_rules`` list of the role's
tasks/validate.yml (checked with plugin_utils/gpudirect_input_rules.py, the code the
filter ``gpudirect_input_errors`` runs). Each rule must reject the bad values of its
class (issue #15: /etc/passwd and '..' for files, a newline in a unit or repository
line, a timeout of 0 or -1, an argv given as a plain string) and accept the default.
It also checks that validate.yml runs before any task that changes the node.
"""

import glob
import os
import re

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible.module_utils import gpudirect_input_rules as rules

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ROLES = sorted(os.path.basename(os.path.dirname(os.path.dirname(p)))
               for p in glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml")))

# class -> (name pattern, rule kinds that satisfy it)
CLASSES = {
    "path": (r"(_file|_path|_dir|\.file)$", {"path", "paths", "source", "filename"}),
    "filename": (r"_name$", {"filename"}),
    "unit": (r"unit", {"unit", "units"}),
    "repository": (r"(_url|baseurl|_distro|repositories|repositories\.(id|path)|_src|doca_version)$",
                   {"url", "source", "repo_component", "repo_components"}),
    "argv": (r"(_argv|_args)$", {"argv", "texts"}),
    "package": (r"(_packages|_chain|package_patterns)$", {"packages", "texts"}),
    "timeout": (r"timeout$", {"timeout"}),
    "fingerprint": (r"fingerprints$", {"fingerprints"}),
    # a kernel release (uname -r) names /lib/modules/<release>, /boot/vmlinuz-<release> and a DKMS tree;
    # the kernel update's target is the kernel packages' version (issue #44 outcome 5)
    "kernel": (r"(_kernels|_kernel_release|kernel_update_target)$", {"kernel_release", "kernel_releases",
                                                                      "package_version"}),
}

# Bad values each class must reject (kind-specific values come from the rule's own options).
BAD = {
    "path": ["/etc/passwd", "../x", "relative/file", "/a/../../etc/passwd", "/x\n[Service]", "/x\x00"],
    "paths": [["/etc/passwd"], ["../x"], "/not/a/list"],
    "filename": ["../x.conf", "a/b.conf", "x.conf\n", ""],
    "unit": ["x.service\n[Service]\nExecStart=/bin/sh", "x", "a b.service", "x.notatype", "a" * 300 + ".service",
             "@.service"],
    "units": ["x.service", ["x.service\n[Service]"], ["bad unit.service"], ["noext"], ["a" * 300 + ".service"]],
    "url": ["https://mirror/\ndeb http://evil ./", "ftp://mirror/", "mirror/doca", "https://a b/",
            "http://mirror/doca"],
    "source": ["https://mirror/x.tgz\n", "ftp://mirror/x.tgz", "relative.tgz", "/a/../x.tgz", "http://m/x.tgz"],
    "repo_component": ["ubuntu24.04\ndeb [trusted=yes] http://evil ./", "../x", "a/b", "a b"],
    "repo_components": ["baseos", ["a\nb"], ["../x"]],
    "argv": ["echo hello", ["echo", "a\nb"], [""], {"cmd": "x"}],
    "packages": ["linux-image-amd64", ["-o=APT::foo"], ["a b"], ["pkg\n"]],
    "texts": ["kernel-\n", ["a\nb"], ["a\x00"]],
    "text": ["a\nb", "a\rb", "a\x00b", ["not", "a", "string"]],
    "timeout": [0, -1, "0", "-1", "10m", 1.5, True, None],
    "fingerprints": [[], ["3BF863CC"], ["A4B469963BF863CC"], "EB693B3035CD5710E231E123A4B469963BF863CC", ["Z" * 40]],
    "kernel_release": ["..", ".", "../../etc", "6.1.0-50-amd64/../x", " 6.1.0", "6.1.0-50-amd64\n", "$(reboot)",
                       ["6.1.0-50-amd64"]],
    "kernel_releases": ["6.1.0-50-amd64", [".."], ["../../etc"], ["6.1.0-50-amd64/../x"], [" 6.1.0"], ["6.1.0;id"],
                        ["6.1.0-50-amd64\n"], [6.1]],
    "package_version": ["../../etc", "6.1.0-50-amd64/../x", " 6.1.0", "6.1.192-2 ", "6.1.192-2 extra",
                        "linux-image-amd64=6.1.192-2", "amd64", ["6.1.192-2"], {"linux-image-amd64": "../x"},
                        {"../x": "6.1.192-2"}, 6.1],
}


def _load(path):
    with open(path) as handle:
        return yaml.safe_load(handle)


def _options(role):
    """{name: option spec} over every entry point, suboptions as 'parent.child'."""
    specs = _load(os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml"))["argument_specs"]
    found = {}
    for entry in specs.values():
        for name, option in (entry.get("options") or {}).items():
            found.setdefault(name, option)
            for sub, sub_option in (option.get("options") or {}).items():
                found.setdefault("%s.%s" % (name, sub), sub_option)
    return found


def _defaults(role):
    path = os.path.join(ROOT, "roles", role, "defaults", "main.yml")
    return _load(path) or {} if os.path.exists(path) else {}


def _validate_tasks(role):
    path = os.path.join(ROOT, "roles", role, "tasks", "validate.yml")
    return _load(path) or [] if os.path.exists(path) else []


def _rules(role):
    """{knob: rule dict} from every '*_input_rules' list in tasks/validate.yml."""
    found = {}
    for task in _validate_tasks(role):
        for key, value in (task.get("vars") or {}).items():
            if key.endswith("_input_rules"):
                for rule in value:
                    assert rule["knob"] not in found, "%s: two rules for %s" % (role, rule["knob"])
                    found[rule["knob"]] = rule
    return found


def _classes(name, option):
    if option.get("options"):
        return []                       # a list of dicts: its suboptions are walked instead
    found = [cls for cls, (pattern, _) in CLASSES.items() if re.search(pattern, name)]
    if option.get("type") == "path" and "path" not in found:
        found.append("path")
    return found


def _static(rule, role):
    """The rule with its templated options replaced by the role's defaults ('{{ knob }}' -> default)."""
    defaults = _defaults(role)
    static = {}
    for key, value in rule.items():
        match = re.match(r"^\{\{\s*([a-z0-9_]+)\s*\}\}$", value) if isinstance(value, str) else None
        if key != "value" and match:
            static[key] = defaults[match.group(1)]
        else:
            static[key] = value
    return static


def _cases():
    cases = []
    for role in ROLES:
        for name, option in sorted(_options(role).items()):
            for cls in _classes(name, option):
                cases.append(pytest.param(role, name, cls, id="%s:%s:%s" % (role, name, cls)))
    return cases


CASES = _cases()


def test_the_walk_finds_the_knobs_of_issue_15():
    ids = {(role, name) for role, name, _ in (c.values for c in CASES)}
    for expected in [("gpudirect_host_prereqs", "gpudirect_host_prereqs_limits_file"), ("gpudirect_pcie_acs", "gpudirect_pcie_acs_unit_before"),
                     ("gpudirect_peermem", "gpudirect_peermem_unit_before"), ("gpudirect_mlnx_ofed", "gpudirect_mlnx_ofed_repo_distro"),
                     ("gpudirect_reboot", "gpudirect_reboot_timeout"), ("gpudirect_mlnx_ofed", "gpudirect_mlnx_ofed_installer_extra_args"),
                     ("gpudirect_nvidia_driver", "gpudirect_nvidia_driver_repo_key_fingerprints"),
                     ("gpudirect_mlnx_ofed", "gpudirect_mlnx_ofed_repo_key_fingerprints"),
                     ("gpudirect_os_release_pin", "gpudirect_os_release_pin_vault_repositories.file"),
                     ("gpudirect_dkms", "gpudirect_dkms_kernels"),
                     ("gpudirect_kernel_update", "gpudirect_kernel_update_target")]:
        assert expected in ids, expected
    assert len(CASES) >= 35


@pytest.mark.parametrize("role,name,cls", CASES)
def test_each_such_knob_has_a_rule_that_rejects_bad_values(role, name, cls):
    option = _options(role)[name]
    if "choices" in option:
        # ansible-core's own validator enforces choices in argument validation
        top = name.split(".")[0]
        spec = {top: dict(option)} if "." not in name else None
        if spec is not None:
            spec[top].pop("description", None)
            result = ArgumentSpecValidator(spec).validate({top: "bad\nvalue"})
            assert result.error_messages, "%s: choices did not reject a bad value" % name
        return
    found = _rules(role)
    assert name in found, "%s: %s (a %s) has no rule in roles/%s/tasks/validate.yml" % (role, name, cls, role)
    rule = _static(found[name], role)
    kinds = CLASSES[cls][1]
    assert rule["rule"] in kinds, "%s: %s is a %s but its rule is %s (expected one of %s)" % (
        role, name, cls, rule["rule"], sorted(kinds))
    top = name.split(".")[0]
    assert re.search(r"\b%s\b" % re.escape(top), str(found[name]["value"])), \
        "%s: the rule for %s checks %r, not the knob" % (role, name, found[name]["value"])
    if rule["rule"] in ("path", "paths") and not rule.get("under"):
        # only a path on the controller, chosen by the operator, may lie anywhere
        assert rule.get("controller") is True, "%s: %s is a path on the node with no 'under' directories" % (role, name)
    for bad in BAD[rule["rule"]]:
        if bad == "/etc/passwd" and rule.get("controller"):
            continue
        messages = rules.check(dict(rule, value=bad))
        if rule["rule"] in ("url", "source") and rule.get("allow_http") and str(bad).startswith("http://"):
            continue
        if rule.get("optional") and bad == "":
            continue
        assert messages, "%s: %s accepted the bad value %r" % (role, name, bad)
        assert name in messages[0], "%s: the message does not name the knob: %s" % (name, messages[0])


@pytest.mark.parametrize("role", ROLES)
def test_rules_accept_the_defaults(role):
    defaults = _defaults(role)
    for knob, rule in _rules(role).items():
        top = knob.split(".")[0]
        if top not in defaults or (isinstance(defaults[top], str) and "{{" in defaults[top]):
            continue
        value = defaults[top]
        if "." in knob:
            value = [item[knob.split(".")[1]] for item in value]
        static = _static(rule, role)
        if rule["rule"] == "fingerprints" and value == []:
            # gpudirect_mlnx_ofed: no published fingerprint to default to; the empty default must fail, with the hint
            messages = rules.check(dict(static, value=value))
            assert messages and "gpg --show-keys" in messages[0]
            continue
        assert rules.check(dict(static, value=value)) == [], (role, knob, value)


def test_every_rule_kind_is_known_and_checks_its_knob():
    for role in ROLES:
        for knob, rule in _rules(role).items():
            assert rule["rule"] in rules.RULE_KINDS, (role, knob)


CHANGING = {"ansible.builtin.copy", "ansible.builtin.template", "ansible.builtin.file", "ansible.builtin.apt",
            "ansible.builtin.dnf", "ansible.builtin.command", "ansible.builtin.shell", "ansible.builtin.lineinfile",
            "ansible.builtin.get_url", "ansible.builtin.systemd_service", "ansible.builtin.script",
            "ansible.builtin.yum_repository", "ansible.builtin.unarchive", "gpudirect_repo_key"}


@pytest.mark.parametrize("role", [r for r in ROLES if os.path.exists(os.path.join(ROOT, "roles", r, "tasks",
                                                                                     "validate.yml"))])
def test_validate_runs_first(role):
    """Each entry point includes validate.yml before any task of its own that can change the node; an entry
    point without such a task (read-only checks) need not include it."""
    tasks_dir = os.path.join(ROOT, "roles", role, "tasks")
    specs = _load(os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml"))["argument_specs"]
    for entry in specs:
        tasks = _load(os.path.join(tasks_dir, entry + ".yml"))
        for task in tasks:
            if task.get("ansible.builtin.include_tasks") == "validate.yml":
                break
            # the plan (tasks/plan.yml) validates first, then decides read-only
            if task.get("ansible.builtin.include_tasks") == "plan.yml":
                plan = _load(os.path.join(tasks_dir, "plan.yml"))
                assert plan[0].get("ansible.builtin.include_tasks") == "validate.yml"
                break
            changing = CHANGING.intersection(task)
            assert not changing, "%s/%s.yml: %s runs before validate.yml" % (role, entry, task.get("name"))


# --- the examples of issue #15, one by one, with the messages a user reads ----------------------------------------

def test_file_knob_refuses_etc_passwd_and_dotdot():
    rule = {"knob": "gpudirect_host_prereqs_limits_file", "rule": "path", "under": ["/etc/security/limits.d"], "suffix": ".conf"}
    message = rules.check(dict(rule, value="/etc/passwd"))[0]
    assert "gpudirect_host_prereqs_limits_file='/etc/passwd'" in message and "/etc/security/limits.d/" in message
    assert "normalised" in rules.check(dict(rule, value="/etc/security/limits.d/../../passwd.conf"))[0]
    assert rules.check(dict(rule, value="/etc/security/limits.d/90-gpudirect-memlock.conf")) == []


def test_unit_before_refuses_a_second_service_section():
    value = ["nvidia-persistenced.service\n[Service]\nExecStartPost=/bin/sh -c id"]
    message = rules.check({"knob": "gpudirect_pcie_acs_unit_before", "rule": "units", "value": value})[0]
    assert message.startswith("gpudirect_pcie_acs_unit_before[0]=") and "control character" in message
    assert rules.check({"knob": "u", "rule": "units", "value": ["getty@tty1.service", "sys-devices-x.device",
                                                                "multi-user.target", "a:b\\x2d.mount"]}) == []


def test_unit_name_follows_systemd_rules():
    assert rules.check_unit("u", "a" * 247 + ".service") == []          # 255 characters
    assert rules.check_unit("u", "a" * 248 + ".service")                # 256
    assert rules.check_unit("u", "foo@bar@baz.service")
    assert rules.check_unit("u", ".service")


def test_repo_distro_refuses_a_second_apt_line():
    message = rules.check({"knob": "gpudirect_mlnx_ofed_repo_distro", "rule": "repo_component", "optional": True,
                           "value": "ubuntu24.04 ./\ndeb [trusted=yes] http://evil.example/ ./"})[0]
    assert message.startswith("gpudirect_mlnx_ofed_repo_distro=") and "\\n" in message


def test_reboot_timeout_must_be_positive():
    rule = {"knob": "gpudirect_reboot_timeout", "rule": "timeout", "min": 60, "max": 86400}
    for bad in (0, -1):
        message = rules.check(dict(rule, value=bad))[0]
        assert message == "gpudirect_reboot_timeout=%d must be 60 to 86400 seconds" % bad
    assert rules.check(dict(rule, value=1800)) == []
    assert rules.check(dict(rule, value="1800")) == []          # -e gpudirect_reboot_timeout=1800 is a string
    assert rules.check(dict(rule, value="0")) == ["gpudirect_reboot_timeout=0 must be 60 to 86400 seconds"]


def test_argv_must_be_a_list_not_a_string():
    message = rules.check({"knob": "gpudirect_drain_command", "rule": "argv", "value": "scontrol update state=drain"})
    assert message == ["gpudirect_drain_command='scontrol update state=drain' must be a YAML list of strings "
                       "(argv: the command and its arguments, one item each), got a str"]
    # ansible-core's argument validation alone turns the string into a one-item list (split on commas),
    # which is why the argv rule lives in validate.yml
    result = ArgumentSpecValidator({"a": {"type": "list", "elements": "str"}}).validate({"a": "scontrol update"})
    assert not result.error_messages and result.validated_parameters["a"] == ["scontrol update"]


def test_http_needs_the_knob():
    rule = {"knob": "gpudirect_nvidia_driver_repo_base_url", "rule": "url", "http_knob": "gpudirect_nvidia_driver_allow_insecure_http"}
    message = rules.check(dict(rule, value="http://mirror.example/cuda", allow_http=False))[0]
    assert "gpudirect_nvidia_driver_allow_insecure_http: true" in message
    assert rules.check(dict(rule, value="http://mirror.example/cuda", allow_http=True)) == []
    assert rules.check(dict(rule, value="file:///srv/mirror/cuda")) == []
    assert rules.check(dict(rule, value="file://host/srv"))                     # not file:///


def test_fingerprints_must_be_full():
    assert rules.check_fingerprints("k", ["EB69 3B30 35CD 5710 E231  E123 A4B4 6996 3BF8 63CC"]) == []
    assert "short or long key ids are not enough" in rules.check_fingerprints("k", ["A4B469963BF863CC"])[0]


def test_a_malformed_rule_is_an_error_not_a_pass():
    with pytest.raises(ValueError):
        rules.check({"knob": "x", "value": 1, "rule": "nosuchrule"})
    with pytest.raises(ValueError):
        rules.check({"knob": "x", "rule": "text"})


def test_the_filter_runs_the_same_rules():
    import gpudirect_input_rules as plugin
    from ansible.errors import AnsibleFilterError
    assert plugin.gpudirect_input_errors([{"knob": "t", "rule": "timeout", "value": 5}]) == []
    assert plugin.gpudirect_input_errors([{"knob": "t", "rule": "timeout", "value": -1}]) == [
        "t=-1 must be 1 or more seconds"]
    with pytest.raises(AnsibleFilterError):
        plugin.gpudirect_input_errors([{"knob": "t", "rule": "bogus", "value": 1}])
