"""The fabric ring of gpudirect_verify (plugin_utils/gpudirect_ring.py) and how the role's
filters judge and report its edges (filter_plugins/gpudirect_verify.py:
gpudirect_verify_ring_plan, gpudirect_verify_fabric, the Markdown page, the fleet table).

Passing results are the module's own capture on the soft-RoCE VM
(tests/fixtures/loopback/vm_rxe_host_pass.json) with the fields pair mode adds (RETURN of
library/gpudirect_loopback.py: pair_role, peer, local_address, ...). Failing results carry
the module's diagnosis built by module_utils/gpudirect_loopback_helper.diagnose with the
details the helper prints (roles/gpudirect_verify/files/loopback_pair.c: "no pair server
answered at ..." for peer_unreachable, "no pair client connected to TCP port ..." for
pair_timeout).
"""

import copy
import json
import os

import pytest

import gpudirect_verify as verify
from ansible.module_utils import gpudirect_loopback_helper as lh
from ansible.module_utils import gpudirect_ring as ring
from conftest import PROJECT_FIXTURES

with open(os.path.join(PROJECT_FIXTURES, "loopback", "vm_rxe_host_pass.json")) as _handle:
    PASS = json.load(_handle)

ADDRESSES = {"pair-a": "10.99.0.1", "pair-b": "10.99.0.2", "pair-c": "10.99.0.3"}


def registered(result):
    """What register holds for the module task with failed_when: false (ansible-core 2.19)."""
    out = copy.deepcopy(result)
    if out.get("failed"):
        out["failed_when_suppressed_exception"] = "(traceback unavailable)"
    out["failed"] = False
    out["failed_when_result"] = False
    return out


def pair_pass(role, local, peer):
    return registered(dict(copy.deepcopy(PASS), pair_role=role, peer=peer, local_address=local, pair_port=18516,
                           peer_mode="host", peer_error=None))


def pair_fail(role, code, detail, local, peer):
    diagnosis = lh.diagnose(code, detail)
    return registered({"failed": True, "msg": "%s What to do: %s" % (diagnosis["message"], diagnosis["fix"]),
                       "diagnosis": diagnosis, "pair_role": role, "peer": peer, "local_address": local,
                       "bytes_compared": None, "mismatches": None, "bandwidth_gbps": None, "mode": "host",
                       "rdma_device": "rxe0", "port": 1})


def async_done(result):
    """What async_status returns for a finished job: the module's keys plus the job's."""
    return dict(result, finished=1, started=1, ansible_job_id="j1")


def host_record(host="pair-b"):
    return verify.gpudirect_verify_record(registered(PASS), host, None, False, "2026-11-24T20:00:00Z", 0, "nearest")


# ---------------------------------------------------------------------------
# ring order and neighbours
# ---------------------------------------------------------------------------

def edges_of(names):
    return [(e["from"], e["to"]) for e in ring.plan_ring(dict((n, "10.0.0.%d" % i) for i, n in enumerate(names, 1)))]


def test_one_node_has_no_edge():
    assert edges_of(["gpu01"]) == []
    assert ring.neighbours(ring.plan_ring({"gpu01": "10.0.0.1"}), "gpu01") == {"next": None, "prev": None}


def test_two_nodes_are_the_pair_both_ways():
    assert edges_of(["b", "a"]) == [("a", "b"), ("b", "a")]


def test_three_nodes_each_written_once_and_writing_once():
    edges = edges_of(["pair-c", "pair-a", "pair-b"])
    assert edges == [("pair-a", "pair-b"), ("pair-b", "pair-c"), ("pair-c", "pair-a")]
    assert sorted(f for f, _ in edges) == sorted(t for _, t in edges) == ["pair-a", "pair-b", "pair-c"]


def test_five_nodes_natural_order_is_stable():
    names = ["gpu10", "gpu2", "gpu1", "gpu03", "gpu9"]
    edges = edges_of(names)
    assert edges == [("gpu1", "gpu2"), ("gpu2", "gpu03"), ("gpu03", "gpu9"), ("gpu9", "gpu10"), ("gpu10", "gpu1")]
    assert edges_of(list(reversed(names))) == edges     # the inventory's order does not matter
    ends = ring.neighbours(ring.plan_ring(dict((n, "10.0.0.%d" % i) for i, n in enumerate(names, 1))), "gpu1")
    assert (ends["next"]["to"], ends["prev"]["from"]) == ("gpu2", "gpu10")


def test_edges_carry_both_addresses():
    edges = ring.plan_ring(ADDRESSES)
    assert edges[1] == {"from": "pair-b", "from_address": "10.99.0.2", "to": "pair-c", "to_address": "10.99.0.3"}
    assert ring.edge_label(edges[1]) == "pair-b (10.99.0.2) -> pair-c (10.99.0.3)"


