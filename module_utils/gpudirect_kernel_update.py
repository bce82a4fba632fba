# -*- coding: utf-8 -*-
"""The kernel update campaign: which kernel packages every node gets, and which nodes need them.

playbooks/kernel_update.yml plans before it locks or drains anything (issue #29,
outcome 2). ``library/gpudirect_plan_kernel_update.py`` reads each node's kernel packages
(installed version, candidate, every version its repositories offer), its running
and default boot kernel, a boot hold left by a failed run and the campaign record
of an earlier run; the controller filter ``kernel_update_campaign`` then decides,
once for the whole run:

* the target: one version per package, the same on every node. From the knob
  ``gpudirect_kernel_update_target`` when set; else from the campaign record that an earlier
  run left on nodes not done yet (a rollout over days keeps its kernel); else the
  candidate the nodes' repositories offer now, which must be the same on every node;
* for each node whether it needs the update (packages not at the target, a chain
  that did not finish: it boots another kernel than it runs, or a hold), with the
  reason in one sentence; only those nodes are locked and drained;
* the refusals, before anything changes: a target a node's repositories do not
  offer, nodes whose repositories disagree, a package no repository has, a target
  older than what a node has installed (the update never downgrades).

Parsers (real outputs in tests/fixtures/kernel_update, sources beside them):

``parse_apt_policy``
    ``LC_ALL=C apt-cache policy PKG...``: per package ``Installed``, ``Candidate`` and
    the version table, which apt prints newest first (the order used to tell an older
    target from a newer one); a package apt does not know is not printed at all.
``parse_rpm_versions``
    ``rpm -q --qf '%{NAME} %{EPOCHNUM}:%{VERSION}-%{RELEASE}\\n'`` and
    ``dnf repoquery --showduplicates --qf`` with the same format: ``NAME E:V-R`` lines;
    rpm's ``package kernel-devel is not installed`` lines name a missing package.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

# the knob that pins the target, named in every refusal
KNOB = "gpudirect_kernel_update_target"
PACKAGES_KNOB = "gpudirect_kernel_update_packages"

_APT_PACKAGE = re.compile(r"^(\S+):$")
_APT_FIELD = re.compile(r"^\s+(Installed|Candidate):\s*(\S+)\s*$")
# "     6.1.192-2 500" / " *** 5.2.15-2+b8 100": a version line of the table (the
# origin lines under it are "        500 http://..." and start with the priority)
_APT_VERSION = re.compile(r"^ (\*\*\*| {3}) (\S+) (-?\d+)\s*$")
_RPM_LINE = re.compile(r"^(\S+) (?:(\d+):)?(\S+-\S+)$")
_RPM_MISSING = re.compile(r"^package (\S+) is not installed$")


def _lines(text, what):
    if not isinstance(text, str):
        raise ValueError("%s: expected text, got %s" % (what, type(text).__name__))
    return text.splitlines()


def parse_apt_policy(text):
    """``apt-cache policy`` output -> {package: {installed, candidate, versions}}.

    ``installed`` and ``candidate`` are None for apt's ``(none)``; ``versions`` lists
    every version of the table, newest first, as apt orders it. A line that fits
    nothing apt prints raises ValueError naming it (a localized or garbled output
    must not read as "nothing installed")."""
    packages, current, in_table = {}, None, False
    for number, line in enumerate(_lines(text, "apt-cache policy"), 1):
        if not line.strip():
            continue
        match = _APT_PACKAGE.match(line)
        if match:
            current = packages.setdefault(match.group(1), {"installed": None, "candidate": None, "versions": []})
            in_table = False
            continue
        if current is None:
            raise ValueError("apt-cache policy line %d is not under a package name: %r" % (number, line))
        match = _APT_FIELD.match(line)
        if match:
            value = None if match.group(2) == "(none)" else match.group(2)
            current[match.group(1).lower()] = value
            continue
        if line.strip() == "Version table:":
            in_table = True
            continue
        if line.strip().startswith("Package pin:"):
            continue
        match = _APT_VERSION.match(line)
        if in_table and match:
            current["versions"].append(match.group(2))
            continue
        if in_table and re.match(r"^\s+-?\d+ \S", line):
            continue  # an origin of the version above: "500 http://deb.debian.org/debian bookworm/main amd64 Packages"
        raise ValueError("apt-cache policy line %d is not what apt prints (run it with LC_ALL=C): %r" % (number, line))
    for name, package in packages.items():
        for key in ("installed", "candidate"):
            if package[key] and package[key] not in package["versions"]:
                raise ValueError("apt-cache policy: %s's %s version %s is not in its version table"
                                 % (name, key, package[key]))
    return packages


def parse_rpm_versions(text, what="rpm -q"):
    """``NAME E:V-R`` lines -> {name: [version, ...]} in the order printed; the epoch is
    dropped when 0. rpm's ``package NAME is not installed`` gives NAME an empty list."""
    found = {}
    for number, line in enumerate(_lines(text, what), 1):
        line = line.strip()
        if not line:
            continue
        missing = _RPM_MISSING.match(line)
        if missing:
            found.setdefault(missing.group(1), [])
            continue
        match = _RPM_LINE.match(line)
        if not match:
            raise ValueError("%s line %d is not 'NAME EPOCH:VERSION-RELEASE': %r" % (what, number, line))
        epoch = match.group(2)
        version = match.group(3) if epoch in (None, "0") else "%s:%s" % (epoch, match.group(3))
        versions = found.setdefault(match.group(1), [])
        if version not in versions:
            versions.append(version)
    return found


