"""Slurm's view of a node and the gpudirect_slurm_node module (built-in Slurm support of gpudirect_drain).

module_utils/gpudirect_slurm.py reads ``scontrol show node`` and decides (drained, draining, out of
service, whose drain); library/gpudirect_slurm_node.py drains, waits, resumes and relabels one node.
The parser runs on real outputs only: tests/fixtures/slurm_public/ (public pastes, sources in its
README) and tests/fixtures/slurm/ (the project's Slurm 22.05.8 test cluster). The module's tests answer
its ``scontrol`` calls from those outputs; where a state or reason is needed that no capture has (a drain
whose reason is this toolkit's), it is the real one-line output of r1n03 with its State= and Reason=
replaced, as ``variant`` says.
"""

import os
import re

import pytest

import gpudirect_slurm_node as slurm_module
from ansible.module_utils import gpudirect_slurm as slurm
from ansible.module_utils.basic import AnsibleModule
from conftest import PROJECT_FIXTURES

PUBLIC = os.path.join(PROJECT_FIXTURES, "slurm_public")
LOCAL = os.path.join(PROJECT_FIXTURES, "slurm")
SCONTROL = "/usr/bin/scontrol"
PREFIX = "gpudirect run "
OURS = "gpudirect run 20261127T101500Z-12345: drain"


def read(directory, name):
    with open(os.path.join(directory, name)) as handle:
        return handle.read()


def outputs(directory):
    if not os.path.isdir(directory):
        return []
    return sorted(f for f in os.listdir(directory)
                  if f.startswith(("scontrol-o-show-node-", "scontrol-show-node-")) and f.endswith(".txt"))


# --- the public outputs ----------------------------------------------------------------------------------------

# file -> name, state, base, flags, reason, user, time, drained, draining, jobs, out of service, owner
PUBLIC_EXPECTED = {
    "scontrol-o-show-node-16.05-allocated-r1n03.txt":
        ("r1n03", "ALLOCATED", "ALLOCATED", [], None, None, None, False, False, True, False, None),
    "scontrol-o-show-node-16.05-down-star-drain-not-responding-datamover2.txt":
        ("datamover2", "DOWN*+DRAIN", "DOWN", ["NOT_RESPONDING", "DRAIN"], "Not responding", "root",
         "2017-06-29T08:00:07", True, False, False, True, "other"),
    "scontrol-o-show-node-16.05-down-star-nhc-lm2.txt":
        ("lm2", "DOWN*", "DOWN", ["NOT_RESPONDING"], "NHC:", "root", "2017-08-07T11:01:52",
         False, False, False, True, "other"),
    "scontrol-show-node-20.02-idle-med0740.txt":
        ("med0740", "IDLE", "IDLE", [], None, None, None, False, False, False, False, None),
    "scontrol-show-node-20.02-mixed-drain-med0304.txt":
        ("med0304", "MIXED+DRAIN", "MIXED", ["DRAIN"], "deep power-off required for PSU", "root",
         "2020-07-17T13:21:02", False, True, True, True, "other"),
    "scontrol-show-node-22.05.8-idle-powered-down-s301-c7-dynamic-7.txt":
        ("s301-c7-dynamic-7", "IDLE+DYNAMIC_NORM+POWERED_DOWN", "IDLE", ["DYNAMIC_NORM", "POWERED_DOWN"], None,
         None, None, False, False, False, True, "other"),
    "scontrol-show-node-22.05.8-idle-not-responding-powering-up-d1.txt":
        ("d1", "IDLE+CLOUD+DYNAMIC_NORM+NOT_RESPONDING+POWERING_UP", "IDLE",
         ["CLOUD", "DYNAMIC_NORM", "NOT_RESPONDING", "POWERING_UP"], None, None, None,
         False, False, False, True, "other"),
    "scontrol-show-node-24.11-down-cloud-powered-down-gpu-st-ml-1.txt":
        ("gpu-st-ml-1", "DOWN+CLOUD+POWERED_DOWN", "DOWN", ["CLOUD", "POWERED_DOWN"],
         "Static node maintenance: unhealthy node is being replaced", "root", "2026-03-13T04:18:07",
         False, False, False, True, "other"),
    "scontrol-show-node-24.11.7-idle-cloud-instance-gpu-st-ml-1.txt":
        ("gpu-st-ml-1", "IDLE+CLOUD", "IDLE", ["CLOUD"], "Node start up", "root", "2026-03-11T11:05:51",
         False, False, False, False, None),
    "scontrol-show-node-25.11.3-idle-drain-gpu010-unindented.txt":
        ("gpu010", "IDLE+DRAIN", "IDLE", ["DRAIN"], "health_ps___blocked", "root", "2026-04-29T03:06:18",
         True, False, False, True, "other"),
}


def test_every_public_output_is_checked_and_has_its_source_in_the_readme():
    assert sorted(PUBLIC_EXPECTED) == outputs(PUBLIC)
    readme = read(PUBLIC, "README.md")
    for name in outputs(PUBLIC):
        row = [line for line in readme.splitlines() if line.startswith("| `%s`" % name)]
        assert row and ("github.com/" in row[0] or "https://" in row[0]), "%s: no source in README.md" % name


