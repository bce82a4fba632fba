#!/usr/bin/python
"""Take or release the controller-side lock that keeps two campaigns of the toolkit off the same nodes."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpudirect_fleet_lock
short_description: Take or release the fleet lock of a GPUDirect toolkit campaign, on the controller
description:
  - Runs on the controller (C(delegate_to localhost), C(run_once)). Each campaign (one run of C(site.yml) or
    C(playbooks/kernel_update.yml)) writes one entry, C(<dir>/<run_id>.json), naming the nodes it targets, who
    runs it (user@host, the ansible-playbook pid, the playbook) and when it started.
  - O(state=present) reads the other entries first. An entry is live while its ansible-playbook process runs
    (same controller host, the pid alive and still an Ansible process), or, for an entry written on another
    controller host (a shared O(dir)), until it has not been renewed for O(stale_after) hours. A live entry that targets any of
    O(hosts) fails the module before anything is done, naming the other campaign, its nodes in common and what
    to do. Stale entries are removed (those of another host are reported first).
  - Two campaigns that start at the same moment both write, then both read again; the one whose entry is older
    (or, at the same second, whose run id sorts first) keeps it, the other removes its own and fails.
  - Campaigns on disjoint nodes run side by side. The per-node lock (M(gpudirect.rdma.gpudirect_lock)) still guards each node
    against a run started from another inventory or controller that does not share O(dir).
  - O(state=renewed) is the campaign's heartbeat, at each stage of each batch (roles/gpudirect_drain tasks/stage.yml).
    It writes the time into this campaign's entry (C(renewed)), so that a campaign that runs for days stays live for
    other controllers while it works and goes stale O(stale_after) hours after it stopped renewing. An entry that is
    gone (removed as stale by another controller) is taken again as with O(state=present), conflicts checked first.
  - O(state=absent) removes this campaign's entry (same O(run_id)).
  - In check mode nothing is written or removed; a live campaign on the same nodes fails the same way.
options:
  dir:
    description: Directory of the entries on the controller; created when missing.
    type: path
    required: true
  state:
    description: C(present) takes the lock, C(renewed) renews this campaign's entry (its heartbeat), C(absent) releases it.
    type: str
    choices: [present, renewed, absent]
    default: present
  run_id:
    description: This campaign's id, the name of its entry; letters, digits, C(.), C(_) and C(-).
    type: str
    required: true
  hosts:
    description: Inventory names of the nodes this campaign targets (required with O(state=present)).
    type: list
    elements: str
    default: []
  controller:
    description: Who runs the campaign, user@host (the C(gpudirect_drain_holder) filter).
    type: str
    default: ""
  pid:
    description: The ansible-playbook process of the campaign on this controller (C(gpudirect_drain_holder)).
    type: int
  playbook:
    description: The playbook and play, for the message another campaign gets.
    type: str
    default: ""
  stale_after:
    description: Hours without a renewal after which an entry written on another controller host counts as stale.
    type: int
    default: 6
attributes:
  check_mode:
    support: full
    description: Reads the other entries, reports the stale ones and fails on a conflict as a real run does; writes
      and removes no entry.
  platform:
    support: full
    platforms: posix
    description: The controller; whether an entry's ansible-playbook process still runs is read from C(/proc).
extends_documentation_fragment:
  - gpudirect_attributes.no_diff
author:
  - GPUDirect RDMA toolkit maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Take the fleet lock for the nodes of this play
  gpudirect_fleet_lock:
    dir: "{{ inventory_dir }}/.fleet-lock"
    run_id: 20261127T101500Z-12345
    hosts: "{{ ansible_play_hosts_all }}"
    controller: "{{ holder.controller }}"
    pid: "{{ holder.pid }}"
    playbook: "{{ holder.playbook }}"
  delegate_to: localhost
  run_once: true

- name: Renew it at each stage of a batch (the campaign's heartbeat)
  gpudirect_fleet_lock:
    dir: "{{ inventory_dir }}/.fleet-lock"
    run_id: 20261127T101500Z-12345
    hosts: "{{ ansible_play_hosts_all }}"
    state: renewed
  delegate_to: localhost
  run_once: true

- name: Release it at the end of the campaign
  gpudirect_fleet_lock:
    dir: "{{ inventory_dir }}/.fleet-lock"
    run_id: 20261127T101500Z-12345
    state: absent
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
path:
  description: This campaign's entry.
  returned: always
  type: str
  sample: /srv/ansible/inventory/site/.fleet-lock/20261127T101500Z-12345.json
removed_stale:
  description: Entries found stale and removed, each with the reason.
  returned: always
  type: list
  elements: str
  sample: ["20261126T220000Z-4242 (root@bastion, pid 4242 is gone)"]
others:
  description: Live entries of other campaigns on other nodes (not a conflict), by run id.
  returned: always
  type: list
  elements: str
  sample: [20261127T090000Z-777]
"""

