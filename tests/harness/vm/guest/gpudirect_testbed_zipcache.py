"""Test VM only: keep the code Python compiles from zip-imported sources.

Every Ansible task runs its module as an AnsiballZ zip, and Python's zipimport
compiles each imported source in it anew (a zip has no __pycache__): about a
second of each task's ~2.4 s under TCG goes to compiling
ansible.module_utils.basic and friends. build-image.sh installs this module with
a .pth line in the image's dist-packages, so the guest's python3 compiles each
distinct source once and loads the code from /var/cache/gpudirect-testbed/
afterwards (measured on a converged test node: 2.4 s to 1.7 s a task). The code
is what compile() gives; only its file name is set to the zip path of this run.
Nothing of the toolkit knows about it; a real node compiles every time.
"""
import hashlib
import marshal
import os
import sys
import zipimport

CACHE_DIR = "/var/cache/gpudirect-testbed/zipimport"
_compile_source = zipimport._compile_source


def _with_filename(code, filename):
    """The code object and every code object nested in it, with co_filename set."""
    consts = tuple(_with_filename(c, filename) if isinstance(c, type(code)) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def cached_compile_source(pathname, source):
    """zipimport._compile_source with a cache keyed by the source and the interpreter."""
    key = hashlib.sha256(sys.implementation.cache_tag.encode() + b"\0" + source).hexdigest()
    path = os.path.join(CACHE_DIR, key)
    try:
        with open(path, "rb") as f:
            return _with_filename(marshal.load(f), pathname)
    except (OSError, EOFError, ValueError, TypeError):
        pass  # not cached yet, or unreadable: compile as Python would
    code = _compile_source(pathname, source)
    try:
        os.makedirs(CACHE_DIR, exist_ok=True)
        tmp = f"{path}.{os.getpid()}"
        with open(tmp, "wb") as f:
            marshal.dump(code, f)
        os.replace(tmp, path)  # concurrent tasks: whole files only
    except OSError:
        pass
    return code


zipimport._compile_source = cached_compile_source
