"""A stand-in for the kernel's rdma_cm configfs below a test's root, for module_utils/gpudirect_rdma_cm.py.

A plain directory is not configfs: ``mkdir <root>/sys/kernel/config/rdma_cm/<device>`` makes an empty folder,
where the kernel makes ``ports/<n>/default_roce_mode`` and ``ports/<n>/default_roce_tos`` itself. This stand-in
takes the module's ``_mkdir``/``_rmdir`` and ``open`` and answers as drivers/infiniband/core/cma_configfs.c does:

* ``mkdir`` of a name rdma_cm does not know: ENODEV; of a known one: the group with one folder per port and
  the two files, printed as the kernel prints them (``"%s\\n"`` of the GID type name, ``"%u\\n"`` of the ToS);
* a write of ``default_roce_mode``: one of the kernel's names, one trailing newline allowed, else EINVAL, and
  EINVAL for a type the port does not support (cma_set_default_gid_type); of ``default_roce_tos``: kstrtou8
  (decimal, ``0x`` hex or ``0`` octal, one trailing newline), else EINVAL;
* the values live in the stand-in's ``devices`` (the kernel's cma_device), not in the group: ``rmdir`` drops
  the folder, a later ``mkdir`` shows the values again.

``devices``: {"mlx5_0": {1: {"modes": ("IB/RoCE v1", "RoCE v2"), "mode": "RoCE v2", "tos": 0}}}.
"""

import builtins
import errno
import os
import shutil

from ansible.module_utils import gpudirect_rdma_cm as rdma_cm

V1, V2 = rdma_cm.MODE_V1, rdma_cm.MODE_V2


def port(mode=V2, tos=0, modes=(V1, V2)):
    return {"modes": tuple(modes), "mode": mode, "tos": tos}


class FakeRdmaCm(object):
    def __init__(self, root, monkeypatch, devices, loaded=True):
        self.root = str(root)
        self.devices = devices
        self.base = os.path.join(self.root, "sys", "kernel", "config", "rdma_cm")
        self.log = []
        monkeypatch.setattr(rdma_cm, "_mkdir", self.mkdir)
        monkeypatch.setattr(rdma_cm, "_rmdir", self.rmdir)
        monkeypatch.setattr(rdma_cm, "open", self.open, raising=False)
        os.makedirs(os.path.join(self.root, "proc"), exist_ok=True)
        if loaded:
            self.load()
        else:
            self.mounts(False)

    def mounts(self, configfs=True):
        lines = ["sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0",
                 "proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0"]
        if configfs:
            lines.append("configfs /sys/kernel/config configfs rw,nosuid,nodev,noexec,relatime 0 0")
        with builtins.open(os.path.join(self.root, "proc", "mounts"), "w") as handle:
            handle.write("\n".join(lines) + "\n")

    def load(self):
        """configfs mounted, rdma_cm loaded (what `mount -t configfs` and `modprobe rdma_cm` leave)."""
        self.mounts(True)
        os.makedirs(self.base, exist_ok=True)
        os.makedirs(os.path.join(self.root, "sys", "module", "rdma_cm"), exist_ok=True)

    def group(self, device):
        return os.path.join(self.base, device)

    def mkdir(self, path):
        device = os.path.basename(path)
        if os.path.dirname(path) != self.base or not os.path.isdir(self.base):
            raise OSError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        if device not in self.devices:
            raise OSError(errno.ENODEV, os.strerror(errno.ENODEV), path)
        os.mkdir(path)
        for number, state in self.devices[device].items():
            pdir = os.path.join(path, "ports", str(number))
            os.makedirs(pdir)
            self._show(device, number)
        self.log.append(("mkdir", device))

    def _show(self, device, number):
        state = self.devices[device][number]
        pdir = os.path.join(self.group(device), "ports", str(number))
        with builtins.open(os.path.join(pdir, "default_roce_mode"), "w") as handle:
            handle.write("%s\n" % state["mode"])
        with builtins.open(os.path.join(pdir, "default_roce_tos"), "w") as handle:
            handle.write("%u\n" % state["tos"])

    def rmdir(self, path):
        shutil.rmtree(path)
        self.log.append(("rmdir", os.path.basename(path)))

    def open(self, path, mode="r", *args, **kwargs):
        if "w" in mode and os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(path)))) == self.base:
            return _Store(self, path)
        return builtins.open(path, mode, *args, **kwargs)

    def store(self, path, text):
        pdir = os.path.dirname(path)
        number = int(os.path.basename(pdir))
        device = os.path.basename(os.path.dirname(os.path.dirname(pdir)))
        state = self.devices[device][number]
        value = text[:-1] if text.endswith("\n") else text
        if os.path.basename(path) == "default_roce_mode":
            if value not in rdma_cm.MODES or value not in state["modes"]:
                raise OSError(errno.EINVAL, os.strerror(errno.EINVAL), path)
            state["mode"] = value
        else:
            try:
                tos = int(value, 0)
            except ValueError:
                raise OSError(errno.EINVAL, os.strerror(errno.EINVAL), path)
            if not 0 <= tos <= 255:
                raise OSError(errno.ERANGE, os.strerror(errno.ERANGE), path)
            state["tos"] = tos
        self.log.append(("write", device, number, os.path.basename(path), value))
        self._show(device, number)


class _Store(object):
    def __init__(self, fake, path):
        self.fake, self.path = fake, path

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def write(self, text):
        self.fake.store(self.path, text)
        return len(text)
