"""Unit tests for module_utils/gpudirect_gpu_nic_pairs.py: the GPU<->NIC pairs of the facts,
on the config spaces captured as root on the lent H100 node (tests/fixtures/pci/README.md)
and on malformed input."""

import os

from ansible.module_utils import gpudirect_gpu_nic_pairs as pairs
from ansible.module_utils import gpudirect_pci as pci

from conftest import PROJECT_FIXTURES
from sysfs_tree import bridge_config, config_capture_tree

FIRECRACKER = os.path.join(PROJECT_FIXTURES, "pci", "firecracker_h100_vm_config.txt")
GPU = "0000:00:06.0"      # 10de:2330 H100 80GB HBM3, bound to nvidia
VIRTIO_NET = "0000:00:03.0"  # 1af4:1041 virtio network device (class 0x020000)


def _functions(tree):
    return dict((fn.address, fn) for fn in pci.list_pci_functions(tree.root))


def test_no_function_of_the_h100_vm_has_acs(tmp_path):
    tree, captured = config_capture_tree(tmp_path, FIRECRACKER)
    functions = _functions(tree)
    for address in captured:
        # host bridge (header 0 at 0x100), GPU (hidden capabilities, no ACS), virtio (conventional PCI)
        assert pairs.bridge_acs(tree.root, functions[address], address) is None, address


def test_a_truncated_or_unprivileged_config_is_unknown_never_absent(tmp_path):
    tree, captured = config_capture_tree(tmp_path, FIRECRACKER)
    config = tree.abs("sys/bus/pci/devices/%s/config" % GPU)
    with open(config, "wb") as handle:
        handle.write(captured[GPU]["config"][:256])  # a PCI Express function with 256 bytes
    entry = pairs.bridge_acs(tree.root, _functions(tree)[GPU], GPU)
    assert entry["status"] == "unknown" and entry["readable"] is False
    assert entry["reason"].startswith(pci.EXT_NOT_READABLE)
    assert (entry["vendor_id"], entry["device_id"]) == ("0x10de", "0x2330")
    assert entry["acs_ctl"] is None and entry["p2p_redirect"] is None  # not known, not False
    with open(config, "wb") as handle:
        handle.write(captured[GPU]["config"][:64])  # what a non-root read returns
    entry = pairs.bridge_acs(tree.root, None, GPU)  # a function the survey could not read: ids unknown
    assert entry["status"] == "unknown" and "become" in entry["reason"]
    assert (entry["vendor_id"], entry["device_id"]) == (None, None)


def test_a_bridge_with_acs_reports_its_registers(tmp_path):
    tree, _captured = config_capture_tree(tmp_path, FIRECRACKER)
    with open(tree.abs("sys/bus/pci/devices/%s/config" % GPU), "wb") as handle:
        handle.write(bridge_config(0x10B5, 0x8747, 6, acs_ctl=0x005D, acs_offset=0x148).build())
    entry = pairs.bridge_acs(tree.root, None, GPU)
    assert (entry["status"], entry["acs_offset"], entry["acs_ctl_offset"], entry["acs_ctl_hex"]) == \
        ("present", 0x148, 0x14E, "0x005d")
    assert entry["enabled_bits"] == ["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd", "DirectTrans"]
    assert entry["p2p_redirect"] is True


def test_pair_on_the_flat_bus_of_the_h100_vm(tmp_path):
    tree, _captured = config_capture_tree(tmp_path, FIRECRACKER)
    functions = _functions(tree)
    gpus = [{"address": GPU, "index": None, "ordinal": 0}]
    nics = [{"name": "rxe0", "pci_address": VIRTIO_NET}, {"name": "siw_lo", "pci_address": None}]
    warnings = []
    found = pairs.gpu_nic_pairs(tree.root, gpus, nics, functions, functions.get, warnings.append)
    assert warnings == []
    assert len(found) == 1  # a device without a PCI function has no pair
    pair = found[0]
    assert (pair["gpu"], pair["gpu_address"], pair["nic"], pair["nic_address"]) == ("GPU0", GPU, "rxe0", VIRTIO_NET)
    assert pair["distance"] == "PHB" and pair["path"] == [] and pair["acs"] == []
    assert (pair["acs_verdict"], pair["acs_redirect"]) == ("clear", False)


def test_a_pair_that_cannot_be_built_is_a_warning(tmp_path):
    tree, _captured = config_capture_tree(tmp_path, FIRECRACKER)
    functions = _functions(tree)
    functions[VIRTIO_NET].chain = None  # malformed: no PCI path at all
    warnings = []
    found = pairs.gpu_nic_pairs(tree.root, [{"address": GPU, "index": 3, "ordinal": 0}],
                                [{"name": "rxe0", "pci_address": VIRTIO_NET}], functions, functions.get, warnings.append)
    assert found == []
    assert len(warnings) == 1 and warnings[0].startswith("pair %s/rxe0: skipped (TypeError" % GPU)


def test_verdict_never_calls_an_unknown_path_clear():
    known = {"address": "0000:02:08.0", "readable": True, "p2p_redirect": False, "acs_ctl_hex": "0x0000",
             "reason": None}
    redirect = dict(known, address="0000:02:10.0", p2p_redirect=True, acs_ctl_hex="0x005d")
    unknown = {"address": "0000:01:00.0", "readable": False, "p2p_redirect": False, "acs_ctl_hex": None,
               "reason": "extended configuration space not readable"}
    assert pairs.acs_path_verdict([])["acs_verdict"] == "clear"
    assert pairs.acs_path_verdict([known])["acs_verdict"] == "clear"
    assert pairs.acs_path_verdict([known, unknown]) == {
        "acs_verdict": "unknown",
        "acs_verdict_reason": "ACS state unknown on 0000:01:00.0: extended configuration space not readable"}
    both = pairs.acs_path_verdict([unknown, redirect])
    assert both["acs_verdict"] == "redirect"
    assert both["acs_verdict_reason"] == ("ACS redirects peer-to-peer traffic on 0000:02:10.0 (ACSCtl 0x005d); "
                                          "ACS state unknown on 0000:01:00.0: extended configuration space not readable")