import json
import os
import re
import socket
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpudirect_lock import ansible_alive

RUN_ID_RE = re.compile(r"^[A-Za-z0-9._-]{1,128}$")


def _entries(directory):
    out = {}
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".json"):
            continue
        path = os.path.join(directory, name)
        try:
            with open(path) as handle:
                out[name[:-5]] = json.load(handle)
        except (IOError, OSError, ValueError):
            out[name[:-5]] = None
    return out


def liveness(entry, here, now, stale_after_h):
    """(live, why) of an entry: why says what made a dead one stale."""
    if not isinstance(entry, dict):
        return False, "unreadable entry"
    host = (entry.get("controller") or "").split("@")[-1]
    if host == here:
        if ansible_alive(entry.get("pid")):
            return True, ""
        return False, "%s, pid %s is gone" % (entry.get("controller"), entry.get("pid"))
    # the heartbeat: the later of its start and its last renewal
    last = max(float(entry.get("started") or 0), float(entry.get("renewed") or 0))
    age_h = (now - last) / 3600.0
    if age_h < stale_after_h:
        return True, ""
    return False, "%s on another controller, not renewed for %.0f h (stale_after %d h)" % (
        entry.get("controller"), age_h, stale_after_h)


def _conflicts(module, directory, run_id, hosts, here, now, own_started):
    """Live overlapping entries that win over this campaign, and the stale ones."""
    p = module.params
    conflicts, stale, others = [], [], []
    for other_id, entry in _entries(directory).items():
        if other_id == run_id:
            continue
        live, why = liveness(entry, here, now, p["stale_after"])
        if not live:
            stale.append((other_id, why))
            continue
        common = sorted(set(entry.get("hosts") or []) & set(hosts))
        if not common:
            others.append(other_id)
            continue
        if own_started is not None and (float(entry.get("started") or 0), other_id) > (own_started, run_id):
            continue   # a younger campaign that lost the race; it removes its own entry
        conflicts.append((other_id, entry, common))
    return conflicts, stale, others


def _refuse(module, directory, conflicts, hosts):
    lines = []
    for other_id, entry, common in conflicts:
        shown = ", ".join(common[:10]) + (" and %d more" % (len(common) - 10) if len(common) > 10 else "")
        lines.append("%s by %s (pid %s, %s), started %s, holds %d of this run's %d nodes: %s" % (
            other_id, entry.get("controller"), entry.get("pid"), entry.get("playbook") or "unknown playbook",
            time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(float(entry.get("started") or 0))), len(common),
            len(hosts), shown))
    module.fail_json(msg="Another campaign of the toolkit works on these nodes: %s. Wait for it to end, or run this "
                         "one on other nodes (--limit). If that campaign is dead (its controller lost), remove its "
                         "entry from %s." % ("; ".join(lines), directory),
                     conflicts=[c[0] for c in conflicts])