@pytest.mark.parametrize("members, fragments", [
    ({"gpu01": "10.0.0.1", "gpu02": "", "gpu03": None},
     ["gpu02, gpu03 have none", "set gpudirect_verify_pair_address for each"]),
    ({"gpu01": "10.0.0.1", "gpu02": " "}, ["gpu02 has none", "gpudirect_verify_pair_address for it"]),
])
def test_missing_address_names_the_nodes_and_the_knob(members, fragments):
    with pytest.raises(ring.RingError) as exc:
        ring.plan_ring(members)
    for fragment in fragments:
        assert fragment in str(exc.value)
    plan = verify.gpudirect_verify_ring_plan(members)
    assert plan["edges"] == [] and all(f in plan["error"] for f in fragments)


def test_shared_address_is_refused():
    plan = verify.gpudirect_verify_ring_plan({"pair-a": "127.0.0.1", "pair-b": "127.0.0.1", "pair-c": "10.0.0.3"})
    assert plan["edges"] == []
    assert "127.0.0.1 (pair-a, pair-b)" in plan["error"] and "gpudirect_verify_pair_address" in plan["error"]


def test_plan_filter_passes_a_good_ring():
    plan = verify.gpudirect_verify_ring_plan(ADDRESSES)
    assert plan["error"] is None and len(plan["edges"]) == 3


# ---------------------------------------------------------------------------
# messages naming both ends
# ---------------------------------------------------------------------------

def test_edge_diagnosis_names_both_ends_and_keeps_the_code():
    edge = ring.plan_ring(ADDRESSES)[1]
    diag = ring.edge_diagnosis(edge, "client", lh.diagnose(
        "peer_unreachable", "no pair server answered at 10.99.0.3 TCP port 18516 within 20 s (80 attempts, last: "
        "No route to host)"))
    assert diag["code"] == "peer_unreachable"
    assert diag["message"].startswith("ring edge pair-b (10.99.0.2) -> pair-c (10.99.0.3), seen on pair-b (writer): "
                                      "[peer_unreachable] The pair client could not reach")
    assert "pair-b (10.99.0.2) must reach pair-c (10.99.0.3)" in diag["fix"]
    server = ring.edge_diagnosis(edge, "server", lh.diagnose("pair_timeout", "no pair client connected"))
    assert "seen on pair-c (target)" in server["message"] and "pair-b must be running" in server["fix"]
    with pytest.raises(ring.RingError):
        ring.edge_diagnosis(edge, "sideways", {})


# ---------------------------------------------------------------------------
# the record: fabric none, ring passed, ring failed
# ---------------------------------------------------------------------------

def test_fabric_none_says_not_proven_and_which_knob():
    rec = verify.gpudirect_verify_fabric(host_record(), "none", "pair-b")
    assert rec["status"] == "passed"
    assert rec["fabric"]["mode"] == "none" and rec["fabric"]["proven"] is False
    assert "not proven" in rec["fabric"]["message"] and "gpudirect_verify_fabric: ring" in rec["fabric"]["message"]
    assert "gpudirect_verify_fabric: ring" in verify.gpudirect_verify_report_md(rec)
    lines = verify.gpudirect_verify_fleet_table([rec], ["pair-b"])
    assert any("fabric between nodes not proven for pair-b" in line for line in lines)


def test_ring_pass_lists_both_edges_of_the_node():
    edges = ring.plan_ring(ADDRESSES)
    rec = verify.gpudirect_verify_fabric(
        host_record("pair-b"), "ring", "pair-b", edges,
        pair_pass("client", "10.99.0.2", "10.99.0.3"),
        async_done(pair_pass("server", "10.99.0.2", "10.99.0.1")))
    assert rec["status"] == "passed" and rec["fabric"]["proven"] is True
    rows = rec["fabric"]["edges"]
    assert [(r["from"], r["to"], r["side"], r["status"]) for r in rows] == [
        ("pair-b", "pair-c", "client", "passed"), ("pair-a", "pair-b", "server", "passed")]
    assert rows[0]["bytes_compared"] == PASS["bytes_compared"] and rows[0]["bandwidth_gbps"] == PASS["bandwidth_gbps"]
    md = verify.gpudirect_verify_report_md(rec)
    assert "## Fabric between nodes (ring)" in md
    assert "| pair-b (10.99.0.2) -> pair-c (10.99.0.3) | pair-b (writer) | %d |" % PASS["bytes_compared"] in md