def normalise_target(value, packages):
    """``gpudirect_kernel_update_target`` as {package: version}: a string is the version of every
    package (Debian's linux-image-amd64 and linux-headers-amd64 share one), a mapping
    names each; empty -> {}. ValueError naming the knob otherwise."""
    if value in (None, "", {}):
        return {}
    if isinstance(value, str):
        version = value.strip()
        if not version or any(c.isspace() for c in version) or "=" in version:
            raise ValueError("%s=%r must be a package version such as 6.1.192-2 (apt-cache policy "
                             "linux-image-amd64 lists them), or a mapping package: version" % (KNOB, value))
        return dict((name, version) for name in packages)
    if isinstance(value, dict):
        unknown = sorted(set(value) - set(packages))
        missing = sorted(set(packages) - set(value))
        if unknown or missing:
            raise ValueError("%s names %s but the kernel packages are %s (%s): give a version for each of them, "
                             "or one version for all" % (KNOB, ", ".join(sorted(value)) or "nothing",
                                                         ", ".join(packages), PACKAGES_KNOB))
        bad = sorted(name for name, version in value.items()
                     if not isinstance(version, str) or not version.strip() or " " in version.strip())
        if bad:
            raise ValueError("%s: the version of %s must be a package version such as 6.1.192-2" % (KNOB, ", ".join(bad)))
        return dict((name, version.strip()) for name, version in value.items())
    raise ValueError("%s=%r must be a version string or a mapping package: version, not %s"
                     % (KNOB, value, type(value).__name__))


def _show(target):
    return ", ".join("%s %s" % (name, target[name]) for name in sorted(target))


def _relation(package, wanted):
    """Where the installed version stands against ``wanted``: same, older, newer or unknown."""
    installed = package.get("installed")
    if installed is None or installed == []:
        return "missing"
    if isinstance(installed, list):
        # EL installs kernels side by side (installonly): the target is there or it is not
        return "same" if wanted in installed else "other"
    if installed == wanted:
        return "same"
    versions = package.get("versions") or []
    if package.get("ordered") and installed in versions and wanted in versions:
        # apt's table is newest first
        return "older" if versions.index(installed) > versions.index(wanted) else "newer"
    return "other"


def _node_check(node):
    if not isinstance(node, dict) or not isinstance(node.get("packages"), dict):
        raise ValueError("a node's gpudirect_plan_kernel_update result has no packages (got %r)" % (node,))
    return node