def take(module):
    p = module.params
    directory, run_id = p["dir"], p["run_id"]
    hosts = sorted(set(p["hosts"]))
    if not hosts:
        module.fail_json(msg="hosts is empty: name the nodes this campaign targets")
    here = socket.gethostname()
    path = os.path.join(directory, run_id + ".json")
    result = dict(changed=False, path=path, removed_stale=[], others=[])
    if not os.path.isdir(directory):
        if module.check_mode:
            module.exit_json(**result)
        try:
            os.makedirs(directory, 0o755)
        except OSError as exc:
            module.fail_json(msg="cannot create the fleet lock directory %s: %s (set gpudirect_drain_fleet_lock_dir to "
                                 "a writable directory)" % (directory, exc))
    now = time.time()
    conflicts, stale, others = _conflicts(module, directory, run_id, hosts, here, now, None)
    if conflicts:
        _refuse(module, directory, conflicts, hosts)
    for other_id, why in stale:
        if not module.check_mode:
            try:
                os.unlink(os.path.join(directory, other_id + ".json"))
            except OSError:
                pass
        module.warn("fleet lock: removed the stale entry %s (%s)" % (other_id, why))
        result["removed_stale"].append("%s (%s)" % (other_id, why))
    result["others"] = others
    if module.check_mode:
        module.exit_json(**result)
    entry = dict(run_id=run_id, hosts=hosts, controller=p["controller"] or "unknown@%s" % here, pid=p["pid"],
                 playbook=p["playbook"], started=now)
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        json.dump(entry, handle, indent=1, sort_keys=True)
    os.rename(tmp, path)
    # the race: a campaign that wrote at the same moment; the older entry keeps the lock
    conflicts, _stale, _others = _conflicts(module, directory, run_id, hosts, here, time.time(), now)
    if conflicts:
        os.unlink(path)
        _refuse(module, directory, conflicts, hosts)
    module.exit_json(**result)


def renew(module):
    """This campaign's heartbeat: the time written into its entry, or the entry taken again when it is gone."""
    p = module.params
    path = os.path.join(p["dir"], p["run_id"] + ".json")
    try:
        with open(path) as handle:
            entry = json.load(handle)
    except (IOError, OSError, ValueError):
        entry = None
    if not isinstance(entry, dict) or entry.get("run_id") != p["run_id"]:
        module.warn("fleet lock: this campaign's entry %s was gone (removed as stale by another controller?): taken "
                    "again" % path)
        take(module)
    result = dict(changed=False, path=path, removed_stale=[], others=[])
    if not module.check_mode:
        entry["renewed"] = time.time()
        tmp = path + ".tmp"
        with open(tmp, "w") as handle:
            json.dump(entry, handle, indent=1, sort_keys=True)
        os.rename(tmp, path)
    module.exit_json(**result)


def release(module):
    p = module.params
    path = os.path.join(p["dir"], p["run_id"] + ".json")
    result = dict(changed=False, path=path, removed_stale=[], others=[])
    if os.path.exists(path) and not module.check_mode:
        os.unlink(path)
    module.exit_json(**result)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            dir=dict(type="path", required=True),
            state=dict(type="str", choices=["present", "renewed", "absent"], default="present"),
            run_id=dict(type="str", required=True),
            hosts=dict(type="list", elements="str", default=[]),
            controller=dict(type="str", default=""),
            pid=dict(type="int"),
            playbook=dict(type="str", default=""),
            stale_after=dict(type="int", default=6),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if not RUN_ID_RE.match(p["run_id"]):
        module.fail_json(msg="run_id %r: use letters, digits, '.', '_' and '-' (1-128 characters)" % p["run_id"])
    if p["stale_after"] < 1:
        module.fail_json(msg="stale_after must be at least 1 hour (gpudirect_drain_fleet_lock_stale_after), got %d"
                             % p["stale_after"])
    if p["state"] == "present":
        take(module)
    if p["state"] == "renewed":
        renew(module)
    release(module)


if __name__ == "__main__":
    main()
