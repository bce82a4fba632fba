"""Run the roles' read-only probes against a simulated host (the GPU node by default).

The probes (roles/*/files/*_probe.py, and module_utils/gpudirect_nvidia_plan.probe through
``Host.plan_host()``) read files and run commands; here they read a table of files and get
canned command output instead, so what each probe makes of a
host is tested without that host.  ``gpu_node()`` is the real GPU node as captured in
tests/fixtures/gpu_node/h200 and its capture/: Ubuntu 24.04, kernel
6.18.44 without /lib/modules (modinfo finds nothing), the open NVIDIA module
580.159.04 loaded but no driver package, libibverbs.so.1 of rdma-core 50.0.

Run as a script, ``python3 gpu_node_sim.py <probe.py> [args...]`` prints what the
probe prints on the simulated GPU node.
"""

import fnmatch
import importlib.util
import io
import json
import os
import sys
import types
from contextlib import redirect_stdout

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# /proc/driver/nvidia/version on the GPU node (tests/fixtures/gpu_node/h200/capture/system.txt)
PROC_OPEN = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)  \n"
             "GCC version:  gcc version 15.3.0 (GCC) \n")
PROC_PROPRIETARY = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.86.15  Wed Jan 22 00:53:18 UTC 2025\n"
                    "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14) \n")
LIBIBVERBS = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1"


class Host:
    """A host as the probes see it: files, directories, links, commands, libraries."""

    def __init__(self, kernel, files=None, dirs=(), links=None, which=(), commands=None, symbols=None):
        self.kernel = kernel
        self.files = dict(files or {})
        self.dirs = set(dirs)
        self.links = dict(links or {})
        self.which = set(which)
        self.commands = commands or (lambda argv: (127, ""))
        self.symbols = dict(symbols or {})  # library path -> exported names

    # --- what the probe modules use -------------------------------------------------
    def read(self, path):
        return self.files.get(path, "").strip()

    def run(self, argv):
        if argv[0] not in self.which and argv[0] not in ("modinfo", "ldconfig"):
            return 127, ""
        rc, out = self.commands(list(argv))
        return rc, out.strip()

    def glob(self, pattern):
        # as glob.glob: a wildcard does not cross "/"
        paths = set(self.files) | self.dirs | set(self.links)
        return sorted(p for p in fnmatch.filter(paths, pattern) if p.count("/") == pattern.count("/"))

    def cdll(self, path):
        if path not in self.symbols:
            raise OSError("cannot open shared object file: " + path)
        return types.SimpleNamespace(**{name: object() for name in self.symbols[path]})

    def _os(self):
        path = types.SimpleNamespace(
            basename=os.path.basename, dirname=os.path.dirname,
            exists=lambda p: p in self.files or p in self.dirs or p in self.links,
            isdir=lambda p: p in self.dirs,
            realpath=lambda p: self.links.get(p, p))
        return types.SimpleNamespace(path=path, environ={},
                                     uname=lambda: ("Linux", "node", self.kernel, "#1 SMP", "x86_64"))

    def plan_host(self):
        """This host as module_utils/gpudirect_nvidia_plan.probe reads it."""
        return types.SimpleNamespace(read=self.read, run=self.run, glob=self.glob, isdir=lambda p: p in self.dirs,
                                     exists=lambda p: p in self.files or p in self.dirs or p in self.links,
                                     which=lambda name: name in self.which or name in ("modinfo", "ldconfig"),
                                     release=lambda: self.kernel)

    def probe(self, script, *args):
        """Run a probe script's main() on this host; return its JSON."""
        spec = importlib.util.spec_from_file_location("probe_%d" % id(self), script)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        mod.read, mod.run, mod.os = self.read, self.run, self._os()
        mod.glob = types.SimpleNamespace(glob=self.glob)
        mod.shutil = types.SimpleNamespace(which=lambda name: "/usr/bin/" + name if name in self.which else None)
        if hasattr(mod, "ctypes"):
            mod.ctypes = types.SimpleNamespace(CDLL=self.cdll)
        argv, sys.argv = sys.argv, [script] + list(args)
        out = io.StringIO()
        try:
            with redirect_stdout(out):
                mod.main()
        finally:
            sys.argv = argv
        return json.loads(out.getvalue())