@pytest.mark.parametrize("name", sorted(PUBLIC_EXPECTED))
def test_public_output(name):
    (node, state, base, flags, reason, user, when, drained, draining, jobs, out, owner) = PUBLIC_EXPECTED[name]
    text = read(PUBLIC, name)
    if "-o-show-" in name:
        assert len(text.strip().splitlines()) == 1, "a one-line output"
    else:
        assert len(text.strip().splitlines()) > 10, "a multi-line output"
    fields = slurm.parse_node(text)
    assert fields["NodeName"] == node and fields["State"] == state
    status = slurm.node_status(fields)
    got = (status["name"], status["state"], status["base"], status["flags"], status["reason"],
           status["reason_user"], status["reason_time"], status["drained"], status["draining"], status["jobs"],
           status["out_of_service"], status["owner"])
    assert got == PUBLIC_EXPECTED[name]
    assert status["drain"] == ("DRAIN" in flags)


def test_values_with_blanks_and_the_fields_after_the_reason():
    fields = slurm.parse_node(read(PUBLIC, "scontrol-show-node-24.11.7-idle-cloud-instance-gpu-st-ml-1.txt"))
    assert fields["OS"] == "Linux 6.8.0-1045-aws #47~22.04.1-Ubuntu SMP Thu Jan 29 21:28:23 UTC 2026"
    # the reason ends with its line; the instance fields of the next line are fields of their own
    assert fields["Reason"] == "Node start up [root@2026-03-11T11:05:51]"
    assert fields["InstanceId"] == "i-0cba89ff05359cd2f" and fields["InstanceType"] == "g7e.8xlarge"
    assert fields["AllocTRES"] == "" and fields["CfgTRES"] == "cpu=32,mem=249036M,billing=32"
    assert fields["LastBusyTime"] == "2026-03-11T11:05:51" and fields["ResumeAfterTime"] == "None"
    assert fields["Gres"] == "gpu:rtxproserver6000:1"
    one = slurm.parse_node(read(PUBLIC, "scontrol-o-show-node-16.05-down-star-drain-not-responding-datamover2.txt"))
    # one line: the reason runs to the end of the line, blanks and brackets included
    assert one["Reason"] == "Not responding [root@2017-06-29T08:00:07]"
    assert one["ExtSensorsTemp"] == "n/s" and one["NodeHostName"] == "datamover2" and one["AllocTRES"] == ""
    nhc = slurm.parse_node(read(PUBLIC, "scontrol-o-show-node-16.05-down-star-nhc-lm2.txt"))
    assert nhc["Reason"] == "NHC:  [root@2017-08-07T11:01:52]"
    med = slurm.parse_node(read(PUBLIC, "scontrol-show-node-20.02-mixed-drain-med0304.txt"))
    assert med["OS"] == "Linux 3.10.0-1127.13.1.el7.x86_64 #1 SMP Tue Jun 23 15:46:38 UTC 2020"
    assert med["Partitions"] == "gpu" and med["AllocTRES"] == "cpu=2,mem=1G"


def variant(state, reason=None, name="r1n03"):
    """The real one-line output of r1n03 (Slurm 16.05) with State= replaced and, given a reason, Reason=
    added where scontrol prints it (last), stamped as Slurm stamps it."""
    text = read(PUBLIC, "scontrol-o-show-node-16.05-allocated-r1n03.txt").rstrip("\n").rstrip(" ")
    text = text.replace("State=ALLOCATED ", "State=%s " % state).replace("r1n03", name)
    if reason is not None:
        text += " Reason=%s [root@2026-11-27T10:15:02]" % reason
    return text + "\n"


def test_one_line_reason_stops_at_the_fields_slurm_prints_after_it():
    # src/api/node_info.c prints Comment= and Extra= after Reason=, on the same line with -o
    text = variant("IDLE+DRAIN", "Bad DIMM").rstrip("\n") + " Comment=rack 4, slot 2 Extra={ \"load\": 0.99 }\n"
    fields = slurm.parse_node(text)
    assert fields["Reason"] == "Bad DIMM [root@2026-11-27T10:15:02]"
    assert fields["Comment"] == "rack 4, slot 2" and fields["Extra"] == '{ "load": 0.99 }'
    status = slurm.node_status(fields)
    assert (status["reason"], status["reason_user"], status["reason_time"]) == ("Bad DIMM", "root", "2026-11-27T10:15:02")


def test_a_multi_line_reason_keeps_its_lines():
    text = read(PUBLIC, "scontrol-show-node-20.02-mixed-drain-med0304.txt") + "          second line of it\n"
    fields = slurm.parse_node(text)
    assert fields["Reason"] == "deep power-off required for PSU [root@2020-07-17T13:21:02]\nsecond line of it"
    status = slurm.node_status(fields)
    assert status["reason"] == "deep power-off required for PSU\nsecond line of it"
    assert slurm.describe(status) == ('MIXED+DRAIN, reason "deep power-off required for PSU / second line of it" '
                                      '(root, 2020-07-17T13:21:02)')


