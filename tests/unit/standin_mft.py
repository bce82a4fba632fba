"""The stand-in MFT tools alone on PATH, for the tests that run the NIC module against them.

tests/harness/standin_repo/src/mft/mlxconfig answers as each name it is linked under
(mstconfig, mstflint, ...) and keeps its fake cards under STANDIN_MLXCONFIG_STATE.
"""

import os
import sys

from conftest import ROOT

STANDIN = os.path.join(ROOT, "tests", "harness", "standin_repo", "src", "mft", "mlxconfig")


def standin_on_path(tmp_path, monkeypatch, names=("mstconfig", "mstflint")):
    """PATH holds only ``tmp_path/bin``: the stand-in under ``names`` and its interpreter.
    Returns ``(bindir, state)``; the stand-in's state is ``tmp_path/standin-state``."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(sys.executable, str(bindir / "python3"))
    for name in names:
        os.symlink(STANDIN, str(bindir / name))
    state = tmp_path / "standin-state"
    monkeypatch.setenv("STANDIN_MLXCONFIG_STATE", str(state))
    monkeypatch.setenv("PATH", str(bindir))
    return bindir, state