def decide_target(nodes, knob_value, packages):
    """The campaign's target over ``nodes`` ({host: gpudirect_plan_kernel_update result}).

    Returns (target {package: version}, source sentence, errors [sentences])."""
    target = normalise_target(knob_value, packages)
    errors = []
    if target:
        return target, "%s (the %s knob)" % (_show(target), KNOB), errors
    # a campaign an earlier run started and not every node finished keeps its target
    records = {}
    for host in sorted(nodes):
        record = _node_check(nodes[host]).get("record") or {}
        recorded = record.get("target") if isinstance(record, dict) else None
        if isinstance(recorded, dict) and recorded:
            key = tuple(sorted(recorded.items()))
            records.setdefault(key, []).append(host)
    if records:
        unfinished = dict((key, hosts) for key, hosts in records.items()
                          if any(not _at(nodes[h], dict(key))[0] for h in nodes))
        if len(unfinished) > 1:
            errors.append("the nodes carry the records of %d different kernel update campaigns not finished on every "
                          "node: %s. Set %s to the one to finish (or to a new one)"
                          % (len(unfinished), "; ".join("%s on %s" % (_show(dict(k)), ", ".join(h))
                                                        for k, h in sorted(unfinished.items())), KNOB))
            return {}, "", errors
        if unfinished:
            key, hosts = next(iter(unfinished.items()))
            return (dict(key), "%s (recorded by an earlier run of this campaign on %s; %s starts another)"
                    % (_show(dict(key)), ", ".join(hosts), KNOB), errors)
    # the candidates the repositories offer now: the same on every node
    candidates = {}
    for host in sorted(nodes):
        node = nodes[host]
        offered = {}
        for name in packages:
            package = node["packages"].get(name)
            if not package or not package.get("candidate"):
                errors.append("%s: no repository of the node offers %s (check its package sources, or %s)"
                              % (host, name, PACKAGES_KNOB))
            else:
                offered[name] = package["candidate"]
        if len(offered) == len(packages):
            candidates.setdefault(tuple(sorted(offered.items())), []).append(host)
    if errors:
        return {}, "", errors
    if len(candidates) > 1:
        errors.append("the nodes' repositories offer different kernels: %s. One campaign puts one kernel on every "
                      "node: set %s to the version to roll out (e.g. -e %s=%s), after checking that every node's "
                      "mirror offers it" % ("; ".join("%s on %s" % (_show(dict(k)), ", ".join(h))
                                                     for k, h in sorted(candidates.items())),
                                           KNOB, KNOB, sorted(candidates)[-1][0][1]))
        return {}, "", errors
    if not candidates:
        return {}, "", ["no node to plan"]
    key = next(iter(candidates))
    return dict(key), "%s (the newest the nodes' repositories offer, resolved once at the start of this run)" % _show(dict(key)), errors


def _at(node, target):
    """(True, sentence) when the node has every package at the target and runs what it boots."""
    behind = []
    for name in sorted(target):
        package = node["packages"].get(name) or {}
        relation = _relation(package, target[name])
        if relation == "missing":
            behind.append("%s not installed" % name)
        elif relation != "same":
            installed = package.get("installed")
            behind.append("%s %s installed" % (name, ", ".join(installed) if isinstance(installed, list) else installed))
    if behind:
        return False, "%s; target %s" % ("; ".join(behind), _show(target))
    if node.get("hold"):
        hold = node["hold"] if isinstance(node["hold"], dict) else {}
        return False, ("its packages are at the target, but an earlier run held its default boot kernel on %s "
                       "after the update's chain failed: the chain runs again" % (hold.get("kernel") or node.get("running")))
    if node.get("default") and node.get("running") and node["default"] != node["running"]:
        return False, ("its packages are at the target, but it runs %s and boots %s next: the chain (DKMS, one "
                       "reboot, verification) did not finish" % (node["running"], node["default"]))
    # done only once verified on the target: the campaign's record says on which kernel it last was
    # (null from the install on); a record without the key predates it and counts as verified
    record = node.get("record") if isinstance(node.get("record"), dict) else {}
    if record.get("target") == target and "verified" in record and record["verified"] != node.get("running"):
        return False, ("it runs the target %s but was not verified on it (an earlier run stopped after its reboot, "
                       "before its verification passed): verified in this run, and resumed only when it passes"
                       % (node.get("running") or "?"))
    verified = ", verified on it" if record.get("target") == target and record.get("verified") else ""
    return True, "at the target %s, running %s%s" % (_show(target), node.get("running") or "?", verified)


