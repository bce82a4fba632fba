"""Stands in for the get-pip.py that ansible-test downloads to put pip into its sanity venvs.

ansible-test creates each sanity venv without pip and then fetches a pip bootstrap script from
ci-files.testing.ansible.com, which this project's machines cannot reach (only PyPI and
Debian's mirror). It runs the script it finds at ~/.ansible/test/cache/get_pip_X_Y.py instead of
downloading one; scripts/sanity.sh copies this file there (under its own HOME). Run as
``python THIS [pip options] PACKAGES... [--no-setuptools] [--no-wheel]`` inside the new venv (as
get-pip.py is), it installs the pip bundled with Python (ensurepip), then runs ``pip install`` with
the same arguments, less the two options only get-pip.py knows, so the packages asked for
(pip==X.Y) come from PyPI.
"""

import importlib
import runpy
import subprocess
import sys

GET_PIP_ONLY = ("--no-setuptools", "--no-wheel")


def main():
    subprocess.run([sys.executable, "-m", "ensurepip", "--default-pip"], check=True,
                   stdout=subprocess.DEVNULL)
    importlib.invalidate_caches()
    sys.argv = [sys.argv[0], "install"] + [a for a in sys.argv[1:] if a not in GET_PIP_ONLY]
    runpy.run_module("pip", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