def test_crlf_line_ends_are_read():
    text = read(PUBLIC, "scontrol-show-node-20.02-mixed-drain-med0304.txt").replace("\n", "\r\n")
    assert slurm.parse_node(text)["Reason"] == "deep power-off required for PSU [root@2020-07-17T13:21:02]"


# --- malformed answers ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text,message", [
    ("", "no NodeName="),
    (None, "no NodeName="),
    ("  \n\n", "no NodeName="),
    ("Node gpu99 not found\n", "does not know the node: 'Node gpu99 not found'"),
    ("slurm_load_node error: Unable to contact slurm controller (connect failure)\n",
     "no NodeName= in the scontrol output: 'slurm_load_node error: Unable to contact"),
    # a one-line output cut before State=
    ("NodeName=r1n03 Arch=x86_64 CoresPerSocket=1 CPUAlloc=32 CPUErr=0 CPUTot=32 CPULoad=32.01",
     "no State= for node r1n03"),
    ("NodeName=r1n03 State= ThreadsPerCore=1\n", "no State= for node r1n03"),
    ("NodeName= State=IDLE\n", "no node name after NodeName="),
])
def test_malformed_answers_are_refused_quoting_them(text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        slurm.parse_node(text)


def test_the_quote_is_at_most_200_characters():
    text = "x" * 500
    with pytest.raises(ValueError) as caught:
        slurm.parse_node(text)
    assert "x" * 200 in str(caught.value) and "x" * 201 not in str(caught.value)


def test_two_nodes_are_refused():
    text = read(PUBLIC, "scontrol-o-show-node-16.05-allocated-r1n03.txt") + read(
        PUBLIC, "scontrol-o-show-node-16.05-down-star-nhc-lm2.txt")
    with pytest.raises(ValueError, match="holds 2 nodes, not one"):
        slurm.parse_node(text)


# --- states: the strings of Slurm's node_state_string_complete (22.05/23.x) and its older suffix form --------------

def status_of(state, reason=None, prefix=PREFIX):
    fields = {"NodeName": "gpu01", "State": state}
    if reason is not None:
        fields["Reason"] = reason
    return slurm.node_status(fields, prefix)


@pytest.mark.parametrize("state,base,flags,drained,draining,jobs", [
    ("IDLE+DRAIN", "IDLE", ["DRAIN"], True, False, False),
    ("MIXED+DRAIN", "MIXED", ["DRAIN"], False, True, True),
    ("ALLOCATED+DRAIN", "ALLOCATED", ["DRAIN"], False, True, True),
    # the last job's epilog still runs: Slurm says DRAINING, not DRAINED
    ("IDLE+COMPLETING+DRAIN", "IDLE", ["COMPLETING", "DRAIN"], False, True, True),
    ("DOWN*+DRAIN", "DOWN", ["NOT_RESPONDING", "DRAIN"], True, False, False),
    ("DOWN+DRAIN+NOT_RESPONDING", "DOWN", ["DRAIN", "NOT_RESPONDING"], True, False, False),
    ("IDLE+DRAIN+REBOOT_REQUESTED", "IDLE", ["DRAIN", "REBOOT_REQUESTED"], True, False, False),
    ("MIXED+DRAIN+REBOOT_REQUESTED", "MIXED", ["DRAIN", "REBOOT_REQUESTED"], False, True, True),
    ("IDLE+POWERED_DOWN", "IDLE", ["POWERED_DOWN"], False, False, False),
    ("MIXED", "MIXED", [], False, False, True),
    ("MIXED@", "MIXED", ["REBOOT_REQUESTED"], False, False, True),
    ("IDLE~", "IDLE", ["POWERED_DOWN"], False, False, False),
    ("idle+drain", "IDLE", ["DRAIN"], True, False, False),
])
def test_state_strings(state, base, flags, drained, draining, jobs):
    status = status_of(state)
    assert (status["base"], status["flags"], status["drained"], status["draining"], status["jobs"]) == (
        base, flags, drained, draining, jobs)
    assert status["drain"] == ("DRAIN" in flags)


@pytest.mark.parametrize("state,out", [
    ("IDLE", False), ("ALLOCATED", False), ("MIXED", False), ("IDLE+CLOUD", False), ("IDLE+COMPLETING", False),
    ("MIXED+PLANNED", False), ("IDLE+RESERVED", False), ("ALLOCATED+CLOUD+POWERING_UP", False), ("UNKNOWN", False),
    ("IDLE+DRAIN", True), ("MIXED+DRAIN", True), ("DOWN", True), ("DOWN*", True), ("IDLE+FAIL", True),
    ("ALLOCATED+FAIL", True), ("IDLE+MAINTENANCE", True), ("IDLE*", True), ("IDLE+NOT_RESPONDING", True),
    ("IDLE+POWERED_DOWN", True), ("IDLE+POWERING_DOWN", True), ("IDLE+POWER", True), ("FUTURE", True),
    ("ERROR", True), ("MIXED+REBOOT_REQUESTED", True), ("DOWN+REBOOT_ISSUED", True), ("IDLE+INVALID_REG", True),
])
def test_out_of_service(state, out):
    status = status_of(state)
    assert status["out_of_service"] is out
    assert (status["owner"] is None) is (not out)


@pytest.mark.parametrize("state,reason,prefix,owner", [
    ("IDLE+DRAIN", OURS + " [root@2026-11-27T10:15:02]", PREFIX, "toolkit"),
    ("MIXED+DRAIN", "gpudirect run 20261127T101500Z-12345: reboot [slurm@2026-11-27T10:15:02]", PREFIX, "toolkit"),
    # the toolkit's reason survives the reboot it caused: Slurm replaces only an empty one or "Not responding"
    ("DOWN+DRAIN", OURS, PREFIX, "toolkit"),
    ("IDLE+DRAIN", "Bad DIMM [root@2024-05-01T10:00:00]", PREFIX, "other"),
    ("DOWN+NOT_RESPONDING", "Not responding [slurm@2024-05-01T10:00:00]", PREFIX, "other"),
    ("IDLE+DRAIN", "Kill task failed [root@2024-08-08T19:12:57]", PREFIX, "other"),
    ("IDLE+DRAIN", "admin: gpudirect run 1 [root@2024-08-08T19:12:57]", PREFIX, "other"),
    ("IDLE+DRAIN", None, PREFIX, "other"),
    ("IDLE+DRAIN", "site maintenance 42 [root@2024-08-08T19:12:57]", "site maintenance ", "toolkit"),
    ("IDLE+DRAIN", OURS, "site maintenance ", "other"),
    # in service: nobody's drain, whatever the reason says
    ("IDLE", OURS, PREFIX, None),
    ("IDLE+CLOUD", "Node start up [root@2026-03-11T11:05:51]", PREFIX, None),
])
def test_owner(state, reason, prefix, owner):
    assert status_of(state, reason, prefix)["owner"] == owner


@pytest.mark.parametrize("reason,split", [
    ("Bad DIMM [root@2024-05-01T10:00:00]", ("Bad DIMM", "root", "2024-05-01T10:00:00")),
    ("NHC:  [root@2017-08-07T11:01:52]", ("NHC:", "root", "2017-08-07T11:01:52")),
    ("[user_problem] alloc_gpus_busy [root@2026-01-01T00:00:00]",
     ("[user_problem] alloc_gpus_busy", "root", "2026-01-01T00:00:00")),
    ("no stamp here", ("no stamp here", None, None)),
    ("", (None, None, None)),
    (None, (None, None, None)),
])
def test_split_reason(reason, split):
    assert slurm.split_reason(reason) == split


def test_describe():
    assert slurm.describe(status_of("IDLE+DRAIN", "Bad DIMM [root@2024-05-01T10:00:00]")) == (
        'IDLE+DRAIN, reason "Bad DIMM" (root, 2024-05-01T10:00:00)')
    assert slurm.describe(status_of("MIXED")) == "MIXED, no reason"
    assert slurm.describe(status_of("DOWN", "power cut")) == 'DOWN, reason "power cut"'


# --- the captures of the project's Slurm 22.05.8 cluster (tests/fixtures/slurm/) -----------------------------------

# what a file name says about the node, checked where the name says it (every rule whose word is in it)
NAME_RULES = [
    ("-admin-drained", lambda s: s["drained"] and s["owner"] == "other"),
    ("-drained", lambda s: s["drain"] and s["drained"] and not s["jobs"]),
    ("-draining", lambda s: s["drain"] and s["draining"] and s["jobs"]),
    ("-idle", lambda s: s["base"] == "IDLE" and not s["drain"]),
    ("-mixed", lambda s: s["base"] == "MIXED" and s["jobs"]),
    ("-allocated", lambda s: s["base"] == "ALLOCATED" and s["jobs"]),
    ("-down", lambda s: s["base"] == "DOWN" and s["out_of_service"]),
    ("-not-responding", lambda s: "NOT_RESPONDING" in s["flags"] and s["out_of_service"]),
    ("-resumed", lambda s: not s["drain"]),
]


@pytest.mark.parametrize("name", outputs(LOCAL))
def test_local_capture(name):
    text = read(LOCAL, name)
    fields = slurm.parse_node(text)
    status = slurm.node_status(fields)
    assert fields["NodeName"] and fields["State"] == status["state"]
    assert re.match(r"^[A-Z]+[*~#%!@^$-]?(\+[A-Z_]+)*$", status["state"]), status["state"]
    assert status["drained"] == (status["drain"] and not status["jobs"])
    assert status["draining"] == (status["drain"] and status["jobs"])
    assert (status["owner"] is None) == (not status["out_of_service"])
    if "-o-show-" in name:
        assert len(text.strip().splitlines()) == 1, "a one-line output"
    if "Version" in fields:
        assert fields["Version"].startswith("22.05"), fields["Version"]
    if "OS" in fields:
        assert fields["OS"].startswith("Linux ") and not re.search(r"\s\w+=", fields["OS"]), fields["OS"]
    if fields.get("Reason"):
        assert status["reason"] and status["reason_user"] and status["reason_time"]
    for marker, rule in NAME_RULES:
        if marker in name:
            assert rule(status), "%s: %s" % (marker, slurm.describe(status))


def test_local_captures_listed_in_their_readme():
    names = outputs(LOCAL)
    if not names or not os.path.exists(os.path.join(LOCAL, "README.md")):
        pytest.skip("tests/fixtures/slurm/ holds no capture or no README.md yet")
    readme = read(LOCAL, "README.md")
    assert [name for name in names if name not in readme] == []


def readme_states():
    """file -> (node, State, Reason or None) from the table of tests/fixtures/slurm/README.md, whose rows end
    ``| node `State=X` |`` or ``| node `State=X Reason=text [user@time]` |``."""
    if not os.path.exists(os.path.join(LOCAL, "README.md")):
        return {}
    rows = re.findall(r"^\| `([^`]+)` \|[^|]*\|\s*(\S+) `State=(\S+)(?: Reason=([^`]*))?` \|\s*$",
                      read(LOCAL, "README.md"), re.M)
    return {name: (node, state, reason or None) for name, node, state, reason in rows}


@pytest.mark.parametrize("name", outputs(LOCAL))
def test_local_capture_is_the_node_state_and_reason_its_readme_names(name):
    expected = readme_states()
    assert name in expected, "%s: no row with its node and State= in tests/fixtures/slurm/README.md" % name
    fields = slurm.parse_node(read(LOCAL, name))
    assert (fields["NodeName"], fields["State"], fields.get("Reason")) == expected[name]


def _pairs():
    names = outputs(LOCAL)
    return [(n, n.replace("scontrol-o-show-node-", "scontrol-show-node-")) for n in names
            if n.startswith("scontrol-o-show-node-") and n.replace("-o-show-", "-show-") in names]


@pytest.mark.parametrize("one,multi", _pairs())
def test_both_forms_of_one_capture_agree(one, multi):
    a, b = slurm.parse_node(read(LOCAL, one)), slurm.parse_node(read(LOCAL, multi))
    for key in ("NodeName", "Arch", "CPUTot", "RealMemory", "Partitions", "Version", "OS", "Gres"):
        assert a.get(key) == b.get(key), key


# --- the module ------------------------------------------------------------------------------------------------

class Scontrol:
    """``run_command`` of the module: reads answered in order (the last answer repeats), updates recorded."""

    def __init__(self, reads, update_rc=0, update_err=""):
        self.reads = list(reads)
        self.calls = []
        self.environ = []
        self.update_rc, self.update_err = update_rc, update_err

    def run_command(self, module, argv, environ_update=None, **_kw):
        self.calls.append(list(argv))
        self.environ.append(environ_update)
        if argv[1:4] == ["-o", "show", "node"]:
            answer = self.reads.pop(0) if len(self.reads) > 1 else self.reads[0]
            return answer if isinstance(answer, tuple) else (0, answer, "")
        if argv[1] == "update":
            return self.update_rc, "", self.update_err
        raise AssertionError("unexpected command %s" % argv)

    @property
    def updates(self):
        return [call[1:] for call in self.calls if call[1] == "update"]

    @property
    def read_count(self):
        return sum(1 for call in self.calls if call[1:4] == ["-o", "show", "node"])


class Clock:
    def __init__(self):
        self.now = 1000.0
        self.sleeps = []

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def scontrol(monkeypatch):
    """``scontrol(reads...)``: the fake scontrol for this test; the clock is a fake one too."""
    clock = Clock()
    monkeypatch.setattr(slurm_module, "time", clock)
    monkeypatch.setattr(AnsibleModule, "get_bin_path",
                        lambda self, arg, required=False, opt_dirs=None: SCONTROL if arg == "scontrol" else None)

    def make(*reads, **kw):
        fake = Scontrol(reads, **kw)
        fake.clock = clock
        monkeypatch.setattr(AnsibleModule, "run_command",
                            lambda self, argv, **k: fake.run_command(self, argv, **k))
        return fake
    return make


ADMIN_DRAINED = read(PUBLIC, "scontrol-show-node-20.02-mixed-drain-med0304.txt")
NOT_RESPONDING = read(PUBLIC, "scontrol-o-show-node-16.05-down-star-drain-not-responding-datamover2.txt")
IN_SERVICE = read(PUBLIC, "scontrol-o-show-node-16.05-allocated-r1n03.txt")


def args(**over):
    base = {"node": "r1n03"}
    base.update(over)
    return base


def test_query_reads_only_also_in_check_mode(run_module, scontrol):
    for check in (False, True):
        fake = scontrol(IN_SERVICE)
        result = run_module(slurm_module, args(), check_mode=check)
        assert not result.get("failed") and result["changed"] is False
        assert fake.calls == [[SCONTROL, "-o", "show", "node", "r1n03"]]
        assert fake.environ == [{"LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C"}]
        assert result["before"] == result["node"] and result["node"]["state"] == "ALLOCATED"
        assert result["owner"] is None and result["kept"] is False and result["command"] is None


def test_drain_of_a_node_in_service(run_module, scontrol):
    fake = scontrol(IN_SERVICE, variant("ALLOCATED+DRAIN", OURS))
    result = run_module(slurm_module, args(action="drain", reason=OURS))
    assert result["changed"] is True and not result.get("failed")
    assert fake.updates == [["update", "NodeName=r1n03", "State=DRAIN", "Reason=" + OURS]]
    assert result["command"] == [SCONTROL, "update", "NodeName=r1n03", "State=DRAIN", "Reason=" + OURS]
    assert result["before"]["state"] == "ALLOCATED" and result["node"]["state"] == "ALLOCATED+DRAIN"
    assert result["owner"] == "toolkit" and result["node"]["draining"] is True and result["kept"] is False
    assert all(env == {"LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C"} for env in fake.environ)


@pytest.mark.parametrize("text,node", [(ADMIN_DRAINED, "med0304"), (NOT_RESPONDING, "datamover2")])
def test_drain_keeps_a_node_another_owner_took_out_of_service(run_module, scontrol, text, node):
    fake = scontrol(text)
    result = run_module(slurm_module, args(node=node, action="drain", reason=OURS))
    assert fake.updates == []
    assert result["changed"] is False and result["kept"] is True and result["owner"] == "other"
    assert "state and reason are kept" in result["msg"] and result["before"]["reason"] in result["msg"]


def test_drain_with_the_same_reason_changes_nothing_another_toolkit_reason_is_replaced(run_module, scontrol):
    fake = scontrol(variant("IDLE+DRAIN", OURS))
    result = run_module(slurm_module, args(action="drain", reason=OURS))
    assert fake.updates == [] and result["changed"] is False and result["kept"] is False
    later = "gpudirect run 20261127T101500Z-12345: drivers"
    fake = scontrol(variant("IDLE+DRAIN", OURS), variant("IDLE+DRAIN", later))
    result = run_module(slurm_module, args(action="drain", reason=later))
    assert fake.updates == [["update", "NodeName=r1n03", "State=DRAIN", "Reason=" + later]]
    assert result["changed"] is True and result["node"]["reason"] == later


def test_drain_in_check_mode_issues_no_update(run_module, scontrol):
    fake = scontrol(IN_SERVICE)
    result = run_module(slurm_module, args(action="drain", reason=OURS), check_mode=True)
    assert fake.updates == [] and fake.read_count == 1
    assert result["changed"] is True and result["command"][1:4] == ["update", "NodeName=r1n03", "State=DRAIN"]
    assert result["node"] == result["before"] and "would be drained" in result["msg"]


def test_a_drain_slurm_does_not_show_fails(run_module, scontrol):
    scontrol(IN_SERVICE, IN_SERVICE)
    result = run_module(slurm_module, args(action="drain", reason=OURS))
    assert result["failed"] and "not drained" in result["msg"]


def test_wait_polls_until_the_jobs_have_ended(run_module, scontrol):
    fake = scontrol(variant("MIXED+DRAIN", OURS), variant("MIXED+DRAIN", OURS), variant("IDLE+DRAIN", OURS))
    result = run_module(slurm_module, args(action="wait", interval=30, timeout=3600))
    assert not result.get("failed") and result["changed"] is False
    assert result["timed_out"] is False and result["waited"] == 60 and fake.clock.sleeps == [30, 30]
    assert fake.read_count == 3 and fake.updates == []
    assert result["before"]["draining"] is True and result["node"]["drained"] is True


def test_wait_on_a_drained_node_returns_at_once(run_module, scontrol):
    fake = scontrol(variant("DOWN+DRAIN", OURS))
    result = run_module(slurm_module, args(action="wait"))
    assert result["timed_out"] is False and result["waited"] == 0 and fake.clock.sleeps == []


def test_wait_that_times_out_does_not_fail(run_module, scontrol):
    fake = scontrol(variant("MIXED+DRAIN", OURS))
    result = run_module(slurm_module, args(action="wait", interval=30, timeout=75))
    assert not result.get("failed") and result["timed_out"] is True and result["waited"] == 75
    assert fake.clock.sleeps == [30, 30, 15] and fake.read_count == 4
    assert result["node"]["state"] == "MIXED+DRAIN" and "still runs jobs after 75 s" in result["msg"]


def test_wait_fails_when_the_drain_vanishes(run_module, scontrol):
    scontrol(variant("MIXED+DRAIN", OURS), variant("MIXED+DRAIN", OURS), variant("MIXED", None))
    result = run_module(slurm_module, args(action="wait", interval=30))
    assert result["failed"] and "r1n03 is no longer drained" in result["msg"] and "MIXED" in result["msg"]
    assert "after 60 s" in result["msg"] and result["node"]["state"] == "MIXED"


def test_wait_fails_on_a_node_that_is_not_drained(run_module, scontrol):
    fake = scontrol(IN_SERVICE)
    result = run_module(slurm_module, args(action="wait"))
    assert result["failed"] and "r1n03 is not drained in Slurm (ALLOCATED" in result["msg"]
    assert fake.clock.sleeps == []


def test_wait_in_check_mode_reads_once(run_module, scontrol):
    fake = scontrol(variant("MIXED+DRAIN", OURS), variant("IDLE+DRAIN", OURS))
    result = run_module(slurm_module, args(action="wait"), check_mode=True)
    assert result["timed_out"] is False and fake.read_count == 1 and fake.clock.sleeps == []
    # the drain before it did not run in check mode: a node in service is no failure there
    fake = scontrol(IN_SERVICE)
    result = run_module(slurm_module, args(action="wait"), check_mode=True)
    assert not result.get("failed") and result["timed_out"] is False and "not drained yet" in result["msg"]
    assert fake.read_count == 1 and fake.clock.sleeps == []


def test_wait_warns_when_another_owner_takes_the_node_meanwhile(run_module, scontrol, monkeypatch):
    warned = []
    monkeypatch.setattr(AnsibleModule, "warn", lambda self, text: warned.append(text))
    scontrol(variant("MIXED+DRAIN", OURS), variant("IDLE+DRAIN", "Bad DIMM"))
    result = run_module(slurm_module, args(action="wait"))
    assert result["owner"] == "other" and result["timed_out"] is False
    assert len(warned) == 1 and "no longer this toolkit's drain" in warned[0] and "Bad DIMM" in warned[0]


def test_resume_of_the_toolkits_drain(run_module, scontrol):
    fake = scontrol(variant("IDLE+DRAIN", OURS), variant("IDLE", None))
    result = run_module(slurm_module, args(action="resume"))
    assert fake.updates == [["update", "NodeName=r1n03", "State=RESUME"]]
    assert result["changed"] is True and result["node"]["out_of_service"] is False and result["owner"] is None


@pytest.mark.parametrize("text,node", [(ADMIN_DRAINED, "med0304"), (NOT_RESPONDING, "datamover2")])
def test_resume_keeps_another_owners_drain(run_module, scontrol, text, node):
    fake = scontrol(text)
    result = run_module(slurm_module, args(node=node, action="resume"))
    assert fake.updates == [] and result["changed"] is False and result["kept"] is True


def test_resume_of_a_node_in_service_changes_nothing(run_module, scontrol):
    fake = scontrol(IN_SERVICE)
    result = run_module(slurm_module, args(action="resume"))
    assert fake.updates == [] and result["changed"] is False and result["kept"] is False


def test_resume_of_a_toolkit_drain_whose_slurmd_does_not_answer_fails(run_module, scontrol):
    fake = scontrol(variant("DOWN+DRAIN+NOT_RESPONDING", OURS))
    result = run_module(slurm_module, args(action="resume"))
    assert result["failed"] and fake.updates == [] and "start slurmd" in result["msg"]


def test_resume_in_check_mode_issues_no_update(run_module, scontrol):
    fake = scontrol(variant("IDLE+DRAIN", OURS))
    result = run_module(slurm_module, args(action="resume"), check_mode=True)
    assert fake.updates == [] and result["changed"] is True and "would be resumed" in result["msg"]


def test_reason_of_the_toolkits_drain_only(run_module, scontrol):
    later = "gpudirect run 20261127T101500Z-12345: reboot"
    fake = scontrol(variant("IDLE+DRAIN", OURS), variant("IDLE+DRAIN", later))
    result = run_module(slurm_module, args(action="reason", reason=later))
    assert fake.updates == [["update", "NodeName=r1n03", "Reason=" + later]] and result["changed"] is True
    fake = scontrol(ADMIN_DRAINED)
    result = run_module(slurm_module, args(node="med0304", action="reason", reason=later))
    assert fake.updates == [] and result["changed"] is False and result["kept"] is True
    fake = scontrol(variant("IDLE+DRAIN", later))
    result = run_module(slurm_module, args(action="reason", reason=later))
    assert fake.updates == [] and result["changed"] is False
    fake = scontrol(IN_SERVICE)
    result = run_module(slurm_module, args(action="reason", reason=later))
    assert fake.updates == [] and result["changed"] is False and result["kept"] is False


@pytest.mark.parametrize("answer,hint", [
    ((1, "", "slurm_load_node error: Unable to contact slurm controller (connect failure)\n"), "munged"),
    ((1, "Node r1n03 not found\n", ""), "gpudirect_drain_slurm_node"),
    ((1, "", "slurm_load_node error: Invalid authentication credential\n"), "munge.key"),
])
def test_scontrol_failing_fails_with_its_output_and_a_hint(run_module, scontrol, answer, hint):
    scontrol(answer)
    result = run_module(slurm_module, args(action="drain", reason=OURS))
    assert result["failed"] and result["rc"] == 1
    assert result["stdout"] == answer[1] and result["stderr"] == answer[2]
    assert (answer[1] or answer[2]).strip() in result["msg"] and hint in result["msg"]
    assert "-o show node r1n03" in result["msg"]


def test_an_update_refused_fails_with_the_hint_for_it(run_module, scontrol):
    fake = scontrol(IN_SERVICE, update_rc=1, update_err="slurm_update error: Access/permission denied\n")
    result = run_module(slurm_module, args(action="drain", reason=OURS))
    assert result["failed"] and result["rc"] == 1 and len(fake.updates) == 1
    assert "Access/permission denied" in result["msg"] and "operator" in result["msg"]
    assert result["before"]["state"] == "ALLOCATED"


def test_an_answer_for_another_node_fails(run_module, scontrol):
    scontrol(IN_SERVICE)
    result = run_module(slurm_module, args(node="r1n04"))
    assert result["failed"] and "answered for node r1n03 when asked for r1n04" in result["msg"]


def test_a_missing_scontrol_names_the_host_and_the_delegate_knob(run_module, scontrol, monkeypatch):
    scontrol(IN_SERVICE)
    monkeypatch.setattr(AnsibleModule, "get_bin_path", lambda self, arg, required=False, opt_dirs=None: None)
    result = run_module(slurm_module, args())
    assert result["failed"] and "the Slurm client" in result["msg"] and os.uname()[1] in result["msg"]
    assert "gpudirect_drain_delegate_to" in result["msg"]


@pytest.mark.parametrize("over,message", [
    ({"action": "drain"}, "action=drain needs a reason"),
    ({"action": "reason", "reason": "  "}, "action=reason needs a reason"),
    ({"action": "drain", "reason": "Bad DIMM"}, "must be one line starting with owner_prefix"),
    ({"node": "gpu[01-02]"}, "must be one Slurm node name"),
    ({"node": "gpu01 gpu02"}, "must be one Slurm node name"),
    ({"owner_prefix": ""}, "owner_prefix must not be empty"),
    ({"action": "wait", "interval": 0}, "interval 1 or more"),
])
def test_parameters_are_checked_before_scontrol_runs(run_module, scontrol, over, message):
    fake = scontrol(IN_SERVICE)
    result = run_module(slurm_module, args(**over))
    assert result["failed"] and message in result["msg"] and fake.calls == []


# --- the module on the real sequence of the 22.05.8 cluster (tests/fixtures/slurm/, README there) ----------------

def local(name):
    return read(LOCAL, "scontrol-o-show-node-%s.txt" % name)


needs_local = pytest.mark.skipif(not os.path.exists(os.path.join(LOCAL, "scontrol-o-show-node-drained.txt")),
                                 reason="tests/fixtures/slurm/ not captured")
CAPTURED = "gpudirect run X: drain"   # the reason the capture drained with


@needs_local
def test_real_drain_wait_resume_of_gpudirect_slurm1(run_module, scontrol):
    """gpudirect-slurm1 as the cluster showed it: MIXED with a job, MIXED+DRAIN after the drain, IDLE+DRAIN once
    the job ended, IDLE after the resume."""
    fake = scontrol(local("mixed"), local("draining"))
    result = run_module(slurm_module, {"node": "gpudirect-slurm1", "action": "drain", "reason": CAPTURED})
    assert result["changed"] is True and result["node"]["draining"] is True and result["owner"] == "toolkit"
    assert fake.updates == [["update", "NodeName=gpudirect-slurm1", "State=DRAIN", "Reason=" + CAPTURED]]
    fake = scontrol(local("draining"), local("draining"), local("drained"))
    result = run_module(slurm_module, {"node": "gpudirect-slurm1", "action": "wait", "interval": 10})
    assert result["timed_out"] is False and result["waited"] == 20 and fake.clock.sleeps == [10, 10]
    assert result["node"]["state"] == "IDLE+DRAIN" and result["node"]["reason"] == CAPTURED
    fake = scontrol(local("drained"), local("resumed"))
    result = run_module(slurm_module, {"node": "gpudirect-slurm1", "action": "resume"})
    assert fake.updates == [["update", "NodeName=gpudirect-slurm1", "State=RESUME"]]
    assert result["changed"] is True and result["node"]["state"] == "IDLE" and result["owner"] is None


@needs_local
def test_real_resume_reads_not_responding_until_slurm_pings_slurmd(run_module, scontrol):
    fake = scontrol(local("drained"), local("just-resumed"))
    result = run_module(slurm_module, {"node": "gpudirect-slurm1", "action": "resume"})
    assert fake.updates == [["update", "NodeName=gpudirect-slurm1", "State=RESUME"]] and not result.get("failed")
    assert result["changed"] is True and result["node"]["state"] == "IDLE+NOT_RESPONDING"
    assert "until slurmd answers" in result["msg"] and "warnings" not in result


@needs_local
def test_real_admin_drain_and_down_node_are_kept(run_module, scontrol):
    for name, node in (("admin-drained", "gpudirect-slurm2"), ("down", "gpudirect-slurm3")):
        for action in ("drain", "resume"):
            fake = scontrol(local(name))
            result = run_module(slurm_module, {"node": node, "action": action, "reason": CAPTURED})
            assert fake.updates == [] and result["kept"] is True and result["changed"] is False, (name, action)
            assert result["owner"] == "other"


@needs_local
def test_real_resume_by_someone_else_while_waiting_fails(run_module, scontrol):
    scontrol(local("draining"), local("resumed"))
    result = run_module(slurm_module, {"node": "gpudirect-slurm1", "action": "wait"})
    assert result["failed"] and "gpudirect-slurm1 is no longer drained in Slurm (IDLE, no reason)" in result["msg"]