def test_ring_failure_fails_the_node_naming_both_ends():
    edges = ring.plan_ring(dict(ADDRESSES, **{"pair-c": "10.99.0.9"}))
    client = pair_fail("client", "peer_unreachable", "no pair server answered at 10.99.0.9 TCP port 18516 within "
                       "20 s (21 attempts, last: No route to host)", "10.99.0.2", "10.99.0.9")
    rec = verify.gpudirect_verify_fabric(host_record("pair-b"), "ring", "pair-b", edges, client,
                                         async_done(pair_pass("server", "10.99.0.2", "10.99.0.1")))
    assert rec["status"] == "failed" and rec["result"] == "FAILED"
    assert rec["diagnosis"]["code"] == "peer_unreachable"
    assert "pair-b (10.99.0.2) -> pair-c (10.99.0.9)" in rec["diagnosis"]["message"]
    assert rec["fabric"]["proven"] is False
    assert [r["status"] for r in rec["fabric"]["edges"]] == ["failed", "passed"]
    # the target of that edge fails too, its message naming the same two ends
    server = pair_fail("server", "pair_timeout", "no pair client connected to TCP port 18516 within 20 s",
                       "10.99.0.3", None)
    rec_c = verify.gpudirect_verify_fabric(host_record("pair-c"), "ring", "pair-c", edges,
                                           pair_pass("client", "10.99.0.3", "10.99.0.1"), async_done(server))
    assert rec_c["status"] == "failed" and rec_c["diagnosis"]["code"] == "pair_timeout"
    assert "pair-b (10.99.0.2) -> pair-c (10.99.0.9), seen on pair-c (target)" in rec_c["diagnosis"]["message"]


@pytest.mark.parametrize("code, detail", [
    ("data_mismatch", "1 of 65536 bytes differ (first at offset 32769)."),
    ("peer_failed", "the server (10.99.0.3) failed at its stage compare: [data_mismatch] 1 of 65536 bytes differ"),
])
def test_every_pair_failure_code_names_both_ends(code, detail):
    edges = ring.plan_ring(ADDRESSES)
    rec = verify.gpudirect_verify_fabric(host_record("pair-b"), "ring", "pair-b", edges,
                                         pair_fail("client", code, detail, "10.99.0.2", "10.99.0.3"),
                                         async_done(pair_pass("server", "10.99.0.2", "10.99.0.1")))
    assert rec["status"] == "failed" and rec["diagnosis"]["code"] == code
    assert "pair-b (10.99.0.2) -> pair-c (10.99.0.3)" in rec["diagnosis"]["message"]


def test_unfinished_server_is_a_failure_not_a_pass():
    edges = ring.plan_ring(ADDRESSES)
    unfinished = {"finished": 0, "started": 1, "ansible_job_id": "j1", "attempts": 300}
    rec = verify.gpudirect_verify_fabric(host_record("pair-b"), "ring", "pair-b", edges,
                                         pair_pass("client", "10.99.0.2", "10.99.0.3"), unfinished)
    assert rec["status"] == "failed" and rec["diagnosis"]["code"] == "ring_server_unfinished"
    assert "pair-a (10.99.0.1) -> pair-b (10.99.0.2)" in rec["diagnosis"]["message"]


def test_a_node_whose_loopback_failed_keeps_that_diagnosis_and_notes_the_edge():
    failed = verify.gpudirect_verify_record(pair_fail("client", "port_down", "rxe0 port 1 is DOWN", None, None),
                                            "pair-b", None, False, "t", 0, "nearest")
    edges = ring.plan_ring(ADDRESSES)
    rec = verify.gpudirect_verify_fabric(failed, "ring", "pair-b", edges,
                                         pair_fail("client", "peer_unreachable", "x", "10.99.0.2", "10.99.0.3"),
                                         async_done(pair_pass("server", "10.99.0.2", "10.99.0.1")))
    assert rec["diagnosis"]["code"] == "port_down"
    assert any("pair-b (10.99.0.2) -> pair-c (10.99.0.3)" in note for note in rec["notes"])


def test_alone_in_the_ring_is_not_proven():
    rec = verify.gpudirect_verify_fabric(host_record("pair-a"), "ring", "pair-a", [])
    assert rec["status"] == "not_proven" and rec["diagnosis"]["code"] == "ring_no_neighbour"
    assert "pair-a" in rec["diagnosis"]["message"] and "gpudirect_verify_fabric: none" in rec["diagnosis"]["fix"]


