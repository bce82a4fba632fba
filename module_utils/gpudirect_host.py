"""The live host as the read-only probes see it, and the file helpers the modules share.

``read_text(path, default=None)``
    A file's whole text, or ``default`` when it is missing or unreadable.
``read_attr(path, default=None)``
    The same, stripped: one sysfs/procfs attribute (``0x10de``, ``16.35.4030``).
``read_bytes(path, default=None)``
    A file's bytes (``/proc/<pid>/environ``), or ``default``.
``Host(run)``
    The interface the probes read the host through (``read``, ``exists``, ``isdir``,
    ``realpath``, ``glob``, ``which``, ``uname``, ``release``, ``run``); unit tests pass
    an object with the same methods answering for a captured host.
``module_runner(module)``
    ``run(argv)`` for ``Host``: list-form, C locale, a tool the node lacks answers rc 127.
``run_or_fail(module, argv, ok=(0,))``
    A command's stdout (list-form, C locale); any other exit status fails the module,
    naming the command, its status and what it printed.
``write_beside(path, data, mode, prefix, place)``
    Write a file next to ``path`` and let ``place`` put it there (an atomic rename or link).
"""

from __future__ import absolute_import, division, print_function

import glob
import os
import shutil
import tempfile

# the C locale for every command the modules run: messages parsed in English
C_LOCALE = {"LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C"}

__metaclass__ = type


def read_bytes(path, default=None):
    """The bytes of the file at ``path``, or ``default`` when it is missing or unreadable (a
    directory, EACCES, sysfs's EINVAL/EIO)."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except (IOError, OSError):
        return default


def read_text(path, default=None):
    """The whole text of the file at ``path`` (UTF-8; a byte that is not reads as U+FFFD), or
    ``default`` when it is missing or unreadable (sysfs answers EINVAL/EIO for some attributes).

    UTF-8 whatever the node's locale: under ``LANG=C`` Python 3.6 would decode ASCII, and a
    firmware string or a comment with one other byte must not make the file unreadable."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except (IOError, OSError):
        return default


def read_attr(path, default=None):
    """``read_text`` stripped of the newline and blanks around it: one sysfs/procfs attribute
    (``vendor``, ``current_link_speed``, ``fw_ver``), or ``default`` when missing or unreadable."""
    text = read_text(path)
    return default if text is None else text.strip()


def module_runner(module):
    """``run(argv) -> (rc, stdout, stderr)`` through ``module.run_command``: list form, never a shell,
    in the C locale. A tool the node lacks (a minimal image without kmod's modinfo) answers like a
    failed command, rc 127 and its name on stderr, instead of ending the module."""
    def run(argv):
        if module.get_bin_path(argv[0]) is None:
            return 127, "", "%s: not found on this node" % argv[0]
        return module.run_command(argv, environ_update=dict(C_LOCALE))
    return run


def run_or_fail(module, argv, ok=(0,)):
    """stdout of ``argv`` run through ``module.run_command`` in the C locale; an exit status not
    in ``ok`` ends the module with ``fail_json`` naming the command, the status and its output."""
    rc, out, err = module.run_command(argv, environ_update=dict(C_LOCALE))
    if rc not in ok:
        module.fail_json(msg="%s failed (rc %d): %s" % (" ".join(argv), rc, (err or out).strip()),
                         rc=rc, stdout=out, stderr=err)
    return out


class Host:
    """The live host, read-only.

    :param run: ``run(argv) -> (rc, stdout, stderr)``, list-form (``module_runner``).
    """

    def __init__(self, run):
        self._run = run

    def run(self, argv):
        """``(rc, stdout, stderr)`` of the command, both texts stripped."""
        rc, out, err = self._run(argv)
        return rc, (out or "").strip(), (err or "").strip()

    @staticmethod
    def read(path):
        """The file's text as it is, ``""`` when missing or unreadable."""
        return read_text(path, "")

    @staticmethod
    def exists(path):
        return os.path.exists(path)

    @staticmethod
    def isdir(path):
        return os.path.isdir(path)

    @staticmethod
    def realpath(path):
        return os.path.realpath(path)

    @staticmethod
    def glob(pattern):
        return sorted(glob.glob(pattern))

    @staticmethod
    def which(name):
        """The tool's path (``PATH``, then /usr/sbin and /sbin), or None."""
        return shutil.which(name, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")

    @staticmethod
    def uname():
        return os.uname()

    def release(self):
        """The running kernel's release (``uname -r``)."""
        return self.uname()[2]


def write_beside(path, data, mode, prefix, place):
    """Write ``data`` (bytes or text) with permissions ``mode`` to a new temporary file in the
    directory of ``path`` (made, 0755, when missing), then call ``place(temporary_path)``, which
    puts it at ``path`` (``os.rename``, ``os.link``, ``module.atomic_move``): readers see the old
    file or the whole new one, never a part. The temporary file is gone afterwards, whatever
    ``place`` did or raised. Returns what ``place`` returns."""
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=prefix)
    try:
        with os.fdopen(fd, "wb" if isinstance(data, bytes) else "w") as handle:
            handle.write(data)
        os.chmod(tmp, mode)
        return place(tmp)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
