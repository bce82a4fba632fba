#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Plan, and with state applied write, the NV (firmware) configuration of ConnectX cards (see DOCUMENTATION)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpudirect_nic_config
short_description: Read, plan and set the firmware (NV) configuration of NVIDIA/Mellanox ConnectX cards with mlxconfig or mstconfig
description:
  - Finds the ConnectX cards under C(<root>/sys/bus/pci/devices) (vendor C(0x15b3), network class, physical
    functions only, never SR-IOV virtual functions) and queries one function of each card (the lowest function
    of its bus and device; the NV configuration belongs to the card, per-port parameters end in C(_P1)/C(_P2)).
  - Runs C(<tool> -d <pci> -e query) (list form, C locale), which prints Default, Current (what the running
    firmware uses) and Next Boot (what it loads at its next reset); where the tool refuses C(-e) it runs
    C(<tool> -d <pci> query), whose Next Boot column alone cannot show a change that waits for a reset.
  - Compares Next Boot and Current with the wanted values (O(profiles) and O(params), validated by
    C(module_utils/gpudirect_nic_config.py) before anything runs) and returns per card what is in place, what to
    set, what is already set and only waits for a firmware reset, and the parameters the card does not expose
    (reported in C(unsupported), not failed).
  - A new NV value takes effect only at the next firmware reset (C(mlxfwreset)) or reboot, so every card with a
    value to set or a value waiting is a disruption; the calling role hands it to the drain owner and asks the
    reboot owner for the reboot. The module never reboots.
  - With O(reset_record), the node's record of the reboots asked for pending changes (per card what waits and the
    boot id, C(/proc/sys/kernel/random/boot_id), of the boot in which the reboot was asked for), a card whose change
    still waits in a later boot is one that a warm reboot does not reset - on many servers the ConnectX keeps its
    power and its firmware across a warm reboot. For such a card no reboot is asked again (no C(reset_reason)); the
    module reads C(mlxfwreset -d <pci> query) (MFT; C(mstfwreset) of mstflint) and plans reset level 3, C(Driver
    restart and PCI reset), where the card offers it, or says in C(power_cycle) that the card needs a cold power
    cycle. With O(state=reset) it runs C(<tool> -d <pci> --level 3 -y reset) on those cards, reads them again and
    fails unless nothing waits any more; a card without level 3 fails the module naming the card, what waits and
    the cold power cycle it needs. Levels 0 (live patch, loads no NV value) and 4 (a warm reboot) are never used.
    Sources of the levels and the output read are in C(module_utils/gpudirect_nic_config.py).
  - With O(state=applied) runs C(<tool> -y -d <pci> set PARAM=VALUE ...) on the cards that need it, queries them
    again and fails, naming the card, the parameter and the value, unless Next Boot holds every value set.
  - With O(firmware) (pinned images by PSID) it also reads each card's firmware with C(flint -d <pci> query) (MFT) or
    C(mstflint -d <pci> query) and reports per card C(firmware) (PSID, running, pending, pinned version, state). With
    O(firmware_policy=update) and O(state=applied) it burns the pinned image on each card whose flash does not hold
    the pinned version, queries again and fails unless C(FW Version) is the pinned one. The new firmware runs after
    the next firmware reset or reboot.
  - Before any card is burned or set, every image to burn is checked - the sha256 of the file as pinned (the C(.zip)
    NVIDIA ships, or a C(.bin)), the one C(.bin) of a C(.zip) extracted into the module's temporary folder (a zip
    with no or several C(.bin) members is refused, naming them), C(<tool> -i <bin> verify), and C(<tool> -i <bin>
    query), whose version must be the pinned one and whose PSID the card's, unless O(firmware_allow_psid_change)
    (then C(-allow_psid_change) is passed to the burn). C(firmware_burned) reports the sha256 of each C(.bin)
    burned and of the file it came from.
version_added: "1.0.0"
author:
  - GPUDirect RDMA toolkit maintainers (!UNKNOWN)
