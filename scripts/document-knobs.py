#!/usr/bin/env python3
"""Write inventory/example/group_vars/gpu_nodes.yml from every role's defaults.

Each role's defaults/main.yml is the one place a knob and its comment live; this
copies them, commented out, in the order site.yml runs the roles, so the example
inventory documents every knob without drifting. tests/unit/test_role_contracts.py
fails when the file is out of date: run `scripts/document-knobs.py` after
changing a default.
"""

import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
TARGET = os.path.join(ROOT, "inventory", "example", "group_vars", "gpu_nodes.yml")
HEADER = """---
# Every knob of every role, with its default and meaning, in the order site.yml
# runs them. Uncomment and change what your site needs; roles validate these in
# argument validation, before anything changes.
# Generated from roles/*/defaults/main.yml by scripts/document-knobs.py.
"""


def stage_roles():
    """Roles in the order site.yml's playbooks apply them, then any others."""
    order = []
    with open(os.path.join(ROOT, "site.yml")) as fh:
        playbooks = re.findall(r"import_playbook:\s*(\S+)", fh.read())
    # a stage playbook names its roles (roles: - role: x) or imports a task file of
    # playbooks/tasks/ that imports them (import_role: name: x)
    pattern = re.compile(r"^\s*-?\s*role:\s*(\S+)|import_role:\s*\n\s*name:\s*(\S+)|import_tasks:\s*(\S+)", re.M)

    def follow(path):
        with open(path) as fh:
            for role, imported, tasks in pattern.findall(fh.read()):
                if tasks:
                    follow(os.path.join(os.path.dirname(path), tasks))
                elif (role or imported) not in order:
                    order.append(role or imported)

    for pb in playbooks:
        follow(os.path.join(ROOT, pb))
    others = sorted(r for r in os.listdir(os.path.join(ROOT, "roles")) if r not in order)
    return order + others


def render():
    parts = [HEADER]
    for role in stage_roles():
        path = os.path.join(ROOT, "roles", role, "defaults", "main.yml")
        if not os.path.exists(path):
            continue
        with open(path) as fh:
            lines = [line.rstrip("\n") for line in fh if line.strip() != "---"]
        parts.append("\n# --- roles/%s %s\n" % (role, "-" * max(3, 66 - len(role))))
        for line in lines:
            if not line.strip():
                parts.append("\n")
            elif line.lstrip().startswith("#"):
                parts.append(line + "\n")
            else:
                parts.append("# " + line + "\n")
    return "".join(parts).replace("\n\n\n", "\n\n")


if __name__ == "__main__":
    text = render()
    if "--check" in sys.argv:
        with open(TARGET) as fh:
            sys.exit(0 if fh.read() == text else "out of date: run scripts/document-knobs.py")
    with open(TARGET, "w") as fh:
        fh.write(text)
    print("wrote", os.path.relpath(TARGET, ROOT))