def node_plan(host, node, target):
    """{pending, reason, errors} of one node for ``target``."""
    errors = []
    for name in sorted(target):
        package = node["packages"].get(name) or {}
        relation = _relation(package, target[name])
        if relation == "newer":
            errors.append("%s: %s %s is installed, newer than the campaign's %s: kernel_update.yml does not "
                          "downgrade kernels; set %s to %s or leave %s out (--limit)"
                          % (host, name, package["installed"], target[name], KNOB, package["installed"], host))
        elif relation != "same" and target[name] not in (package.get("versions") or []):
            errors.append("%s: no repository of the node offers %s %s (it offers %s): fix its package sources, "
                          "or set %s to a version every node offers"
                          % (host, name, target[name], ", ".join(package.get("versions") or []) or "no version", KNOB))
    done, reason = _at(node, target)
    return {"pending": not done, "reason": reason, "errors": errors}


def campaign(nodes, knob_value, packages):
    """The whole decision: {target, source, pending: {host: reason}, done: {host: reason}, errors}."""
    if not isinstance(nodes, dict):
        raise ValueError("expected {host: gpudirect_plan_kernel_update result}, got %s" % type(nodes).__name__)
    if isinstance(packages, str) or not isinstance(packages, (list, tuple)) or not packages:
        raise ValueError("%s must be a non-empty list of package names" % PACKAGES_KNOB)
    for host in nodes:
        _node_check(nodes[host])
    target, source, errors = decide_target(nodes, knob_value, list(packages))
    out = {"target": target, "source": source, "pending": {}, "done": {}, "errors": errors}
    if errors:
        return out
    for host in sorted(nodes):
        plan = node_plan(host, nodes[host], target)
        out["errors"].extend(plan["errors"])
        out["pending" if plan["pending"] else "done"][host] = plan["reason"]
    return out


def campaign_lines(campaign, lost=(), refreshed=True):
    """What the plan prints, a line each: the target and its source, every node with
    what it gets and why, the nodes not planned, and how to keep the target."""
    lines = ["kernel update target: %s" % campaign["source"]]
    if not refreshed:
        lines.append("package lists not refreshed (check mode, or gpudirect_kernel_update_refresh_cache: false): what the nodes "
                     "offer was read from the lists they have")
    for host in sorted(campaign["pending"]):
        lines.append("%s: update (locked, drained, updated, rebooted once, verified): %s" % (host, campaign["pending"][host]))
    for host in sorted(campaign["done"]):
        lines.append("%s: nothing to do, not locked or drained: %s" % (host, campaign["done"][host]))
    if lost:
        lines.append("not planned (unreachable, or failed above): %s; they keep their kernel until a later run "
                     "reaches them" % ", ".join(sorted(lost)))
    versions = sorted(set(campaign["target"].values()))
    if versions:
        lines.append("to keep this target for a later run of the campaign: -e %s=%s"
                     % (KNOB, versions[0] if len(versions) == 1 else json.dumps(campaign["target"], sort_keys=True)))
    return lines


def install_names(packages, target, method):
    """The package specs that install exactly the target: ``name=version`` (apt),
    ``name-version`` (dnf)."""
    joiner = "=" if method == "apt" else "-"
    return ["%s%s%s" % (name, joiner, target[name]) for name in packages]
