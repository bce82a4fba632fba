# -*- coding: utf-8 -*-
"""The loopback helper's build on the node: which source files, their stamp, the compile.

The gpudirect_verify role ships the C files (roles/gpudirect_verify/files/) and passes
their paths; the module compiles the ``.c`` ones into ``<helper_dir>/gpudirect_loopback_helper``
and writes the sha256 of the files (by name and content) and the build flags next to
it, ``gpudirect_loopback_helper.sha256``. A binary whose stamp differs is built again;
nothing else decides. The stamp is written last, so a build cut short builds again.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os
import tempfile

from ansible.module_utils.gpudirect_host import C_LOCALE, read_attr
from ansible.module_utils.gpudirect_loopback_helper import LoopbackError

HELPER_NAME = "gpudirect_loopback_helper"
COMPILE_FLAGS = ["-O2", "-std=gnu99", "-Wall"]
LINK_FLAGS = ["-libverbs", "-ldl"]


def helper_digest(files):
    """sha256 of the helper's source files ([(name, bytes)], taken in name order, so that a list
    and a directory of the same files agree) and its build flags: what the stamp records."""
    digest = hashlib.sha256()
    for name, content in sorted(files):
        digest.update(name.encode("utf-8") + b"\0" + content + b"\0")
    digest.update(" ".join(COMPILE_FLAGS + LINK_FLAGS).encode("utf-8"))
    return digest.hexdigest()


def helper_paths(helper_dir):
    """(binary, stamp) of the helper in ``helper_dir``."""
    binary = os.path.join(helper_dir, HELPER_NAME)
    return binary, binary + ".sha256"


def helper_is_current(binary, stamp, digest):
    """Whether ``binary`` is an executable built from the source whose digest is ``digest``."""
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        return False
    return (read_attr(stamp) or "").split(" ")[0] == digest


def build_command(cc, sources, output_path):
    """The compiler's argument list: the .c files of ``sources`` (headers are found next to them)."""
    return [cc] + COMPILE_FLAGS + ["-o", output_path] + [p for p in sources if p.endswith(".c")] + LINK_FLAGS


def build_failure_hint(stderr):
    """What to install when the helper does not compile."""
    text = stderr or ""
    if "infiniband/verbs.h" in text or "-libverbs" in text or "cannot find -libverbs" in text:
        return ("the libibverbs development files are missing: install libibverbs-dev (Debian/Ubuntu) or "
                "rdma-core-devel (RHEL family); with MLNX_OFED/DOCA-OFED they come with the "
                "libibverbs-dev / rdma-core-devel package of that stack")
    if "stdio.h" in text or "stdlib.h" in text:
        return "the C library headers are missing: install libc6-dev / build-essential (Debian) or glibc-devel (RHEL)"
    return "the compiler output above says what failed"


def source_paths(paths):
    """The source files: the paths given, a directory as the .c and .h files in it (sorted)."""
    out = []
    for path in paths:
        if os.path.isdir(path):
            out += [os.path.join(path, n) for n in sorted(os.listdir(path)) if n.endswith((".c", ".h"))]
        else:
            out.append(path)
    return out


def read_sources(paths, check_mode=False):
    """[(name, bytes)] of the source files; None in check mode when one is not on the node yet
    (the role's copy task, which would put it there, shows that change)."""
    files = []
    for path in paths:
        try:
            with open(path, "rb") as handle:
                files.append((os.path.basename(path), handle.read()))
        except (IOError, OSError) as exc:
            if check_mode and not os.path.exists(path):
                return None
            raise LoopbackError("bad_input", "cannot read the helper source %s (%s): ship roles/gpudirect_verify/"
                                "files/ there (include_role gpudirect_verify tasks_from=helper does, and sets "
                                "gpudirect_verify_helper_source) or point source at it." % (path, exc))
    return files


def build(module, sources, binary, stamp, digest):
    """Compile ``sources`` into ``binary`` with the module's run_command, then write the stamp.
    Raises LoopbackError(helper_build_failed) saying what to install or fix."""
    cc = module.get_bin_path("cc") or module.get_bin_path("gcc")
    if not cc:
        raise LoopbackError("helper_build_failed", "No C compiler (cc/gcc) on the node.")
    directory = os.path.dirname(binary)
    try:
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o755)
        fd, tmp = tempfile.mkstemp(prefix=".build-", dir=directory)
        os.close(fd)
    except (IOError, OSError) as exc:
        raise LoopbackError("helper_build_failed", "Cannot write %s: %s (run with become, or set helper_dir to a "
                            "writable directory)." % (directory, exc))
    cmd = build_command(cc, sources, tmp)
    rc, out, err = module.run_command(cmd, environ_update=dict(C_LOCALE))
    if rc != 0:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise LoopbackError("helper_build_failed", "%s exited %d: %s." % (" ".join(cmd), rc, build_failure_hint(err)),
                            rc=rc, stdout=out, stderr=err, command=cmd)
    os.chmod(tmp, 0o755)
    os.rename(tmp, binary)
    with open(stamp + ".tmp", "w") as handle:
        handle.write(digest + "\n")
    os.rename(stamp + ".tmp", stamp)