def gpu_node(proc=PROC_OPEN, sys_version="580.159.04", packages=None, rdma_core=None, persistenced_unit=False,
             systemd=True, libibverbs=("50.0", True), modules=("nvidia", "nvidia_uvm", "ib_core", "mlx5_core",
                                                                "mlx5_ib")):
    """The GPU node, or a variant of it.

    :param packages: installed packages as ``{name: version}`` (none on the node).
    :param rdma_core: version of an installed rdma-core package (None: not installed).
    :param libibverbs: ``(rdma-core version, exports ibv_reg_dmabuf_mr)`` or None for no library.
    """
    packages = dict(packages or {})
    kernel = "6.18.44-fc-v657-gpu"
    files = {"/proc/driver/nvidia/version": proc or ""}
    if sys_version:
        files["/sys/module/nvidia/version"] = sys_version + "\n"
    dirs = {"/sys/module/" + m for m in modules}
    links, symbols = {}, {}
    if systemd:
        dirs.add("/run/systemd/system")
    if persistenced_unit:
        files["/usr/lib/systemd/system/nvidia-persistenced.service"] = "[Unit]\n"
    real = None
    if libibverbs:
        real = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.%s" % libibverbs[0]
        files[real] = ""
        links[LIBIBVERBS] = real
        symbols[real] = ["ibv_open_device", "ibv_reg_mr"] + (["ibv_reg_dmabuf_mr"] if libibverbs[1] else [])

    def commands(argv):
        if argv[0] == "modinfo":  # no /lib/modules: modinfo finds no module at all
            return 1, ""
        if argv[0] == "ldconfig":
            return (0, "1 libs found in cache `/etc/ld.so.cache'\n\tlibibverbs.so.1 (libc6,x86-64) => %s\n"
                    % LIBIBVERBS) if real else (0, "0 libs found")
        if argv[:2] == ["dpkg-query", "-W"]:
            names = argv[3:]
            if names == ["rdma-core"]:
                return (0, "rdma-core %s ii " % rdma_core) if rdma_core else (1, "")
            lines = ["%s %s ii " % (n, v) for n, v in sorted(packages.items())
                     if any(fnmatch.fnmatch(n, pat) for pat in names)]
            return (0 if lines else 1), "\n".join(lines)
        if argv[:2] == ["dpkg-query", "-S"]:
            return 1, ""
        return 127, ""

    return Host(kernel, files=files, dirs=dirs, links=links, which={"dpkg-query"}, commands=commands,
                symbols=symbols)


class ModuleHost:
    """A ``Host`` as the plan modules' probes see it (module_utils/gpudirect_peermem.Host):
    the same simulated files, commands and libraries, through the module's interface."""

    def __init__(self, host):
        self.host = host
        self._os = host._os()  # pylint: disable=protected-access

    def run(self, argv):
        rc, out = self.host.run(argv)
        return rc, out, ""

    def read(self, path):
        return self.host.files.get(path, "")

    def exists(self, path):
        return self._os.path.exists(path)

    def isdir(self, path):
        return self._os.path.isdir(path)

    def realpath(self, path):
        return self._os.path.realpath(path)

    def glob(self, pattern):
        return self.host.glob(pattern)

    def which(self, name):
        return "/usr/bin/" + name if name in self.host.which else None

    def exports(self, path, symbol):
        try:
            return hasattr(self.host.cdll(path), symbol)
        except OSError:
            return False

    def uname(self):
        return self._os.uname()


if __name__ == "__main__":
    print(json.dumps(gpu_node().probe(sys.argv[1], *sys.argv[2:])))
