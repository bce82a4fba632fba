#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Read, drain, wait for, resume and relabel one Slurm node with scontrol (see DOCUMENTATION)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpudirect_slurm_node
short_description: Drain a Slurm node, wait until it runs no job, resume it, keeping other people's drains alone
description:
  - Runs on a host with the Slurm client (C(delegate_to), the C(gpudirect_drain) role's
    C(gpudirect_drain_delegate_to)), a login or controller node whose C(scontrol) reaches C(slurmctld).
  - Reads the node with C(scontrol -o show node NODE) (list form, C locale) and judges it with
    C(module_utils/gpudirect_slurm.py), from the base state and flags, Slurm's DRAINED (drain flag, no job left) and
    DRAINING (drain flag, jobs running or completing), out of service or not, and whose drain it is
    (C(owner)), C(toolkit) when the node is out of service with a reason starting with O(owner_prefix),
    C(other) when it is out of service for another reason (an admin's drain, or Slurm's own such as
    C(Not responding) or C(Kill task failed)).
  - O(action=query) only reads (also in check mode).
  - O(action=drain) leaves a node out of service for another owner as it is (its state and reason are kept,
    C(kept)); otherwise runs C(scontrol update NodeName=NODE State=DRAIN Reason=REASON), unless the node is
    drained already with exactly O(reason). Running jobs go on; O(action=wait) waits for them.
  - O(action=wait) reads the node every O(interval) seconds until Slurm calls it DRAINED, at most O(timeout)
    seconds. A timeout is not a failure (C(timed_out), the role decides); the module fails when the drain flag
    disappears (someone resumed the node, so nothing disruptive may follow), or is not there to begin with.
  - O(action=resume) runs C(scontrol update NodeName=NODE State=RESUME) on a node this toolkit took out of
    service (owner C(toolkit)) only; another owner's node is kept, a node in service is left as it is. A
    toolkit drain whose C(slurmd) does not answer (flag C(NOT_RESPONDING)) fails instead; start C(slurmd) on
    the node first.
  - O(action=reason) runs C(scontrol update NodeName=NODE Reason=REASON) on a toolkit drain only (the stage the
    run is at, for C(sinfo -R)).
  - A C(scontrol) that fails (C(slurmctld) unreachable, munge, an unknown node) fails the module with its exit
    status, its output and what to check.
options:
  node:
    description:
      - The node's name in Slurm (its C(NodeName)), one node, no host list. The role passes
        C(gpudirect_drain_slurm_node), by default the inventory name.
    type: str
    required: true
  action:
    description: What to do (see the description).
    type: str
    choices: [query, drain, wait, resume, reason]
    default: query
  reason:
    description:
      - The reason given to Slurm; required with O(action=drain) and O(action=reason).
      - It must start with O(owner_prefix), so that a later run (and O(action=resume)) recognises the drain as this
        toolkit's.
    type: str
  owner_prefix:
    description: The start of every reason this toolkit gives Slurm; a reason that starts with it marks a toolkit drain.
    type: str
    default: "gpudirect run "
  timeout:
    description: Seconds O(action=wait) waits for the node's jobs to end.
    type: int
    default: 3600
  interval:
    description: Seconds between two reads of O(action=wait).
    type: int
    default: 30
  scontrol:
    description: C(scontrol), a name looked up in C(PATH) (and C(/usr/sbin), C(/usr/local/bin), C(/opt/slurm/bin)) or a path.
    type: str
    default: scontrol
extends_documentation_fragment:
  - gpudirect_attributes
attributes:
  check_mode:
    support: full
    description: Reads the node and says what it would do (C(changed), C(command)); runs no C(scontrol update).
      O(action=wait) reads once and does not wait (nor fails on a node not drained, since the drain did not run).
  diff_mode:
    support: none
    description: Returns no diff; C(before) and C(node) show the node before and after.
notes:
  - C(scontrol update) needs a Slurm operator or administrator (root, the SlurmUser, or AdminLevel=Operator in
    C(sacctmgr)); reading needs none.
  - Slurm keeps the reason this module gives through a reboot of the node (it replaces only an empty reason or
    C(Not responding) with C(Node unexpectedly rebooted)), so a node the toolkit drained and rebooted is still its own.
requirements:
  - The Slurm client (C(scontrol)) on the host the module runs on, able to reach C(slurmctld).