def test_check_mode_edges_would_run():
    edges = ring.plan_ring(ADDRESSES)
    would = registered({"changed": False, "would_run": [["gpudirect_loopback_helper", "--pair-listen"]],
                        "pair_role": "server"})
    base = verify.gpudirect_verify_record(registered({"changed": False, "would_run": [["x"]]}), "pair-b", None, True,
                                          "t", 0, "nearest")
    rec = verify.gpudirect_verify_fabric(base, "ring", "pair-b", edges, dict(would, pair_role="client"), would,
                                         True)
    assert rec["status"] == "would_run" and [r["status"] for r in rec["fabric"]["edges"]] == ["would_run"] * 2
    alone = verify.gpudirect_verify_fabric(base, "ring", "pair-b", [], None, None, True)
    assert alone["status"] == "would_fail"


def test_skipped_host_stays_skipped():
    skipped = verify.gpudirect_verify_record(None, "pair-c", {"code": "disabled", "message": "off"}, False, "t")
    rec = verify.gpudirect_verify_fabric(skipped, "ring", "pair-c", ring.plan_ring(ADDRESSES))
    assert rec["status"] == "skipped" and rec["fabric"]["edges"] == []


def test_bad_fabric_value_is_refused():
    with pytest.raises(verify.AnsibleFilterError):
        verify.gpudirect_verify_fabric(host_record(), "mesh", "pair-b")


# ---------------------------------------------------------------------------
# the fleet table: one row per edge, both ends' views together
# ---------------------------------------------------------------------------

def test_fleet_table_lists_each_edge_once_with_both_views():
    addresses = dict(ADDRESSES, **{"pair-c": "10.99.0.9"})
    edges = ring.plan_ring(addresses)
    ok = pair_pass
    results = {
        "pair-a": (ok("client", "10.99.0.1", "10.99.0.2"), ok("server", "10.99.0.1", "10.99.0.3")),
        "pair-b": (pair_fail("client", "peer_unreachable", "no pair server answered", "10.99.0.2", "10.99.0.9"),
                   ok("server", "10.99.0.2", "10.99.0.1")),
        "pair-c": (ok("client", "10.99.0.3", "10.99.0.1"),
                   pair_fail("server", "pair_timeout", "no pair client connected", "10.99.0.3", None)),
    }
    records = [verify.gpudirect_verify_fabric(host_record(h), "ring", h, edges, c, async_done(s))
               for h, (c, s) in sorted(results.items())]
    lines = verify.gpudirect_verify_fleet_table(records, sorted(results))
    start = lines.index("  fabric ring: 3 edges")
    table = lines[start + 3:start + 6]
    assert lines[start + 1].split() == ["ring", "edge", "(writer", "->", "target)", "bytes", "Gbit/s", "verdict",
                                        "diagnosis"]
    assert [row.split()[:7] for row in table] == [
        ["pair-a", "(10.99.0.1)", "->", "pair-b", "(10.99.0.2)", str(PASS["bytes_compared"]),
         "%.2f" % PASS["bandwidth_gbps"]],
        ["pair-b", "(10.99.0.2)", "->", "pair-c", "(10.99.0.9)", "-", "-"],
        ["pair-c", "(10.99.0.9)", "->", "pair-a", "(10.99.0.1)", str(PASS["bytes_compared"]),
         "%.2f" % PASS["bandwidth_gbps"]]]
    assert table[0].split()[-2:] == ["passed", "-"] and table[2].split()[-2:] == ["passed", "-"]
    assert table[1].split()[-3:] == ["FAILED", "pair_timeout,", "peer_unreachable"]
    assert "1 passed, 2 FAILED" in " ".join(lines)
    problems = [line for line in lines if line.startswith("  pair-b: ") or line.startswith("  pair-c: ")]
    assert all("pair-b (10.99.0.2) -> pair-c (10.99.0.9)" in line for line in problems) and len(problems) == 2


# ---------------------------------------------------------------------------
# the VM harness's segment for the ring scenario (tests/harness/vm/vm.py --pair-role mcast)
# ---------------------------------------------------------------------------

def test_vm_pair_netdev_mcast_joins_one_segment_and_keeps_the_two_vm_link():
    import importlib.util
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    spec = importlib.util.spec_from_file_location("gpudirect_vm_ring", os.path.join(root, "tests", "harness", "vm",
                                                                                    "vm.py"))
    vm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(vm)
    assert vm.pair_netdev("mcast", 40241) == "socket,id=net1,mcast=230.0.0.1:40241,localaddr=127.0.0.1"
    assert vm.pair_netdev("listen", 40241) == "socket,id=net1,listen=127.0.0.1:40241"
    assert vm.pair_netdev("connect", 40241) == "socket,id=net1,connect=127.0.0.1:40241"
    # every VM of the segment gets its own MAC (derived from its name)
    assert len({vm.mac_for(name, "pair") for name in ("pair-a", "pair-b", "pair-c")}) == 3
