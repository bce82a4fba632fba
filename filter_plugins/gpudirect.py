"""Ansible filters that turn GPU and RDMA tool output into data for GPUDirect checks.

Filters
-------
``nvidia_topo_matrix``
    Parse the text of ``nvidia-smi topo -m`` into the device list, the distance
    matrix, the CPU/NUMA affinity columns and the NIC legend. gpudirect_verify
    cross-checks the distances from sysfs with it (``gpudirect_verify_topo_notes``).
``gpudirect_distance_verdict``
    Map one distance class of that matrix (``PIX``, ``SYS``, ``NV18`` ...) to
    ``good`` / ``warn`` / ``bad`` for GPUDirect RDMA.

Both are plugin_utils/gpudirect_topo_matrix.py, the one implementation, which the other
filter files call too. Every filter is a pure function of its arguments.  Input that cannot be
understood raises ``AnsibleFilterError``; where the problem sits on one line,
the message gives the 1-based line number and the line itself, quoted with
``repr()`` so that tabs and escape sequences stay visible.

Example::

    - name: Read the GPU/NIC topology
      ansible.builtin.command: nvidia-smi topo -m
      register: topo_out
      changed_when: false

    - name: Every GPU has a NIC behind the same PCIe switch
      ansible.builtin.assert:
        that: >-
          topo.devices | select('match', 'NIC') |
          map('extract', topo.matrix[item]) |
          map('gpudirect_distance_verdict') | select('eq', 'good') | list | length > 0
      loop: "{{ topo.devices | select('match', 'GPU') | list }}"
      vars:
        topo: "{{ topo_out.stdout | nvidia_topo_matrix }}"
"""

from __future__ import annotations

import os

from ansible.errors import AnsibleFilterError
import ansible.module_utils

# The project's module_utils/ (shipped to nodes with the modules) and plugin_utils/ (controller
# only), importable here as ansible.module_utils.<name>: Ansible loads this file by path and
# ships module_utils only to modules. The collection build rewrites these imports to the
# collection's plugins/module_utils and plugins/plugin_utils (scripts/build-collection.sh).
_PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _UTILS in (os.path.join(_PROJECT, "module_utils"), os.path.join(_PROJECT, "plugin_utils")):
    if _UTILS not in ansible.module_utils.__path__:
        ansible.module_utils.__path__.append(_UTILS)

from ansible.module_utils import gpudirect_topo_matrix as _matrix  # noqa: E402


def nvidia_topo_matrix(text):
    """``gpudirect_topo_matrix.nvidia_topo_matrix``: the parsed ``nvidia-smi topo -m`` output.

    :raises AnsibleFilterError: with the parser's message, on text it cannot read.
    """
    try:
        return _matrix.nvidia_topo_matrix(text)
    except _matrix.TopoMatrixError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def gpudirect_distance_verdict(cls):
    """``gpudirect_topo_matrix.gpudirect_distance_verdict``: good, warn or bad.

    :raises AnsibleFilterError: with its message, for ``X`` or an unknown class.
    """
    try:
        return _matrix.gpudirect_distance_verdict(cls)
    except _matrix.TopoMatrixError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule:
    """Register the GPUDirect filters with Ansible."""

    def filters(self):
        """Return the filter name -> function mapping.

        :returns: dict of the filters this plugin provides.
        """
        return {
            "nvidia_topo_matrix": nvidia_topo_matrix,
            "gpudirect_distance_verdict": gpudirect_distance_verdict,
        }
