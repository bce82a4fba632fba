"""Ansible filter: the digests of what the controller brings to a run, one per install stage.

``gpudirect_stage_digests``
    ``variables | gpudirect_stage_digests(project_root, stages)``: one digest per install stage,
    so that a toolkit update (or an inventory change) re-runs only the stages it touches. A
    stage's digest covers the variables named with its roles' prefixes plus every other
    ``gpudirect_*`` variable (not attributed to one stage, so counted for all), its roles'
    directories, the stage's playbook files, and the shared code its files reach: the
    modules (``library/``) named in them, the ``module_utils`` those modules import (and
    those import in turn), and the filter plugin files whose filters they use. The
    project root is a checkout (``site.yml`` at its top) or the installed collection
    ``gpudirect.rdma`` (``MANIFEST.json``, ``playbooks/site.yml``, the same code under
    ``plugins/``: ``scripts/build-collection.sh``); the files are read where that layout
    keeps them, and a collection's imports by the collection's names are followed too. The
    ansible-core version is not part of it: an upgrade of the controller alone re-runs no
    stage. ``stages`` maps a stage name to ``{"roles": [...], "playbooks": [...]}``.

Input that cannot be digested raises ``AnsibleFilterError`` naming the problem.
"""

from __future__ import annotations

import hashlib
import json
import os
import re

from ansible.errors import AnsibleFilterError

SKIP_DIRS = ("__pycache__", ".pytest_cache")
# documentation and caches: they cannot change what a run does to a node
SKIP_SUFFIXES = (".md", ".pyc")


# a checkout imports its helpers as ansible.module_utils.<stem>; the installed collection by its
# own names (ansible_collections.gpudirect.rdma.plugins.module_utils.<stem>, .plugin_utils.<stem>)
_MODULE_UTILS_IMPORT = re.compile(
    r"(?:ansible\.module_utils|\.plugins\.(?:module_utils|plugin_utils))(?:\.|\s+import\s+)(gpudirect_\w+)")
_FILTER_NAMES = re.compile(r"[\"'](\w+)[\"']\s*:")

# Where each kind of shared code lives: in a checkout, and in the installed collection.
CHECKOUT = {"library": "library", "module_utils": "module_utils", "plugin_utils": "plugin_utils",
            "filter_plugins": "filter_plugins"}
COLLECTION = {"library": "plugins/modules", "module_utils": "plugins/module_utils",
              "plugin_utils": "plugins/plugin_utils", "filter_plugins": "plugins/filter"}


def layout(root):
    """The folders of ``root``'s shared code (:data:`CHECKOUT` or :data:`COLLECTION`), or an
    ``AnsibleFilterError`` when ``root`` is neither the toolkit's checkout nor its installed collection."""
    if os.path.isfile(os.path.join(root, "site.yml")):
        return CHECKOUT
    if os.path.isfile(os.path.join(root, "MANIFEST.json")) and os.path.isfile(os.path.join(root, "playbooks", "site.yml")):
        return COLLECTION
    raise AnsibleFilterError("gpudirect_stage_digests: %r is neither the toolkit's checkout (site.yml at its top) nor "
                             "the installed collection gpudirect.rdma (MANIFEST.json and playbooks/site.yml)" % (root,))


def _read(path):
    with open(path, "rb") as handle:
        return handle.read()


def _tree(root, rel):
    top = os.path.join(root, rel)
    if os.path.isfile(top):
        return [rel]
    out = []
    for current, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        out.extend(os.path.relpath(os.path.join(current, f), root) for f in sorted(files)
                   if not f.endswith(SKIP_SUFFIXES))
    return out


def _shared_code(root, folders):
    """``(modules, utils, filters)``: module stem -> file, helper stem -> file (module_utils and
    plugin_utils, both imported as ``ansible.module_utils.<stem>`` in a checkout), filter name ->
    file; ``folders``: the layout's (:func:`layout`)."""
    def stems(kind, suffix=".py"):
        folder = os.path.join(root, folders[kind])
        return sorted(f[:-len(suffix)] for f in os.listdir(folder) if f.endswith(suffix)) if os.path.isdir(folder) else []
    filters = {}
    for stem in stems("filter_plugins"):
        rel = "%s/%s.py" % (folders["filter_plugins"], stem)
        text = _read(os.path.join(root, rel)).decode("utf-8", "replace")
        body = text.split("def filters(self)", 1)[-1] if "def filters(self)" in text else ""
        for name in _FILTER_NAMES.findall(body):
            filters[name] = rel
    utils = dict((stem, "%s/%s.py" % (folders[kind], stem)) for kind in ("module_utils", "plugin_utils")
                 for stem in stems(kind))
    modules = dict((stem, "%s/%s.py" % (folders["library"], stem)) for stem in stems("library"))
    return modules, utils, filters


def stage_files(root, roles, playbooks):
    """Every toolkit file a stage's run depends on (relative paths, sorted)."""
    modules, utils, filters = _shared_code(root, layout(root))
    files = set()
    for role in roles:
        if not os.path.isdir(os.path.join(root, "roles", role)):
            raise AnsibleFilterError("gpudirect_stage_digests: no role %r under %s/roles" % (role, root))
        files.update(_tree(root, os.path.join("roles", role)))
    for playbook in playbooks:
        if not os.path.isfile(os.path.join(root, playbook)):
            raise AnsibleFilterError("gpudirect_stage_digests: no playbook file %r under %s" % (playbook, root))
        files.add(playbook)
    pending = sorted(files)
    while pending:
        rel = pending.pop()
        text = _read(os.path.join(root, rel)).decode("utf-8", "replace")
        found = set()
        if rel.endswith((".yml", ".yaml", ".j2")):
            words = set(re.findall(r"\b\w+\b", text))
            found.update(path for stem, path in modules.items() if stem in words)
            found.update(path for name, path in filters.items() if name in words)
        if rel.endswith(".py"):
            found.update(utils[u] for u in _MODULE_UTILS_IMPORT.findall(text) if u in utils)
        for new in sorted(found - files):
            files.add(new)
            pending.append(new)
    return sorted(files)


def stage_digests(variables, project_root, stages):
    if not isinstance(variables, dict):
        raise AnsibleFilterError("gpudirect_stage_digests: expected a dict of variables, got %s"
                                 % type(variables).__name__)
    root = str(project_root or "")
    layout(root)
    if not isinstance(stages, dict) or not stages:
        raise AnsibleFilterError("gpudirect_stage_digests: expected the stages as {name: {roles, playbooks}}")
    prefixes = {}
    for name, stage in stages.items():
        prefixes[name] = tuple(r + "_" for r in stage.get("roles") or [])
    everyone = tuple(p for ps in prefixes.values() for p in ps)
    out = {}
    for name, stage in sorted(stages.items()):
        mine = dict((k, v) for k, v in variables.items() if k.startswith(prefixes[name]) or not k.startswith(everyone))
        digest = hashlib.sha256()
        try:
            digest.update(json.dumps(mine, sort_keys=True, default=str).encode("utf-8"))
        except (TypeError, ValueError) as exc:
            raise AnsibleFilterError("gpudirect_stage_digests: the variables cannot be serialised: %s" % exc)
        for rel in stage_files(root, stage.get("roles") or [], stage.get("playbooks") or []):
            digest.update(("\n%s\n" % rel).encode("utf-8"))
            digest.update(hashlib.sha256(_read(os.path.join(root, rel))).digest())
        out[name] = digest.hexdigest()
    return out


class FilterModule(object):
    def filters(self):
        return {"gpudirect_stage_digests": stage_digests}
