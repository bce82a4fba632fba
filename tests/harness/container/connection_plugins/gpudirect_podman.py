# Copyright (c) 2026 gpudirect-rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""containers.podman.podman with pipelining, for the container tier's test nodes.

The collection's plugin runs `podman exec` without --interactive, so a module cannot be fed
on stdin and the plugin turns pipelining off: every remote module call then costs a
`podman mount` (at each task's connect), a `podman exec` for the temporary directory, one for
chmod and one for the module. Here a module is sent on the stdin of one `podman exec
--interactive`, as ssh with `pipelining = true` (./ansible.cfg) does on a real fleet, and the
container is mounted only when a file is copied in or out.

A `podman exec` that fails in podman itself raises a connection failure, so the node is
unreachable as it was when the temporary directory could not be made (the rolling scenario stops
a node mid-run). podman 4.3.1 (Debian 12) exits 255 with "Error: can only create exec sessions on
running containers: container state improper" for a stopped container and 125 with "Error: no
container with name or ID ... found: no such container" for a removed one; its own errors are the
last line of stderr and begin with "Error: ".
"""

from __future__ import annotations

DOCUMENTATION = """
    name: gpudirect_podman
    short_description: Run modules in a podman container, pipelined
    description:
        - The containers.podman.podman connection, with modules sent on the stdin of
          C(podman exec --interactive) (pipelining) and the container mounted only to copy files.
    options:
      remote_addr:
        description:
          - The ID of the container you want to access.
        default: inventory_hostname
        vars:
          - name: ansible_host
          - name: inventory_hostname
          - name: ansible_podman_host
      remote_user:
        description:
          - User specified via name or UID which is used to execute commands inside the container.
        ini:
          - section: defaults
            key: remote_user
        env:
          - name: ANSIBLE_REMOTE_USER
        vars:
          - name: ansible_user
      podman_extra_args:
        description:
          - Extra arguments to pass to the podman command line.
        default: ''
        ini:
          - section: defaults
            key: podman_extra_args
        vars:
          - name: ansible_podman_extra_args
        env:
          - name: ANSIBLE_PODMAN_EXTRA_ARGS
      podman_executable:
        description:
          - Executable for podman command.
        default: podman
        vars:
          - name: ansible_podman_executable
        env:
          - name: ANSIBLE_PODMAN_EXECUTABLE
      pipelining:
        description:
          - Send modules on the stdin of C(podman exec --interactive) instead of copying them
            into a temporary directory on the node.
        default: true
        type: boolean
        env:
          - name: ANSIBLE_PIPELINING
        ini:
          - section: connection
            key: pipelining
        vars:
          - name: ansible_pipelining
"""

import shlex

from ansible.errors import AnsibleConnectionFailure
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.connection import ConnectionBase, ensure_connect
from ansible_collections.containers.podman.plugins.connection.podman import Connection as PodmanConnection

# exit codes of podman's own failures (a stopped container: 255, a removed one: 125), whose last
# line of stderr begins with "Error: "; the command's own exit codes pass through
PODMAN_ERRORS = (125, 255)


def podman_failed(rc, stderr):
    """Whether `podman exec` failed in podman itself, not in the command it ran."""
    lines = to_native(stderr, errors="surrogate_or_replace").strip().splitlines()
    return rc in PODMAN_ERRORS and bool(lines) and lines[-1].startswith("Error: ")


class Connection(PodmanConnection):
    """containers.podman.podman, pipelined."""

    transport = "gpudirect_podman"
    has_pipelining = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._mounted = False

    def _connect(self):
        # no `podman mount` here: a pipelined module needs no file on the node
        ConnectionBase._connect(self)
        self._connected = True
        return self

    def _mount(self):
        """Mount the container's filesystem once, for put_file and fetch_file."""
        if not self._mounted:
            PodmanConnection._connect(self)
            self._mounted = True

    @ensure_connect
    def exec_command(self, cmd, in_data=None, sudoable=False):
        """Run cmd in the container; in_data (a pipelined module) goes to its stdin."""
        ConnectionBase.exec_command(self, cmd, in_data=in_data, sudoable=sudoable)
        exec_args = ["exec"]
        if in_data is not None:
            exec_args.append("--interactive")
        if self.user:
            exec_args.extend(("--user", self.user))
        rc, stdout, stderr = self._podman(exec_args, shlex.split(to_native(cmd, errors="surrogate_or_strict")), in_data)
        if podman_failed(rc, stderr):
            raise AnsibleConnectionFailure(
                "podman exec in %s failed: %s" % (self._container_id, to_native(stderr, errors="surrogate_or_replace").strip()))
        return rc, stdout, stderr

    def put_file(self, in_path, out_path):
        self._mount()
        super().put_file(in_path, out_path)

    def fetch_file(self, in_path, out_path):
        self._mount()
        super().fetch_file(in_path, out_path)
