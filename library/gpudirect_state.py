#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Compare a node with the state recorded after its last converged run (see DOCUMENTATION)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpudirect_state
short_description: Record what a converged GPUDirect node looks like, and tell whether it still does
description:
  - Computes a fingerprint of everything the toolkit's stages manage on a node - running and default boot
    kernel, kernel command line, reboot-required flags, the package database, the DKMS tree and built
    modules, installed kernels and boot loader files, the watched kernel modules and their C(srcversion),
    the ACS control register of every PCIe function that has one, the GPU and NIC inventory (PCI address,
    vendor and device id, current and maximum link speed and width, NUMA node), the NIC firmware versions
    (C(/sys/class/infiniband/*/fw_ver)), the peer-memory path (loaded peer-memory module, dma-buf), the
    active state of the given units and of every C(gpudirect-*.service) installed, and
    the content of the configuration trees the roles write (C(/etc/apt), C(/etc/modprobe.d),
    C(/etc/modules-load.d), C(/etc/systemd/system), C(/etc/security/limits.d), C(/etc/default/grub.d),
    C(/etc/gpudirect), C(/usr/local/sbin), C(/var/lib/gpudirect), ...).
  - With O(state=query) (read-only) it compares the node and the controller's O(inputs) with the record at
    O(path) and returns C(unchanged=true) only when nothing differs; otherwise C(differences) says what did.
  - With O(state=record) it writes the record (JSON, mode 0600); C(changed) only when its content changes.
  - With O(state=absent) it removes the record (a verification failed), so that the next run is a full one;
    C(changed) only when there was one.
  - The fingerprint errs on the side of a full run - any package installed, any file in the watched trees
    edited - since a full run is only slower, while a missed difference would leave drift unrepaired.
version_added: "1.1.0"
author:
  - GPUDirect RDMA toolkit maintainers (!UNKNOWN)
options:
  path:
    description: Where the record lives on the node.
    type: path
    default: /var/lib/gpudirect/converged.json
  state:
    description:
      - C(query) compares with the record and changes nothing; C(record) writes the current fingerprint;
        C(absent) removes the record.
    type: str
    choices: [query, record, absent]
    default: query
  inputs:
    description:
      - Digests of what the controller brings to the run (inventory variables and toolkit files), one per install
        stage, as JSON (C(gpudirect_stage_digests) | to_json), so that RV(changed_stages) names the stages a toolkit
        or inventory change touches; any other text is compared as a whole. A different value is a difference.
    type: str
    required: true
  units:
    description:
      - systemd units whose active state is part of the fingerprint (missing units read C(inactive)).
      - The toolkit's own units (C(gpudirect-*.service) under C(/etc/systemd/system), C(/lib/systemd/system),
        C(/usr/lib/systemd/system)) are added to them.
    type: list
    elements: str
    default: []
  files:
    description:
      - Node paths whose content (sha256) is part of the fingerprint, for files the inventory names but no
        stage writes, such as the module signing certificate and key an admin replaces in place at a key
        rotation. A file that is missing reads as missing, so one that comes or goes is a difference too.
    type: list
    elements: path
    default: []
  exclude:
    description:
      - Node paths under the watched trees that are the runs' own bookkeeping, not the node's configuration
        (the run lock and the left-drained note where the inventory moved them); the default ones,
        C(/var/lib/gpudirect/run.lock) and C(/var/lib/gpudirect/left-drained.json), and the record itself
        are always left out.
    type: list
    elements: path
    default: []
  root:
    description:
      - Directory holding the node's file system. Leave at C(/) on a live host; a captured or fabricated tree
        is read without running anything (units then read as C(unknown), the default boot kernel comes from
        the C(vmlinuz) link only).
    type: path
    default: /
attributes:
  check_mode:
    support: full
    description: O(state=query) only reads; O(state=record) and O(state=absent) report whether they would write or remove.
  diff_mode:
    support: none
    description: The record is a machine-made digest; C(differences) is the readable account.
  platform:
    support: full
    platforms: linux
    description: Linux hosts (dpkg or rpm).
notes:
  - The record is written by the last play of C(site.yml) only after a verification that passed in the same
    run, on an untagged, non-check run that needed no further reboot; a verification that failed (or was
    not proven) removes it (C(playbooks/verify.yml)), so the next run is a full one.
requirements:
  - Python 3 on the node; C(systemctl) for O(units).
"""

EXAMPLES = r"""
- name: Is the node as the last converged run left it?
  gpudirect_state:
    inputs: "{{ gpudirect_state_inputs }}"
    units: [nvidia-persistenced.service]
    files: [/root/mok/signing-cert.der]
  register: node_state

- name: Record the converged state
  gpudirect_state:
    state: record
    inputs: "{{ gpudirect_state_inputs }}"
    units: [nvidia-persistenced.service]

- name: Forget the converged state of a node whose verification failed
  gpudirect_state:
    state: absent
    inputs: "{{ gpudirect_state_inputs | default('none') }}"
"""

RETURN = r"""
unchanged:
  description: The record exists, is readable and matches the node and the inputs.
  returned: always
  type: bool
  sample: true
differences:
  description: Why the node does not match the record, one line per component; empty when unchanged.
  returned: always
  type: list
  elements: str
  sample: ["running kernel: 6.1.0-50-amd64 -> 6.1.0-56-amd64", "configuration files changed: /etc/modprobe.d/x.conf"]
node_unchanged:
  description:
    - The node itself matches the record (its fingerprint), whatever the controller's inputs; false without a
      usable record.
  returned: always
  type: bool
  sample: true
changed_stages:
  description:
    - With per-stage O(inputs) (the C(gpudirect_stage_digests) filter, as JSON), the stages whose inputs differ
      from the record's; every stage when the record has no per-stage digests or none is usable.
  returned: always
  type: list
  elements: str
  sample: ["drivers"]
recorded_at:
  description: Modification time of the record (UTC, ISO 8601), or null when there is none.
  returned: always
  type: str
  sample: "2026-11-23T10:05:18Z"
path:
  description: The record's path.
  returned: always
  type: str
  sample: /var/lib/gpudirect/converged.json
summary:
  description: Sizes of the fingerprint (files watched, loaded watched modules, ACS functions, units, GPUs and NICs).
  returned: always
  type: dict
  sample: {"config_files": 212, "loaded_modules": 3, "acs_functions": 1, "units": 2, "devices": 9}
"""

import datetime
import json
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpudirect_host import C_LOCALE
from ansible.module_utils.gpudirect_state import (changed_stages, differences, fingerprint, node_differences,
                                                  own_units)


def unit_states(module, units):
    if not units:
        return {}
    if module.params["root"] != "/":
        return dict((u, "unknown") for u in units)
    systemctl = module.get_bin_path("systemctl")
    if not systemctl:
        return dict((u, "no systemctl") for u in units)
    # one line per unit, also for units that do not exist ("inactive"); rc is non-zero then
    _rc, out, _err = module.run_command([systemctl, "is-active"] + list(units), environ_update=dict(C_LOCALE))
    lines = out.splitlines()
    return dict((u, lines[i].strip() if i < len(lines) else "unknown") for i, u in enumerate(units))


def read_record(path, shown=None):
    """(record or None, reason when unusable or None, mtime or None); ``shown``
    is the path as the node knows it (``path`` may lie under another root)."""
    shown = shown or path
    if not os.path.exists(path):
        return None, "no record of a converged run at %s (first run, or the last one did not finish)" % shown, None
    try:
        mtime = os.path.getmtime(path)
        with open(path) as handle:
            record = json.load(handle)
    except (IOError, OSError, ValueError) as exc:
        return None, "the record %s is unreadable (%s); the run will rewrite it" % (shown, exc), None
    if not isinstance(record, dict):
        return None, "the record %s is not a JSON object; the run will rewrite it" % shown, mtime
    return record, None, mtime


def write_record(module, path, content):
    directory = os.path.dirname(path)
    try:
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o755)
        handle, tmp = tempfile.mkstemp(dir=directory, prefix=".converged.")
        with os.fdopen(handle, "w") as out:
            out.write(content)
        os.chmod(tmp, 0o600)
        os.rename(tmp, path)
    except (IOError, OSError) as exc:
        module.fail_json(msg="Cannot write the converged-state record %s: %s. Run with become (root), or set "
                             "gpudirect_state_record_path to a writable local path." % (path, exc), path=path)


def remove_record(module, node_path, path):
    """state=absent: remove the record and exit."""
    exists = os.path.lexists(node_path)
    if exists and not module.check_mode:
        try:
            os.unlink(node_path)
        except (IOError, OSError) as exc:
            module.fail_json(msg="Cannot remove the converged-state record %s: %s. Remove it by hand (the next run "
                                 "would otherwise skip the install stages on a node that failed verification)."
                                 % (path, exc), path=path)
    module.exit_json(changed=exists, path=path, unchanged=False, recorded_at=None, summary={},
                     differences=["the record was removed" if exists else "there was no record"])


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", default="/var/lib/gpudirect/converged.json"),
            state=dict(type="str", choices=["query", "record", "absent"], default="query"),
            inputs=dict(type="str", required=True),
            units=dict(type="list", elements="str", default=[]),
            files=dict(type="list", elements="path", default=[]),
            exclude=dict(type="list", elements="path", default=[]),
            root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if not params["inputs"].strip():
        module.fail_json(msg="inputs is empty: pass the controller's digests (the gpudirect_stage_digests filter, "
                             "as JSON), or the record could never tell a changed inventory from an unchanged one.")
    if not os.path.isdir(params["root"]):
        module.fail_json(msg="root %s is not a directory: leave it at / on a live host." % params["root"])
    path = params["path"]
    live = params["root"] == "/"
    node_path = os.path.join(params["root"], path.lstrip("/")) if not live else path
    if params["state"] == "absent":
        remove_record(module, node_path, path)
    units = list(params["units"]) + [u for u in own_units(params["root"]) if u not in params["units"]]
    current = {"inputs": params["inputs"],
               "fingerprint": fingerprint(params["root"], units=unit_states(module, units),
                                          runner=module if live else None, live=live, exclude=(path,) + tuple(params["exclude"]),
                                          files=params["files"])}
    record, unusable, mtime = read_record(node_path, path)
    reasons = [unusable] if unusable else differences(record, current)
    node_unchanged = not unusable and not node_differences(record, current)
    stages = changed_stages(None if unusable else (record or {}).get("inputs"), current["inputs"])
    fp = current["fingerprint"]
    result = dict(
        changed=False, path=path, unchanged=not reasons, differences=reasons, node_unchanged=node_unchanged,
        changed_stages=stages,
        recorded_at=(datetime.datetime.fromtimestamp(mtime, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
                     if mtime is not None else None),
        summary={"config_files": len(fp["config"]), "loaded_modules": len(fp["loaded_modules"]),
                 "acs_functions": len(fp["acs"]), "units": len(fp["units"]), "devices": len(fp["devices"])},
    )
    if params["state"] == "record":
        content = json.dumps(current, sort_keys=True, indent=1) + "\n"
        existing = None
        try:
            with open(node_path) as handle:
                existing = handle.read()
        except (IOError, OSError):
            pass
        if existing != content:
            result["changed"] = True
            if not module.check_mode:
                write_record(module, node_path, content)
        result["unchanged"] = True
        result["differences"] = []
        result["node_unchanged"] = True
        result["changed_stages"] = []
    module.exit_json(**result)


if __name__ == "__main__":
    main()
