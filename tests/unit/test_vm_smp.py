"""vCPUs per VM (tests/harness/vm/vm.py default_smp, GPUDIRECT_VM_SMP).

scripts/test.sh starts every VM with GPUDIRECT_VM_SMP=1: on 2 host cores with
two busy processes beside it, the same kernel install from rdma's saved node took
307.6 s with 2 vCPUs and 246.1 s with 1 (benchmarks/suite-time.md, 2026-11-27).
Molecule run by hand, without the variable, keeps 2. A bad value stops the start with
the variable's name instead of handing qemu a wrong -smp.
"""

import pytest

from conftest import load_vm_harness


@pytest.fixture
def vm():
    return load_vm_harness("gpudirect_vm_smp")


def test_two_vcpus_without_the_variable(vm, monkeypatch):
    monkeypatch.delenv("GPUDIRECT_VM_SMP", raising=False)
    assert vm.default_smp() == 2


@pytest.mark.parametrize("raw, want", [("1", 1), (" 4 ", 4), ("", 2)])
def test_the_variable_sets_them(vm, monkeypatch, raw, want):
    monkeypatch.setenv("GPUDIRECT_VM_SMP", raw)
    assert vm.default_smp() == want


@pytest.mark.parametrize("raw", ["0", "two", "-1", "1.5", "65"])
def test_a_bad_value_names_the_variable(vm, monkeypatch, raw):
    monkeypatch.setenv("GPUDIRECT_VM_SMP", raw)
    with pytest.raises(SystemExit) as err:
        vm.default_smp()
    assert "GPUDIRECT_VM_SMP=%r" % raw.strip() in str(err.value)
    assert "1 to 64" in str(err.value)


class _Reached(Exception):
    pass


@pytest.mark.parametrize("argv, want", [([], 1), (["--smp", "3"], 3)])
def test_start_takes_the_variable_unless_smp_is_given(vm, monkeypatch, tmp_path, argv, want):
    monkeypatch.setenv("GPUDIRECT_VM_SMP", "1")

    def reached(args):
        raise _Reached(args.smp)

    # cmd_start resolves the vCPUs before it looks for the image; stop it there
    monkeypatch.setattr(vm, "image_dir", reached)
    with pytest.raises(_Reached) as got:
        vm.main(["--state-dir", str(tmp_path), "start", "n", "--ssh-port", "2200"] + argv)
    assert got.value.args == (want,)