author:
  - GPUDirect RDMA toolkit maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Drain the node in Slurm (an admin's drain is kept as it is)
  gpudirect_slurm_node:
    node: "{{ gpudirect_drain_slurm_node }}"
    action: drain
    reason: "gpudirect run 20261127T101500Z-12345: drain"
  delegate_to: "{{ gpudirect_drain_delegate_to }}"
  register: slurm_drain

- name: Wait until its jobs have ended
  gpudirect_slurm_node:
    node: "{{ gpudirect_drain_slurm_node }}"
    action: wait
    timeout: 3600
    interval: 30
  delegate_to: "{{ gpudirect_drain_delegate_to }}"
  register: slurm_wait
  when: not slurm_drain.kept

- name: Put it back into service once verified (only the toolkit's own drain)
  gpudirect_slurm_node:
    node: "{{ gpudirect_drain_slurm_node }}"
    action: resume
  delegate_to: "{{ gpudirect_drain_delegate_to }}"
"""

RETURN = r"""
before:
  description: The node before anything was done (C(module_utils/gpudirect_slurm.py)'s C(node_status)).
  returned: always
  type: dict
  contains:
    name:
      description: Slurm's NodeName.
      type: str
    state:
      description: The state as scontrol prints it.
      type: str
      sample: MIXED+DRAIN
    base:
      description: The base state (IDLE, ALLOCATED, MIXED, DOWN, ERROR, FUTURE, UNKNOWN).
      type: str
    flags:
      description: The state flags (DRAIN, COMPLETING, NOT_RESPONDING for an old C(*) suffix, ...).
      type: list
      elements: str
    reason:
      description: The reason, without the C([user@time]) stamp; null when there is none.
      type: str
    reason_user:
      description: Who set the reason.
      type: str
    reason_time:
      description: When the reason was set.
      type: str
    drain:
      description: The DRAIN flag is set.
      type: bool
    drained:
      description: Drained with no job left (Slurm's DRAINED).
      type: bool
    draining:
      description: Drained with jobs running or completing (Slurm's DRAINING).
      type: bool
    jobs:
      description: Jobs run or complete on the node (ALLOCATED, MIXED or COMPLETING).
      type: bool
    out_of_service:
      description: Drained, down, failed, in maintenance, not responding, powered down or rebooting.
      type: bool
    owner:
      description: C(toolkit), C(other), or null for a node in service.
      type: str
node:
  description: The node after the action (the same as C(before) when nothing was run, and in check mode).
  returned: always
  type: dict
owner:
  description:
    - C(node)'s owner, C(toolkit), C(other) or null (in service).
    - Right after O(action=resume) Slurm shows the node C(IDLE+NOT_RESPONDING) with no reason until C(slurmd) answers
      its ping (seconds), so C(owner) may read C(other) then; C(changed) says the resume ran.
  returned: always
  type: str
kept:
  description: The node was left as it is because it is out of service for another owner.
  returned: always
  type: bool
command:
  description: The C(scontrol update) run (or, in check mode, that would run); null when none.
  returned: always
  type: list
  elements: str
msg:
  description: What was done, in one sentence.
  returned: always
  type: str
timed_out:
  description: The node still ran jobs when O(timeout) passed.
  returned: when O(action=wait)
  type: bool
waited:
  description: Seconds O(action=wait) waited.
  returned: when O(action=wait)
  type: int
"""

import os
import re
import shlex
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpudirect_host import C_LOCALE
from ansible.module_utils.gpudirect_slurm import describe, node_status, parse_node

# where Slurm clients live besides PATH (source builds, ParallelCluster, Bright/OpenHPC)
EXTRA_DIRS = ["/usr/sbin", "/usr/local/bin", "/opt/slurm/bin", "/cm/shared/apps/slurm/current/bin"]
NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def hint(output):
    """What to check after scontrol failed with ``output``."""
    text = output.lower()
    if "not found" in text or "invalid node name" in text:
        return ("Slurm knows no node by that name: set gpudirect_drain_slurm_node to the node's NodeName "
                "(scontrol show node lists them; by default it is the inventory name)")
    if "access/permission denied" in text or "invalid user" in text:
        return ("scontrol update needs a Slurm operator or administrator: run it as root (become) or as the SlurmUser, "
                "or give the user AdminLevel=Operator with sacctmgr")
    if "munge" in text or "authentication" in text or "credential" in text:
        return ("munge refused the request: munged must run on this host with the cluster's munge.key "
                "(check with munge -n | ssh <controller> unmunge) and the clocks must agree")
    return ("check that slurmctld runs and that this host reaches it (scontrol ping): munged running with the "
            "cluster's key, slurm.conf (or configless SlurmctldHost) pointing at the controller; and that "
            "gpudirect_drain_slurm_node is the node's NodeName")


class SlurmNode:
    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.node = module.params["node"]
        self.scontrol = self._scontrol()

    def _scontrol(self):
        name = self.params["scontrol"]
        path = self.module.get_bin_path(name, opt_dirs=EXTRA_DIRS)
        if path is None:
            self.module.fail_json(
                msg="%s (the Slurm client) is not found on %s (PATH, %s): install the Slurm client there, give the "
                    "module the path of scontrol, or set gpudirect_drain_delegate_to to a host that has it (a login "
                    "or controller node of the cluster)" % (name, os.uname()[1], ", ".join(EXTRA_DIRS)))
        return path

    def run(self, args, **extra):
        argv = [self.scontrol] + args
        rc, out, err = self.module.run_command(argv, environ_update=dict(C_LOCALE))
        if rc != 0:
            said = (err or "").strip() or (out or "").strip() or "no output"
            self.module.fail_json(msg="%s failed (rc %d) for node %s: %s. %s." % (
                " ".join(shlex.quote(arg) for arg in argv), rc, self.node, said, hint(said)), rc=rc, stdout=out, stderr=err, cmd=argv, **extra)
        return out

    def read(self, **extra):
        out = self.run(["-o", "show", "node", self.node], **extra)
        try:
            fields = parse_node(out)
        except ValueError as exc:
            self.module.fail_json(msg="cannot read scontrol's answer for node %s: %s" % (self.node, exc),
                                  stdout=out, **extra)
        if fields["NodeName"] != self.node:
            self.module.fail_json(msg="scontrol answered for node %s when asked for %s" % (fields["NodeName"], self.node),
                                  stdout=out, **extra)
        return node_status(fields, self.params["owner_prefix"])

    def update(self, before, *assignments):
        """Run (not in check mode) ``scontrol update NodeName=NODE ...``; the node's status after it."""
        command = [self.scontrol, "update", "NodeName=%s" % self.node] + list(assignments)
        if self.module.check_mode:
            return command, before
        self.run(command[1:], before=before)
        return command, self.read(before=before)

    def result(self, before, node, msg, changed=False, kept=False, command=None, **more):
        out = dict(changed=changed, before=before, node=node, owner=node["owner"], kept=kept, command=command,
                   msg=msg)
        out.update(more)
        return out

    # --- actions ----------------------------------------------------------------------------------

    def query(self):
        status = self.read()
        return self.result(status, status, "%s: %s" % (self.node, describe(status)))

    def drain(self):
        reason = self.params["reason"]
        before = self.read()
        if before["out_of_service"] and before["owner"] == "other":
            return self.result(before, before, "%s is out of service already (%s): its state and reason are kept, "
                               "this run does not drain it" % (self.node, describe(before)), kept=True)
        if before["drain"] and before["reason"] == reason:
            return self.result(before, before, "%s is drained already with this reason (%s)"
                               % (self.node, describe(before)))
        command, after = self.update(before, "State=DRAIN", "Reason=%s" % reason)
        if not self.module.check_mode and not after["drain"]:
            self.module.fail_json(msg="scontrol accepted the drain of %s, but the node is not drained (%s): check who "
                                      "changes it" % (self.node, describe(after)), before=before, node=after)
        return self.result(before, after, "%s %s (was %s)" % (
            self.node, "would be drained" if self.module.check_mode else "drained", describe(before)),
            changed=True, command=command)

    def _not_drained(self, status, before, waited=None):
        """Fail: the node lacks the drain flag (``waited`` None: before the wait; else after that many seconds)."""
        if waited is None:
            msg = ("%s is not drained in Slurm (%s): drain it first; nothing disruptive may follow"
                   % (self.node, describe(status)))
        else:
            msg = ("%s is no longer drained in Slurm (%s) after %d s of waiting: someone resumed it, so nothing "
                   "disruptive may follow; drain it again, or leave it in service" % (self.node, describe(status), waited))
        self.module.fail_json(msg=msg, before=before, node=status, owner=status["owner"], waited=waited or 0)

    def wait(self):
        timeout, interval = self.params["timeout"], self.params["interval"]
        before = self.read()
        if self.module.check_mode:
            # the drain before it did not run in check mode: say what is there, wait for nothing
            return self.result(before, before, "%s: %s (check mode: not waited%s)" % (
                self.node, describe(before), "" if before["drain"] else "; not drained yet"), timed_out=False, waited=0)
        if not before["drain"]:
            self._not_drained(before, before)
        start = time.monotonic()
        status, waited = before, 0
        while not status["drained"]:
            waited = int(time.monotonic() - start)
            if waited >= timeout:
                return self.result(before, status, "%s still runs jobs after %d s (%s)" % (
                    self.node, waited, describe(status)), timed_out=True, waited=waited)
            time.sleep(min(interval, timeout - waited))
            status = self.read(before=before)
            waited = int(time.monotonic() - start)
            if not status["drain"]:
                self._not_drained(status, before, waited)
        if before["owner"] != "other" and status["owner"] == "other":
            self.module.warn("the reason of %s changed while waiting (%s): it is no longer this toolkit's drain"
                             % (self.node, describe(status)))
        return self.result(before, status, "%s is drained, no job left (%s), after %d s" % (
            self.node, describe(status), waited), timed_out=False, waited=waited)

    def resume(self):
        before = self.read()
        if not before["out_of_service"]:
            return self.result(before, before, "%s is in service (%s): nothing to resume" % (self.node, describe(before)))
        if before["owner"] != "toolkit":
            return self.result(before, before, "%s is out of service for another reason (%s): its state and reason "
                               "are kept, this run does not resume it" % (self.node, describe(before)), kept=True)
        if "NOT_RESPONDING" in before["flags"]:
            self.module.fail_json(
                msg="%s is this toolkit's drain, but its slurmd does not answer the controller (%s): start slurmd on "
                    "the node (systemctl status slurmd), then resume it (scontrol update NodeName=%s State=RESUME)"
                    % (self.node, describe(before), self.node), before=before, node=before, owner=before["owner"])
        command, after = self.update(before, "State=RESUME")
        if not self.module.check_mode and after["drain"]:
            self.module.warn("scontrol accepted the resume of %s, but it still shows the drain flag (%s)"
                             % (self.node, describe(after)))
        # Slurm 22.05 pings slurmd at a resume: the node reads IDLE+NOT_RESPONDING until it answers
        pinged = "" if self.module.check_mode or after["drain"] or "NOT_RESPONDING" not in after["flags"] else (
            "; it shows %s until slurmd answers Slurm's ping" % after["state"])
        return self.result(before, after, "%s %s (was %s)%s" % (
            self.node, "would be resumed" if self.module.check_mode else "resumed", describe(before), pinged),
            changed=True, command=command)

    def reason(self):
        reason = self.params["reason"]
        before = self.read()
        if before["owner"] != "toolkit":
            return self.result(before, before, "%s is not this toolkit's drain (%s): its reason is kept"
                               % (self.node, describe(before)), kept=before["owner"] == "other")
        if before["reason"] == reason:
            return self.result(before, before, "%s has this reason already" % self.node)
        command, after = self.update(before, "Reason=%s" % reason)
        return self.result(before, after, "%s: reason %s \"%s\"" % (
            self.node, "would be" if self.module.check_mode else "set to", reason), changed=True, command=command)


def check_params(module):
    params = module.params
    if not NODE_NAME.match(params["node"] or ""):
        module.fail_json(msg="node must be one Slurm node name (letters, digits, '.', '_', '-'), not %r: a host list "
                             "or a blank would reach other nodes (gpudirect_drain_slurm_node)" % params["node"])
    if not (params["owner_prefix"] or "").strip():
        module.fail_json(msg="owner_prefix must not be empty: every reason would then count as this toolkit's, and "
                             "an admin's drain would be resumed")
    if params["action"] in ("drain", "reason"):
        reason = (params["reason"] or "").strip()
        if not reason:
            module.fail_json(msg="action=%s needs a reason (what the run does to the node)" % params["action"])
        if "\n" in reason or not reason.startswith(params["owner_prefix"]):
            module.fail_json(msg="the reason %r must be one line starting with owner_prefix %r: a later run could not "
                                 "tell this drain as the toolkit's and would never resume the node"
                                 % (reason, params["owner_prefix"]))
        params["reason"] = reason
    if params["timeout"] < 0 or params["interval"] < 1:
        module.fail_json(msg="timeout must be 0 or more seconds and interval 1 or more (got %d and %d)"
                             % (params["timeout"], params["interval"]))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            node=dict(type="str", required=True),
            action=dict(type="str", choices=["query", "drain", "wait", "resume", "reason"], default="query"),
            reason=dict(type="str"),
            owner_prefix=dict(type="str", default="gpudirect run "),
            timeout=dict(type="int", default=3600),
            interval=dict(type="int", default=30),
            scontrol=dict(type="str", default="scontrol"),
        ),
        supports_check_mode=True,
    )
    check_params(module)
    slurm = SlurmNode(module)
    module.exit_json(**getattr(slurm, module.params["action"])())


if __name__ == "__main__":
    main()