options:
  profiles:
    description:
      - Named sets of parameters, expanded in this order, O(params) overriding them.
      - C(gpudirect) (bare metal) C(ADVANCED_PCI_SETTINGS=1), C(ATS_ENABLED=0), C(MAX_ACC_OUT_READ=0) (auto),
        C(PCI_WR_ORDERING=1) (force_relax); C(gpudirect_vm) the same with C(ATS_ENABLED=1) (GPUDirect RDMA in a
        virtual machine behind an IOMMU); C(roce) C(ROCE_CC_PRIO_MASK_P1/P2=255), C(CNP_DSCP_P1/P2=4),
        C(CNP_802P_PRIO_P1/P2=6). The sources of each value are in C(module_utils/gpudirect_nic_config.py).
      - C(gpudirect) and C(gpudirect_vm) disagree on C(ATS_ENABLED); name one.
    type: list
    elements: str
    default: []
  params:
    description:
      - Raw parameters, C(NAME) (upper case, as mlxconfig prints it; an array element as C(NAME[3])) to a value
        (a number, true/false, or a value name the card prints such as C(force_relax) or C(ETH)).
    type: dict
    default: {}
  tool:
    description:
      - C(auto) uses C(mlxconfig) (NVIDIA MFT) where it is found, else C(mstconfig) (mstflint, packaged by
        Debian, Ubuntu and EL). C(mlxconfig) or C(mstconfig) uses that one only.
    type: str
    choices: [auto, mlxconfig, mstconfig]
    default: auto
  devices:
    description:
      - Only these cards, by PCI address (C(0000:17:00.0) or C(17:00.0)). Empty, every ConnectX card.
      - An address that is not a ConnectX physical function on the host fails the module before any change.
    type: list
    elements: str
    default: []
  state:
    description:
      - C(planned) reads and plans only (the default; check mode runs it so whatever O(state) says).
      - C(applied) also sets the values that differ on Next Boot and checks them; a reset or reboot is still needed.
      - C(reset) runs the firmware reset (C(mlxfwreset) level 3) on the cards of O(devices) whose reboot already
        happened without loading what waits on them (O(reset_record)), reads them back, and fails naming each card
        that needs a cold power cycle instead. Sets and burns nothing. In check mode it says what it would reset.
    type: str
    choices: [planned, applied, reset]
    default: planned
  firmware:
    description:
      - Pinned firmware images, one per PSID, C({psid, version, image, sha256}) and optionally C(image_psid); C(image)
        an absolute path on the node (O(state=applied) needs a path, the role downloads a URL first) or, for planning,
        an http(s) URL. C(image) may be a C(.zip) holding one C(.bin), as NVIDIA ships firmware.
      - C(sha256) is the sum of the file C(image) names, as downloaded (the C(.zip) when it is one).
      - C(image_psid), the PSID the image carries where it is not C(psid) (an OEM card given NVIDIA's image); cards
        already carrying C(image_psid) are held to the same pin.
      - Empty, no firmware version is read.
    type: list
    elements: dict
    default: []
  firmware_cache:
    description:
      - With O(state=applied), the folder where an http(s) image of O(firmware) was downloaded, as
        C(<psid>-<version>.zip) for a URL ending in C(.zip), else C(<psid>-<version>.bin) (the role downloads it there
        with its sha256); the module burns that file, after checking its sha256 again. Unset, only path images can be
        burned.
    type: path
  firmware_allow_psid_change:
    description:
      - Burn an image whose PSID is not the card's, with C(flint -allow_psid_change), changing the card's PSID (an
        OEM card such as a Dell C(DEL...) given NVIDIA's C(MT_...) image). False, such a burn is refused, naming both
        PSIDs, before any card is burned or set.
    type: bool
    default: false
  firmware_policy:
    description:
      - C(report) reads and reports the cards whose firmware differs from their PSID's pinned version, or whose PSID has
        no pinned image; changes nothing.
      - C(update) also plans (and with O(state=applied) burns) the pinned image on those cards, a disruption that
        needs a firmware reset or reboot.
    type: str
    choices: [report, update]
    default: report
  reset_record:
    description:
      - "The node's record of the reboots asked for pending changes, JSON C({\"cards\": {<pci>: {\"pending\": <what
        waits>, \"boot_id\": <boot id when the reboot was asked for>}}}); the module reads it, and returns in
        C(reset_record) what the caller should keep there once it has asked for the reboot. Unset, or no file, no
        reboot is known to have happened."
    type: path
  fwreset:
    description:
      - Plan and (O(state=reset)) run C(mlxfwreset) level 3 on a card whose reboot did not load its change. False, such
        a card is reported in C(power_cycle) (it needs a cold power cycle).
    type: bool
    default: true
  root:
    description:
      - Directory holding the C(sys/) tree. Leave at C(/) on a live host; point it at a fabricated tree for tests.
    type: path
    default: /
extends_documentation_fragment:
  - gpudirect_attributes
attributes:
  check_mode:
    support: full
    description: Runs as O(state=planned) (queries only) and reports C(changed) true where a set would run.
  diff_mode:
    support: none
    description: The module returns no C(diff); C(devices) and C(changes) say what would change.
notes:
  - Needs root (C(become)); C(mlxconfig) and C(mstconfig) open the card's configuration space.
  - A parameter the firmware shows only after another one takes effect (C(MAX_ACC_OUT_READ) needs
    C(ADVANCED_PCI_SETTINGS=1) in effect) is reported in C(deferred) and set by the run after the reset.
requirements:
  - C(mlxconfig) (NVIDIA MFT, package C(mft)) or C(mstconfig) (package C(mstflint)) on the node, where anything is wanted.
  - C(mlxfwreset) (package C(mft)) or C(mstfwreset) (package C(mstflint)) for a firmware reset after a reboot that did
    not reset the card.
  - C(flint) (package C(mft)) or C(mstflint) (package C(mstflint)) where O(firmware) is not empty.
"""

EXAMPLES = r"""
- name: Report the ConnectX firmware against the pinned images (changes nothing)
  gpudirect_nic_config:
    firmware:
      - {psid: MT_0000000834, version: 28.43.1014, image: /srv/fw/fw-ConnectX7-rel-28_43_1014.bin,
         sha256: 0f343b0931126a20f133d67c2b018a3b5a2c8e8c1b5f2a3d4e5f60718293a4b5}
  register: nic_firmware

- name: Burn it on the cards that differ (runs after the next firmware reset or reboot)
  gpudirect_nic_config:
    firmware: "{{ pinned_images }}"
    firmware_policy: update
    state: applied
  become: true

- name: Burn NVIDIA's image, as shipped (a .zip), on a Dell card, changing its PSID
  gpudirect_nic_config:
    firmware:
      - {psid: DEL0000000027, image_psid: MT_0000000834, version: 28.43.1014,
         image: /srv/fw/fw-ConnectX7-rel-28_43_1014-MCX755106AS-HEA_Ax-UEFI-14.37.14-FlexBoot-3.7.500.signed.bin.zip,
         sha256: 3c5e0d9f1b2a4c6e8f0a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f5a6}
    firmware_policy: update
    firmware_allow_psid_change: true
    state: applied
  become: true

- name: After a reboot, reset the cards that the warm reboot did not reset (mlxfwreset level 3), or fail naming the
    cold power cycle they need
  gpudirect_nic_config:
    profiles: [gpudirect]
    reset_record: /var/lib/gpudirect/nic-config-reset.json
    state: reset
  become: true

- name: Plan the GPUDirect firmware profile on every ConnectX card
  gpudirect_nic_config:
    profiles: [gpudirect]
  register: nic_firmware

- name: Set it (takes effect at the next firmware reset or reboot)
  gpudirect_nic_config:
    profiles: [gpudirect]
    params: {NUM_OF_VFS: 8, SRIOV_EN: true}
    devices: ["0000:17:00.0"]
    state: applied
  become: true
"""

RETURN = r"""
tool:
  description: The path of the tool used; null where none was needed or found.
  returned: always
  type: str
  sample: /usr/bin/mstconfig
devices:
  description: One entry per ConnectX card queried.
  returned: always
  type: list
  elements: dict
  contains:
    pci:
      description: The PCI function queried.
      type: str
      sample: "0000:17:00.0"
    functions:
      description: Every physical function of the card found in sysfs.
      type: list
      elements: str
      sample: ["0000:17:00.0", "0000:17:00.1"]
    type:
      description: The C(Device type) the tool printed.
      type: str
      sample: ConnectX7
    part:
      description: The C(Name) (part number) the tool printed, when it printed one.
      type: str
      sample: MCX755106AS-HEA_Ax
    current:
      description: The running value of each wanted parameter as printed; empty where the tool printed no Current column.
      type: dict
      sample: {ATS_ENABLED: "False(0)"}
    next_boot:
      description: The Next Boot value of each wanted parameter as printed (after the set, with state applied).
      type: dict
      sample: {ATS_ENABLED: "True(1)"}
    to_set:
      description: The parameters whose Next Boot differs from the wanted value (C(param), C(wanted), C(current), C(next_boot), C(source)).
      type: list
      elements: dict
    set_args:
      description: The C(PARAM=VALUE) arguments of the set.
      type: list
      elements: str
      sample: ["ATS_ENABLED=0"]
    pending:
      description: Parameters whose Next Boot already holds the wanted value while the running value differs - they wait for a reset.
      type: list
      elements: dict
    in_place:
      description: Parameters already wanted on Next Boot and, where printed, Current.
      type: list
      elements: dict
    unsupported:
      description: Wanted parameters the card does not expose (C(param), C(source)); reported, not failed.
      type: list
      elements: dict
      sample: [{param: LINK_TYPE_P1, source: raw}]
    deferred:
      description: Parameters the firmware shows only after C(ADVANCED_PCI_SETTINGS=1) takes effect; set by the run after the reset.
      type: list
      elements: dict
    skipped:
      description: Parameters left alone with the reason (read only, a second-port parameter on a single-port card, ...).
      type: list
      elements: dict
    needs_reset:
      description: A firmware reset or reboot is needed for the wanted values to be in use.
      type: bool
    current_known:
      description: The tool printed the Current column (false - a value set earlier and waiting for a reset cannot be seen).
      type: bool
    set:
      description: With state applied, whether this run set values on the card.
      type: bool
    firmware:
      description:
        - With O(firmware) not empty - C(psid), C(running), C(pending) (the flash's version while it differs from the
          running one), C(pinned), C(image), C(sha256), C(pin_psid) (the pin's C(psid)), C(image_psid) (the PSID its
          image carries), C(psid_change) (the burn changes the card's PSID), C(state) (C(in_place), C(to_update),
          C(pending_reset), C(no_image), C(not_read)), C(burn) (policy update would burn / burned) and C(burned); after
          a burn C(psid_after), C(burned_image), C(burned_sha256), C(downloaded), C(downloaded_sha256).
      type: dict
      sample: {psid: MT_0000000834, running: 28.40.1000, pending: null, pinned: 28.43.1014, state: to_update}
    reset:
      description:
        - C(key) (what waits for a firmware reset, as recorded), C(rebooted) (a reboot asked for exactly that already
          happened, O(reset_record)), C(recorded_boot_id), and for such a card C(tool) (mlxfwreset or mstfwreset),
          C(levels) (the query's reset levels), C(level) (3, or null where the card does not offer it), C(why) (why no
          reset can load it), C(done) (this run reset it) and C(loaded).
      type: dict
      sample: {key: "ATS_ENABLED=0", rebooted: true, level: 3, done: false}
reset_due:
  description: The cards whose reboot already happened without loading what waits on them and that offer C(mlxfwreset)
    level 3 (Driver restart and PCI reset); O(state=reset) resets them. Their C(devices[].reset) says what and why.
  returned: always
  type: list
  elements: str
  sample: ["0000:17:00.0"]
power_cycle:
  description: One sentence per card whose reboot already happened without loading what waits on it and that no
    firmware reset level loads without a reboot - it needs a cold power cycle; the sentence says what to run afterwards.
  returned: always
  type: list
  elements: str
  sample: ["0000:31:00.0 (ConnectX7): ATS_ENABLED=0 still waits for a firmware reset after the reboot asked for it (boot
            9f1c...): a warm reboot does not reset this card, and mlxfwreset -d 0000:31:00.0 query offers no level that
            loads it without a reboot (...). It needs a cold power cycle: ..."]
fwreset_done:
  description: The cards this run reset with C(mlxfwreset) (O(state=reset)), read back with nothing waiting.
  returned: always
  type: list
  elements: str
  sample: ["0000:17:00.0"]
boot_id:
  description: This boot's id (C(/proc/sys/kernel/random/boot_id)), null where it cannot be read.
  returned: always
  type: str
reset_record:
  description: The record the caller keeps at O(reset_record) once it asked for the reboot - per card with something
    waiting, what waits and the boot in which its reboot was asked for (this boot, or the earlier one for a card whose
    reboot already happened); C({}) when nothing waits (remove the file).
  returned: always
  type: dict
  sample: {cards: {"0000:17:00.0": {pending: "ATS_ENABLED=0", boot_id: 9f1c2e0a-9d4b-4c9e-8d53-0d5c1f3b2a71}}}
firmware_burned:
  description:
    - One entry per card burned by this run - C(pci), C(psid) (before), C(psid_after), C(version), C(image) (the
      C(.bin) burned, and the archive it came from), C(sha256) (of that C(.bin)), C(downloaded) and
      C(downloaded_sha256) (the file the pin names, checked against its C(sha256)).
  returned: always
  type: list
  elements: dict
  sample: [{pci: "0000:17:00.0", psid: MT_0000000834, psid_after: MT_0000000834, version: 28.43.1014,
            image: "fw-ConnectX7-rel-28_43_1014-MCX755106AS-HEA_Ax.signed.bin (from /var/cache/gpudirect/nic-firmware/MT_0000000834-28.43.1014.zip)",
            sha256: 0f343b0931126a20f133d67c2b018a3b5a2c8e8c1b5f2a3d4e5f60718293a4b5,
            downloaded: /var/cache/gpudirect/nic-firmware/MT_0000000834-28.43.1014.zip,
            downloaded_sha256: 3c5e0d9f1b2a4c6e8f0a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f5a6}]
firmware_report:
  description: One sentence per card whose firmware is not the pinned one or has no pinned image (both policies).
  returned: always
  type: list
  elements: str
  sample: ["0000:17:00.0 (ConnectX7): firmware 28.40.1000, pinned 28.43.1014 for PSID MT_0000000834 (to_update)"]
changes:
  description: What the module would change (or changed), one sentence per card; empty when converged.
  returned: always
  type: list
  elements: str
  sample: ["0000:17:00.0 (ConnectX7): set ATS_ENABLED=0, ADVANCED_PCI_SETTINGS=1; takes effect at the next firmware
            reset or reboot"]
disruption:
  description: The firmware resets the wanted values need, one sentence per card; empty when nothing waits.
  returned: always
  type: list
  elements: str
  sample: ["0000:17:00.0 (ConnectX7): firmware reset or reboot to load ATS_ENABLED=0, ADVANCED_PCI_SETTINGS=1"]
needs_reset:
  description: Some card needs a firmware reset or reboot.
  returned: always
  type: bool
  sample: true
reset_reason:
  description: One line naming the cards and parameters that wait for a reset, for a reboot request; empty when none.
  returned: always
  type: str
  sample: "0000:17:00.0 ATS_ENABLED=0, ADVANCED_PCI_SETTINGS=1"
unsupported:
  description: "C(<pci>: <param>) for every wanted parameter a card does not expose."
  returned: always
  type: list
  elements: str
  sample: ["0000:4b:00.0: LINK_TYPE_P1"]
tool_missing:
  description:
    - With O(state=planned) when neither tool is installed (a new node, before the OFED stage brings mstflint), the
      message naming the packages to install; C(changes) and C(disruption) then count the firmware reset the wanted
      values may need. With O(state=applied) the module fails with this message instead.
  returned: when the tool is missing and O(state=planned)
  type: str
  sample: "profiles gpudirect wanted on 0000:17:00.0, but mlxconfig / mstconfig is not installed: install ..."
skip_reason:
  description: Why nothing was queried (no ConnectX card, nothing wanted); absent otherwise.
  returned: when nothing was queried
  type: str
  sample: no NVIDIA/Mellanox ConnectX physical function under /sys/bus/pci/devices
"""

import json
import os
import shutil
import tempfile
import zipfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpudirect_host import module_runner
from ansible.module_utils.gpudirect_nic_config import (
    ALLOW_PSID_CHANGE_KNOB,
    FIRMWARE_KNOB,
    FWRESET_LOAD_LEVEL,
    FWRESET_TOOLS,
    cached_image_name,
    check_image_query,
    fwreset_levels_text,
    parse_fwreset_query,
    parse_flint_query,
    parse_mlxconfig_query,
    pick_firmware_member,
    pick_fwreset_level,
    plan_firmware,
    plan_firmware_version,
    psid_change_refusal,
    reboot_already_done,
    reset_key,
    resolve_wanted,
    validate_firmware_pins,
)
from ansible.module_utils.gpudirect_pci import (
    list_pci_addresses,
    normalize_pci_address,
    pci_device_dir,
    read_int,
)

MELLANOX_VENDOR = 0x15B3
TOOL_PACKAGES = {"mlxconfig": "mft (NVIDIA Firmware Tools)", "mstconfig": "mstflint",
                 "flint": "mft (NVIDIA Firmware Tools)", "mstflint": "mstflint"}
# the firmware burning tool that goes with each configuration tool choice (same packages)
FLASH_TOOLS = {"auto": ["flint", "mstflint"], "mlxconfig": ["flint"], "mstconfig": ["mstflint"]}
# the firmware reset tool of each choice: MFT's mlxfwreset, mstflint's mstfwreset
RESET_TOOLS = {"auto": list(FWRESET_TOOLS), "mlxconfig": ["mlxfwreset"], "mstconfig": ["mstfwreset"]}
TOOL_PACKAGES.update({"mlxfwreset": "mft (NVIDIA Firmware Tools)", "mstfwreset": "mstflint"})
BOOT_ID = "/proc/sys/kernel/random/boot_id"
# the most a .bin taken out of a firmware .zip may hold: ConnectX images are tens of MiB (a ConnectX-6 Dx
# image is about 33 MB, tests/fixtures/nic_config/README.md); more is not a firmware download
MAX_IMAGE_BYTES = 256 * 1024 * 1024


def find_cards(root):
    """{lowest PF address: [every PF of that bus/device]} of the ConnectX cards (network class, not a VF)."""
    cards = {}
    for address in list_pci_addresses(root):
        devdir = pci_device_dir(root, address)
        if read_int(os.path.join(devdir, "vendor"), 16) != MELLANOX_VENDOR:
            continue
        pci_class = read_int(os.path.join(devdir, "class"), 16)
        if pci_class is None or (pci_class >> 16) != 0x02:
            continue  # bridges of a ConnectX-8's PCIe switch, DMA functions, BlueField's other functions
        if os.path.lexists(os.path.join(devdir, "physfn")):
            continue  # an SR-IOV virtual function: the card is configured through its PF
        cards.setdefault(address.rsplit(".", 1)[0], []).append(address)
    return {functions[0]: functions for functions in cards.values()}


def pick_tool(module, wanted_tool, flash=False):
    names = FLASH_TOOLS[wanted_tool] if flash else (["mlxconfig", "mstconfig"] if wanted_tool == "auto" else [wanted_tool])
    for name in names:
        path = module.get_bin_path(name)
        if path:
            return path
    return None


def query(module, run, tool, pci):
    """The parsed query of one card (Default/Current/Next Boot where the tool prints them)."""
    rc, out, err = run([tool, "-d", pci, "-e", "query"])
    if rc != 0 and "Device #" not in (out or "") and "Configurations:" not in (out or ""):
        # a tool without -e (older mstflint) says so instead of printing a table: ask for Next Boot alone
        rc, out, err = run([tool, "-d", pci, "query"])
    text = out or ""
    try:
        parsed = parse_mlxconfig_query(text)
    except ValueError as exc:
        module.fail_json(msg="%s -d %s query printed output this module cannot read (%s); rc %s. Run the command "
                             "by hand on %s and check the tool and the card's firmware; nothing was changed."
                             % (os.path.basename(tool), pci, exc, rc, pci),
                         rc=rc, stdout=text, stderr=err or "")
    errors = parsed["errors"] + [e for dev in parsed["devices"] for e in dev["errors"]]
    if rc != 0 or errors or not parsed["devices"]:
        module.fail_json(msg="%s -d %s query failed (rc %s): %s. Run the play with become (the tool needs root), "
                             "check that %s is a ConnectX card the tool knows (a newer firmware may need a newer "
                             "%s); nothing was changed."
                             % (os.path.basename(tool), pci, rc, "; ".join(errors) or (err or "").strip() or "no output",
                                pci, TOOL_PACKAGES.get(os.path.basename(tool), "tool")),
                         rc=rc, stdout=text, stderr=err or "")
    return parsed


def flint_query(module, run, tool, pci):
    """The parsed flint/mstflint query of one card (PSID, flash and running firmware version)."""
    rc, out, err = run([tool, "-d", pci, "query"])
    text = out or ""
    try:
        if rc != 0 and "-E-" not in text:
            raise ValueError((err or "").strip() or "no output")
        return parse_flint_query(text)
    except ValueError as exc:
        module.fail_json(msg="%s -d %s query could not be read (%s); rc %s. Run it by hand on the node: the tool needs "
                             "root (become), and a newer firmware may need a newer %s. Nothing was changed on %s."
                             % (os.path.basename(tool), pci, exc, rc, TOOL_PACKAGES.get(os.path.basename(tool), "tool"),
                                pci), rc=rc, stdout=text, stderr=err or "")


def sha256_of(module, path):
    return module.digest_from_file(path, "sha256") if os.path.isfile(path) else None


def error_lines(out, err):
    """What the tool said went wrong: its ``-E-`` lines, else its last line, else stderr."""
    said = [ln.strip() for ln in (out or "").splitlines() if ln.strip().startswith("-E-")]
    return said or (out or "").strip().splitlines()[-1:] or [(err or "").strip() or "no output"]


def extract_member(module, archive, member, folder):
    """Copy the zip member into ``folder`` (under its base name, never a path of the archive's), reading at
    most MAX_IMAGE_BYTES; zipfile checks the member's CRC-32 as it is read."""
    target = os.path.join(folder, os.path.basename(member) or "image.bin")
    with zipfile.ZipFile(archive) as handle:
        info = handle.getinfo(member)
        if info.file_size > MAX_IMAGE_BYTES:
            raise ValueError("the member %s of the archive %s is %d bytes, more than the %d a ConnectX image has: not "
                             "a firmware download. Nothing was burned." % (member, archive, info.file_size, MAX_IMAGE_BYTES))
        with handle.open(member) as source, open(target, "wb") as sink:
            shutil.copyfileobj(source, sink, 1 << 20)
    return target


def prepare_image(module, run, tool, firmware, cache, workdir):
    """The image of one pin, ready to burn, or fail_json before anything is burned: the file the pin names
    (a path, or the URL's download in ``cache``), its sha256 against the pin, the one .bin of a .zip
    extracted into ``workdir``, ``<tool> -i <bin> verify`` and ``-i <bin> query`` (the image's version and
    PSID). Returns {downloaded, downloaded_sha256, archive, member, path, sha256, query}."""
    image = firmware["image"]
    psid = firmware["pin_psid"]
    if not image.startswith("/") and cache:
        image = os.path.join(cache, cached_image_name(psid, firmware["pinned"], image))
    if not image.startswith("/"):
        module.fail_json(msg="the pinned image %s for PSID %s is not a path on the node; download it first (the role "
                             "gpudirect_nic_config does, with its sha256) and pass the path (%s). Nothing was burned."
                             % (image, psid, FIRMWARE_KNOB))
    actual = sha256_of(module, image)
    if actual is None:
        module.fail_json(msg="the pinned image %s for PSID %s is not a file on the node (%s). Nothing was burned."
                             % (image, psid, FIRMWARE_KNOB))
    if actual.lower() != firmware["sha256"].lower():
        module.fail_json(msg="the image %s has sha256 %s, but %s pins %s for PSID %s (the sum of the file as "
                             "downloaded, the .zip when it is one): a wrong or damaged file. Nothing was burned; "
                             "fix the file or the pinned sum." % (image, actual, FIRMWARE_KNOB, firmware["sha256"], psid))
    out = {"downloaded": image, "downloaded_sha256": actual, "archive": None, "member": None, "path": image,
           "sha256": actual}
    with open(image, "rb") as handle:
        # a zip's local header; is_zipfile also finds a zip whose central directory is cut off as not one
        zipped = handle.read(4) == b"PK\x03\x04" or zipfile.is_zipfile(image)
    if zipped:
        try:
            with zipfile.ZipFile(image) as handle:
                member = pick_firmware_member(handle.namelist(), image)
            folder = os.path.join(workdir, "%s-%s" % (psid, firmware["pinned"]))
            os.makedirs(folder, mode=0o700, exist_ok=True)
            out.update(archive=image, member=member, path=extract_member(module, image, member, folder))
        except ValueError as exc:
            module.fail_json(msg="PSID %s: %s" % (psid, exc))
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError) as exc:
            module.fail_json(msg="cannot take the firmware image out of the archive %s, pinned for PSID %s in %s: %s. A "
                                 "damaged download: fetch it again and check it. Nothing was burned."
                                 % (image, psid, FIRMWARE_KNOB, exc))
        out["sha256"] = sha256_of(module, out["path"])
    name = os.path.basename(tool)
    rc, said, err = run([tool, "-i", out["path"], "verify"])
    if rc != 0:
        module.fail_json(msg="%s -i %s verify failed (rc %s): %s. The image is damaged or not a firmware image for "
                             "this tool; nothing was burned. Download it again and check its sum (%s, PSID %s)."
                             % (name, out["path"], rc, "; ".join(error_lines(said, err)), FIRMWARE_KNOB, psid),
                         rc=rc, stdout=said, stderr=err)
    rc, said, err = run([tool, "-i", out["path"], "query"])
    try:
        if rc != 0:
            raise ValueError("; ".join(error_lines(said, err)))
        out["query"] = parse_flint_query(said or "")
    except ValueError as exc:
        module.fail_json(msg="%s -i %s query could not be read (rc %s): %s. Nothing was burned; check the image (%s, "
                             "PSID %s)." % (name, out["path"], rc, exc, FIRMWARE_KNOB, psid),
                         rc=rc, stdout=said, stderr=err)
    return out


def image_label(prepared):
    """The burned file as an admin knows it: the .bin, and the archive it came from."""
    if prepared["archive"]:
        return "%s (from %s)" % (prepared["member"], prepared["archive"])
    return prepared["path"]


def burn(module, run, tool, pci, firmware, prepared, reports, card):
    """Burn the prepared image (its checks done), query again: the flash must hold the pinned version."""
    name = os.path.basename(tool)
    argv = [tool, "-d", pci, "-i", prepared["path"], "-y"] + (["-allow_psid_change"] if firmware["psid_change"] else []) \
        + ["burn"]
    rc, out, err = run(argv)
    if rc != 0:
        # flint's words first: a drain report keeps the first 400 characters of a failure
        module.fail_json(msg="firmware burn failed on card %s (PSID %s): %s. Image %s, sha256 %s (%s); %s exited %s. "
                             "flint's burn is failsafe: the card keeps the image it had until a burn completes. Check "
                             "the card and the image; cards burned earlier in this run keep their new image for the "
                             "next reset." % (pci, firmware["psid"], "; ".join(error_lines(out, err)).rstrip("."),
                                              image_label(prepared), prepared["sha256"], FIRMWARE_KNOB,
                                              " ".join([name] + argv[1:]), rc),
                         rc=rc, stdout=out, stderr=err, cmd=argv, devices=reports + [card])
    again = flint_query(module, run, tool, pci)
    if again["flash"] != firmware["pinned"]:
        module.fail_json(msg="%s: burned %s (version %s), but %s -d %s query then reads FW Version %s (running %s). "
                             "The firmware did not take the image; check it by hand."
                             % (pci, image_label(prepared), firmware["pinned"], name, pci, again["flash"],
                                again["running"]), devices=reports + [card])
    firmware.update(running=again["running"], pending=again["pending"], psid_after=again["psid"],
                    state="pending_reset" if again["running"] != firmware["pinned"] else "in_place", burned=True,
                    burned_image=image_label(prepared), burned_sha256=prepared["sha256"],
                    downloaded=prepared["downloaded"], downloaded_sha256=prepared["downloaded_sha256"])


def empty_card(pci, functions):
    """A card read for its firmware only (no NV parameter wanted)."""
    return {"pci": pci, "functions": functions, "type": None, "part": None, "current": {}, "next_boot": {},
            "to_set": [], "set_args": [], "pending": [], "in_place": [], "unsupported": [], "deferred": [],
            "skipped": [], "needs_reset": False, "current_known": None, "set": False}


def card_report(pci, functions, parsed, plan):
    device = parsed["devices"][0]
    params = device["params"]
    names = sorted(set(r["param"] for key in ("in_place", "to_set", "pending") for r in plan[key]))
    current = dict((n, params[n]["current"]["raw"]) for n in names if "current" in params[n])
    next_boot = dict((n, (params[n].get("new") or params[n]["next_boot"])["raw"]) for n in names)
    return {
        "pci": pci,
        "functions": functions,
        "type": device.get("type"),
        "part": device.get("name"),
        "current": current,
        "next_boot": next_boot,
        "to_set": plan["to_set"],
        "set_args": plan["set_args"],
        "pending": plan["pending"],
        "in_place": plan["in_place"],
        "unsupported": plan["not_exposed"],
        "deferred": plan["deferred"],
        "skipped": plan["skipped"],
        "needs_reset": plan["reset_needed"],
        "current_known": plan["current_known"],
        "set": False,
    }


def label(card):
    return "%s (%s)" % (card["pci"], card["type"] or "ConnectX")


def firmware_sentences(card, policy):
    """(changes, disruption, reason, report) of one card's firmware version."""
    fw = card.get("firmware")
    if not fw or fw["state"] in ("in_place", "not_read"):
        return [], [], "", []
    if fw["state"] == "no_image":
        return [], [], "", ["%s: firmware %s, PSID %s has no pinned image in %s (left as it is)"
                            % (label(card), fw["running"], fw["psid"], FIRMWARE_KNOB)]
    # an OEM card given an image of another PSID (the pin's image_psid): the burn changes the card's PSID
    change = (", PSID %s -> %s" % (fw["psid"], fw.get("psid_after") or fw["image_psid"])) if fw.get("psid_change") else ""
    report = ["%s: firmware %s%s, pinned %s for PSID %s (%s%s%s)" % (
        label(card), fw["running"], (" (%s on the flash, waits for a firmware reset)" % fw["pending"]) if fw["pending"] else "",
        fw["pinned"], fw["psid"], fw["state"], "; the image changes the PSID to %s" % fw["image_psid"]
        if fw.get("psid_change") and not fw.get("burned") else "", "" if policy == "update" else "; policy report: not updated")]
    if policy != "update":
        return [], [], "", report
    if fw["state"] == "to_update" or fw.get("burned"):
        return (["%s: firmware %s -> %s (%s)%s%s; runs after the next firmware reset or reboot"
                 % (label(card), fw["running"], fw["pinned"], fw.get("burned_image") or fw["image"], change,
                    ", burned" if fw.get("burned") else "")],
                ["%s: firmware update %s -> %s needs a firmware reset or reboot"
                 % (label(card), fw["running"], fw["pinned"])],
                "firmware %s" % fw["pinned"], report)
    # burned (earlier or by this run), the card still runs the old one: only the reset is owed
    return ([], ["%s: firmware reset or reboot to run firmware %s (burned, running %s)"
                 % (label(card), fw["pinned"], fw["running"])], "firmware %s" % fw["pinned"], report)


def read_boot_id():
    """This boot's id (a new one at every boot, warm or cold), or None where the kernel has none."""
    try:
        with open(BOOT_ID) as handle:
            return handle.read().strip() or None
    except OSError:
        return None


def read_record(module, path):
    """The node's record of the reboots asked for pending changes ({} when there is none)."""
    if not path or not os.path.exists(path):
        return {}
    try:
        with open(path) as handle:
            record = json.load(handle)
        if not isinstance(record, dict) or not isinstance(record.get("cards", {}), dict):
            raise ValueError("not a map with a 'cards' map")
        return record
    except (OSError, ValueError) as exc:
        module.fail_json(msg="the record of the reboots asked for pending ConnectX changes, %s, cannot be read (%s). "
                             "Remove it (the next run then asks a reboot for whatever still waits), or restore it; "
                             "nothing was changed." % (path, exc))


def fwreset_query(run, tool, pci):
    """``<mlxfwreset|mstfwreset> -d <pci> query`` parsed, or {"error": what went wrong}."""
    rc, out, err = run([tool, "-d", pci, "query"])
    try:
        if rc != 0 and "-E-" not in (out or ""):
            raise ValueError((err or "").strip() or "no output")
        return parse_fwreset_query(out or "")
    except ValueError as exc:
        return {"error": "%s -d %s query: %s (rc %s)" % (os.path.basename(tool), pci, exc, rc)}


def power_cycle_sentence(card):
    """Why the card needs a cold power cycle, and what to do: the reboot asked for its change did not load it
    and no reset level the card offers loads it without a reboot."""
    reset = card["reset"]
    return ("%s: %s still waits for a firmware reset after the reboot asked for it (boot %s): a warm reboot does not "
            "reset this card, and %s. It needs a cold power cycle: power the node off and on (its BMC, e.g. ipmitool "
            "chassis power cycle; a reboot is not enough), then run site.yml again, which reads the values in effect, "
            "verifies the node and resumes it" % (label(card), reset["key"], reset["recorded_boot_id"], reset["why"]))


def reset_sentence(card):
    reset = card["reset"]
    return ("%s: firmware reset (%s level %d, Driver restart and PCI reset) to load %s: the reboot asked for it (boot "
            "%s) did not reset the card; no second reboot" % (label(card), os.path.basename(reset["tool"]),
                                                              reset["level"], reset["key"], reset["recorded_boot_id"]))


def sentences(cards, policy="report"):
    changes, disruption, reasons, report = [], [], [], []
    for card in cards:
        if (card.get("reset") or {}).get("rebooted"):
            # its reboot happened and did not load the change: a firmware reset, or a cold power cycle; no
            # reboot request (never a second reboot for the same change)
            changes.append("%s: %s waits for a firmware reset after the reboot asked for it"
                           % (label(card), card["reset"]["key"]))
            disruption.append(reset_sentence(card) if card["reset"]["level"] is not None
                              else power_cycle_sentence(card))
            report += firmware_sentences(card, policy)[3]
            continue
        waiting = [r["param"] + "=" + r["wanted"] for r in card["to_set"] + card["pending"]]
        if card["to_set"]:
            changes.append("%s: set %s; takes effect at the next firmware reset or reboot"
                           % (label(card), ", ".join(r["param"] + "=" + r["wanted"] for r in card["to_set"])))
        if card["pending"]:
            changes.append("%s: %s already set for the next boot (running %s); waits for a firmware reset or reboot"
                           % (label(card), ", ".join(r["param"] + "=" + r["wanted"] for r in card["pending"]),
                              ", ".join("%s %s" % (r["param"], r["current"]) for r in card["pending"])))
        if card["deferred"]:
            changes.append("%s: %s shown by the firmware only once ADVANCED_PCI_SETTINGS=1 is in effect; set by the "
                           "run after the firmware reset" % (label(card), ", ".join(
                               r["param"] + "=" + r["wanted"] for r in card["deferred"])))
        if waiting:
            disruption.append("%s: firmware reset or reboot to load %s" % (label(card), ", ".join(waiting)))
        fw_changes, fw_disruption, fw_reason, fw_report = firmware_sentences(card, policy)
        changes += fw_changes
        disruption += fw_disruption
        report += fw_report
        if waiting or fw_reason:
            reasons.append("%s %s" % (card["pci"], ", ".join(waiting + ([fw_reason] if fw_reason else []))))
    return changes, disruption, "; ".join(reasons), report


def main():
    module = AnsibleModule(
        argument_spec=dict(
            profiles=dict(type="list", elements="str", default=[]),
            params=dict(type="dict", default={}),
            tool=dict(type="str", default="auto", choices=["auto", "mlxconfig", "mstconfig"]),
            devices=dict(type="list", elements="str", default=[]),
            state=dict(type="str", default="planned", choices=["planned", "applied", "reset"]),
            root=dict(type="path", default="/"),
            firmware=dict(type="list", elements="dict", default=[]),
            firmware_policy=dict(type="str", default="report", choices=["report", "update"]),
            firmware_cache=dict(type="path"),
            firmware_allow_psid_change=dict(type="bool", default=False),
            reset_record=dict(type="path"),
            fwreset=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    wanted = dict(p["params"])
    if "profiles" in wanted:
        module.fail_json(msg="params: 'profiles' is not a firmware parameter; name profiles in profiles "
                             "(gpudirect_nic_config_profiles). Nothing was changed.")
    wanted["profiles"] = list(p["profiles"])
    try:
        knobs = resolve_wanted(wanted)
    except ValueError as exc:
        module.fail_json(msg="gpudirect_nic_config_profiles / gpudirect_nic_config_params: %s. Nothing was changed." % exc)
    try:
        pins = validate_firmware_pins(p["firmware"])
    except ValueError as exc:
        module.fail_json(msg="%s. Nothing was changed." % exc)
    policy = p["firmware_policy"]

    restrict = []
    for address in p["devices"]:
        normal = normalize_pci_address(address if address.count(":") == 2 else "0000:" + address)
        if normal is None:
            module.fail_json(msg="devices (gpudirect_nic_config_devices): %r is not a PCI address such as 0000:17:00.0. "
                                 "Nothing was changed." % address)
        restrict.append(normal)

    result = {"changed": False, "tool": None, "flash_tool": None, "devices": [], "changes": [], "disruption": [],
              "needs_reset": False, "reset_reason": "", "unsupported": [], "firmware_report": [], "boot_id": None,
              "reset_due": [], "power_cycle": [], "fwreset_done": [], "reset_record": {}}
    cards = find_cards(p["root"])
    every_function = dict((f, pci) for pci, functions in cards.items() for f in functions)
    missing = [a for a in restrict if a not in every_function]
    if missing:
        module.fail_json(msg="devices (gpudirect_nic_config_devices): %s %s not a ConnectX physical function on this host "
                             "(found: %s). Fix the list; nothing was changed."
                             % (", ".join(missing), "is" if len(missing) == 1 else "are",
                                ", ".join(sorted(every_function)) or "none"))
    if restrict:
        chosen = set(every_function[a] for a in restrict)
        cards = dict((pci, functions) for pci, functions in cards.items() if pci in chosen)
    if not cards:
        module.exit_json(skip_reason="no NVIDIA/Mellanox ConnectX physical function under %s"
                         % os.path.join(p["root"], "sys/bus/pci/devices"), **result)
    if not knobs and not pins:
        result["devices"] = [{"pci": pci, "functions": functions} for pci, functions in sorted(cards.items())]
        module.exit_json(skip_reason="no firmware parameter wanted (profiles and params are empty) and no firmware "
                                     "image pinned: nothing queried", **result)

    tool = pick_tool(module, p["tool"]) if knobs else None
    flash_tool = pick_tool(module, p["tool"], flash=True) if pins else None
    if (knobs and tool is None) or (pins and flash_tool is None):
        tools = []
        if knobs and tool is None:
            tools += ["mlxconfig", "mstconfig"] if p["tool"] == "auto" else [p["tool"]]
        if pins and flash_tool is None:
            tools += FLASH_TOOLS[p["tool"]]
        what = " and ".join(filter(None, [
            ("profiles " + ", ".join(p["profiles"]) if p["profiles"] else "params " + ", ".join(sorted(p["params"])))
            if knobs else "",
            ("firmware images pinned for " + ", ".join(sorted(pins))) if pins else ""]))
        missing = ("%s wanted on %s, but %s is not installed: install %s, or leave gpudirect_nic_config_profiles and "
                   "gpudirect_nic_config_params empty. Nothing was changed."
                   % (what, ", ".join(sorted(cards)), " / ".join(tools),
                      " or ".join("package " + TOOL_PACKAGES[t] + " (" + t + ")" for t in tools)))
        if p["state"] == "applied":
            module.fail_json(msg=missing)
        # a plan on a new node, before the OFED stage brings mstflint: the cards cannot be read yet, so the
        # plan says so and counts the firmware reset their values may need (the node is then rolled, drained)
        names = ", ".join(sorted(cards))
        may_reset = knobs or policy == "update"
        result.update(tool_missing=missing,
                      devices=[{"pci": pci, "functions": functions} for pci, functions in sorted(cards.items())],
                      changes=["%s: %s to be read and set once %s is installed (the OFED stage brings mstflint)"
                               % (names, what, " / ".join(tools))] if may_reset else [],
                      disruption=["%s: %s may need a firmware reset or reboot once set (the cards cannot be read "
                                  "before %s is installed)" % (names, what, " / ".join(tools))] if may_reset else [],
                      firmware_report=[] if may_reset else ["%s: firmware versions to be read once %s is installed"
                                                            % (names, " / ".join(tools))])
        module.exit_json(**result)
    result["tool"] = tool
    result["flash_tool"] = flash_tool
    run = module_runner(module)
    apply = p["state"] == "applied" and not module.check_mode
    allow_psid_change = p["firmware_allow_psid_change"]
    boot_id = read_boot_id()
    record = read_record(module, p["reset_record"])
    reset_tool = None
    if p["fwreset"]:
        for name in RESET_TOOLS[p["tool"]]:
            reset_tool = reset_tool or module.get_bin_path(name)

    def read_card(pci, functions):
        """One card read and planned: its NV values, its firmware, and whether a reboot asked for what waits
        on it already happened (the record) - then which firmware reset level could load it."""
        if knobs:
            parsed = query(module, run, tool, pci)
            plan = plan_firmware(parsed, wanted)["devices"][0]
            card = card_report(pci, functions, parsed, plan)
        else:
            card = empty_card(pci, functions)
        if pins:
            card["firmware"] = dict(plan_firmware_version(flint_query(module, run, flash_tool, pci), pins, policy),
                                    burned=False)
        key = reset_key(card["to_set"], card["pending"], card.get("firmware"), policy)
        entry = (record.get("cards") or {}).get(pci) or {}
        # only what was written and waits for a reset: a value still to set, or an image still to burn, is
        # set or burned first, and its reboot asked for (a new change)
        written = not card["to_set"] and (card.get("firmware") or {}).get("state") != "to_update"
        card["reset"] = {"key": key, "rebooted": written and boot_id is not None
                         and reboot_already_done(record, pci, key, boot_id),
                         "recorded_boot_id": entry.get("boot_id") if isinstance(entry, dict) else None,
                         "tool": None, "levels": None, "level": None, "why": None, "done": False}
        reset = card["reset"]
        if reset["rebooted"]:
            if not p["fwreset"]:
                reset["why"] = "gpudirect_nic_config_fwreset is false (the role runs no mlxfwreset)"
            elif reset_tool is None:
                reset["why"] = ("neither mlxfwreset (package %s) nor mstfwreset (package mstflint) is installed"
                                % TOOL_PACKAGES["mlxfwreset"])
            else:
                reset["tool"] = reset_tool
                parsed_levels = fwreset_query(run, reset_tool, pci)
                if "error" in parsed_levels:
                    reset["why"] = "its reset levels could not be read (%s)" % parsed_levels["error"]
                else:
                    reset["levels"] = dict((str(n), row) for n, row in parsed_levels["levels"].items())
                    reset["level"] = pick_fwreset_level(parsed_levels)
                    if reset["level"] is None:
                        reset["why"] = ("%s -d %s query offers no level that loads it without a reboot (level %d, "
                                        "Driver restart and PCI reset, is needed; the card offers: %s)"
                                        % (os.path.basename(reset_tool), pci, FWRESET_LOAD_LEVEL,
                                           fwreset_levels_text(parsed_levels)))
        return card

    # read and plan every card first: nothing is burned or set until every image to burn has passed its checks
    cards_found, cards = cards, []
    for pci, functions in sorted(cards_found.items()):
        card = read_card(pci, functions)
        if pins:
            fw = card["firmware"]
            # the pin says its image carries another PSID (image_psid): refused here, before any drain or burn,
            # unless allowed (a PSID found only in the image is refused at the burn's checks below)
            if fw["burn"] and fw["psid_change"] and not allow_psid_change:
                module.fail_json(msg=psid_change_refusal(pci, fw["psid"], fw["image_psid"], fw["image"], True),
                                 devices=[c for c in cards] + [card])
            if fw["burn"] and p["state"] == "applied":
                result["changed"] = True
            card["needs_reset"] = card["needs_reset"] or (policy == "update" and fw["state"] in (
                "to_update", "pending_reset"))
        if card["set_args"] and p["state"] == "applied":
            result["changed"] = True
        cards.append(card)

    if p["state"] == "reset":
        # only the cards whose reboot already happened and did not load what waits on them: level 3 where the
        # card offers it, read back; the others need a cold power cycle (the message says so, per card)
        failures = []
        for index, card in enumerate(cards):
            reset = card["reset"]
            if not reset["rebooted"]:
                continue
            if reset["level"] is None:
                failures.append(power_cycle_sentence(card))
                continue
            result["changed"] = True
            if module.check_mode:
                continue
            name = os.path.basename(reset["tool"])
            argv = [reset["tool"], "-d", card["pci"], "--level", str(reset["level"]), "-y", "reset"]
            rc, out, err = run(argv)
            if rc != 0:
                failures.append("%s: %s failed (rc %s): %s; %s still waits. Run %s -d %s query on the node for the levels "
                                "the card offers now; where none loads it without a reboot it needs a cold power cycle "
                                "(power the node off and on), then run site.yml again"
                                % (label(card), " ".join([name] + argv[1:]), rc, "; ".join(error_lines(out, err)).rstrip("."),
                                   reset["key"], name, card["pci"]))
                continue
            again = read_card(card["pci"], card["functions"])
            if again["reset"]["key"]:
                failures.append("%s: %s reported success, but %s still waits (read again after the reset). It needs a "
                                "cold power cycle: power the node off and on, then run site.yml again"
                                % (label(card), " ".join([name] + argv[1:]), again["reset"]["key"]))
                continue
            again["reset"].update(done=True, tool=reset["tool"], level=reset["level"], levels=reset["levels"],
                                  loaded=reset["key"], recorded_boot_id=reset["recorded_boot_id"])
            cards[index] = again
        if failures:
            module.fail_json(msg="; ".join(failures) + ". No reboot was asked for: the reboot for this change already "
                                                      "happened (never a second one for the same change).",
                             devices=cards, power_cycle=failures,
                             fwreset_done=[c["pci"] for c in cards if c["reset"].get("done")])

    prepared = {}
    workdir = None
    if apply and any(c.get("firmware", {}).get("burn") for c in cards):
        workdir = tempfile.mkdtemp(prefix="nic-firmware-", dir=module.tmpdir)
        for card in cards:
            fw = card.get("firmware") or {}
            if not fw.get("burn"):
                continue
            if fw["pin_psid"] not in prepared:
                prepared[fw["pin_psid"]] = prepare_image(module, run, flash_tool, fw, p["firmware_cache"], workdir)
            image = prepared[fw["pin_psid"]]
            try:
                fw["psid_change"] = check_image_query(image["query"], fw, fw["psid"], allow_psid_change, card["pci"],
                                                      image_label(image))
            except ValueError as exc:
                module.fail_json(msg=str(exc), devices=cards)
            if fw["psid_change"] and fw["image_psid"] == fw["pin_psid"]:
                module.warn("%s: burning %s changes the card's PSID %s to %s (%s is true). Later runs find the card "
                            "under %s only if its pin says image_psid: %s (%s)"
                            % (card["pci"], image_label(image), fw["psid"], image["query"]["psid"],
                               ALLOW_PSID_CHANGE_KNOB, image["query"]["psid"], image["query"]["psid"], FIRMWARE_KNOB))

    reports = []
    for card in cards:
        pci = card["pci"]
        fw = card.get("firmware") or {}
        if apply and fw.get("burn"):
            burn(module, run, flash_tool, pci, fw, prepared[fw["pin_psid"]], reports, card)
        if apply and card["set_args"]:
            rc, out, err = run([tool, "-y", "-d", pci, "set"] + card["set_args"])
            if rc != 0:
                module.fail_json(msg="%s -y -d %s set %s failed (rc %s): %s. Values set on earlier cards stay set for "
                                     "their next boot; fix the cause and run again."
                                     % (os.path.basename(tool), pci, " ".join(card["set_args"]), rc,
                                        "; ".join((out or "").strip().splitlines()[-1:]) or (err or "").strip()),
                                 rc=rc, stdout=out, stderr=err, devices=reports + [card])
            again = plan_firmware(query(module, run, tool, pci), wanted)["devices"][0]
            for row in again["to_set"]:
                if row["param"] in [a.split("=", 1)[0] for a in card["set_args"]]:
                    module.fail_json(msg="%s: %s was set to %s, but the card's Next Boot reads %s after the set. The "
                                         "firmware did not take the value: check the card's firmware version and "
                                         "the value (mlxconfig -d %s query %s)."
                                         % (pci, row["param"], row["wanted"], row["next_boot"], pci, row["param"]),
                                     devices=reports + [card])
            card["next_boot"].update((r["param"], r["next_boot"]) for r in again["pending"] + again["in_place"])
            card["set"] = True
        reports.append(card)
    result["devices"] = reports
    result["changes"], result["disruption"], result["reset_reason"], result["firmware_report"] = sentences(reports, policy)
    result["firmware_burned"] = [
        {"pci": c["pci"], "psid": c["firmware"]["psid"], "psid_after": c["firmware"]["psid_after"],
         "version": c["firmware"]["pinned"], "image": c["firmware"]["burned_image"],
         "sha256": c["firmware"]["burned_sha256"], "downloaded": c["firmware"]["downloaded"],
         "downloaded_sha256": c["firmware"]["downloaded_sha256"]}
        for c in reports if (c.get("firmware") or {}).get("burned")]
    result["needs_reset"] = any(c["needs_reset"] for c in reports)
    result["boot_id"] = boot_id
    result["reset_due"] = [c["pci"] for c in reports if c["reset"]["rebooted"] and c["reset"]["level"] is not None]
    result["power_cycle"] = [power_cycle_sentence(c) for c in reports
                             if c["reset"]["rebooted"] and c["reset"]["level"] is None]
    result["fwreset_done"] = [c["pci"] for c in reports if c["reset"].get("done")]
    # the record to keep on the node: per card what waits and the boot in which its reboot was asked for (a card
    # whose reboot already happened keeps that boot; the others, whose reboot this run asks for, this one); the
    # cards this call did not read keep their entries
    kept = dict((pci, entry) for pci, entry in (record.get("cards") or {}).items() if pci not in cards_found)
    for card in reports:
        if card["reset"]["key"]:
            kept[card["pci"]] = {"pending": card["reset"]["key"],
                                 "boot_id": card["reset"]["recorded_boot_id"] if card["reset"]["rebooted"] else boot_id}
    result["reset_record"] = {"cards": kept} if kept else {}
    if workdir:
        shutil.rmtree(workdir, ignore_errors=True)   # the .bin taken out of a .zip: burned, not kept
    result["unsupported"] = ["%s: %s" % (c["pci"], r["param"]) for c in reports for r in c["unsupported"]]
    for line in result["unsupported"]:
        module.warn("the card does not expose %s (left alone, reported in unsupported)" % line)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
