"""Kernel release validation (module_utils/gpudirect_kernel.py): fixtures and sources in
tests/fixtures/kernel/README.md."""

import os

import pytest
import yaml

from ansible.module_utils import gpudirect_kernel as k

FIX = os.path.join(os.path.dirname(__file__), "..", "fixtures", "kernel")
with open(os.path.join(FIX, "releases.yml")) as _f:
    DATA = yaml.safe_load(_f)


@pytest.mark.parametrize("entry", DATA["valid"], ids=lambda e: e["release"])
def test_real_releases_are_accepted(entry):
    assert k.validate_release(entry["release"], "test") == entry["release"]
    assert k.is_release(entry["release"])


@pytest.mark.parametrize("value", DATA["invalid"], ids=repr)
def test_non_releases_are_refused_naming_the_value_and_source(value):
    assert not k.is_release(value)
    with pytest.raises(ValueError) as err:
        k.validate_release(value, "gpudirect_dkms_kernels")
    assert str(err.value).startswith("gpudirect_dkms_kernels: %r is not a kernel release" % value)


@pytest.mark.parametrize("value", [None, 6.1, ["6.1.0-50-amd64"]])
def test_non_strings_are_refused(value):
    with pytest.raises(ValueError, match="not a string"):
        k.validate_release(value)


def test_too_long_and_reasons():
    assert "longer than the 64" in k.release_problem("6.1.0-" + "a" * 59)
    assert k.release_problem("6.1.0-" + "a" * 58) is None
    assert k.release_problem("..") == "it is a directory reference, not a release"
    assert "'/'" in k.release_problem("6.1/..")
    assert "' '" in k.release_problem("6.1.0 x")


def test_invalid_releases_lists_each_bad_value():
    msgs = k.invalid_releases(["6.1.0-50-amd64", "..", "6.1.0-50-amd64;id"], "kernels")
    assert len(msgs) == 2 and "'..'" in msgs[0] and "';'" in msgs[1]
    assert k.invalid_releases(["6.1.0-50-amd64"]) == []


def test_image_names_give_releases_only_for_releases():
    assert k._release_of_image("/boot/vmlinuz-6.8.0-1013-nvidia-64k") == "6.8.0-1013-nvidia-64k"
    assert k._release_of_image("/boot/vmlinuz-0-rescue-4f2b1c0de6a34b7f9d0e1a2b3c4d5e6f") is None
    assert k._release_of_image("vmlinuz-..") is None
    assert k._release_of_image("vmlinuz-") is None


def test_running_kernel_validates_osrelease(tmp_path):
    proc = tmp_path / "proc" / "sys" / "kernel"
    proc.mkdir(parents=True)
    (proc / "osrelease").write_text("5.14.0-427.13.1.el9_4.x86_64\n")
    assert k.running_kernel(str(tmp_path)) == "5.14.0-427.13.1.el9_4.x86_64"
    (proc / "osrelease").write_text("..\n")
    with pytest.raises(ValueError, match=r"osrelease: '\.\.' is not a kernel release"):
        k.running_kernel(str(tmp_path))


def test_dkms_status_lines_need_a_release_and_the_knob_is_named(run_module):
    import gpudirect_dkms
    ok = gpudirect_dkms.parse_status_line("gdrdrv/2.4.4, 6.1.0-50-amd64, x86_64: installed")
    assert ok["kernel"] == "6.1.0-50-amd64"
    assert gpudirect_dkms.parse_status_line("gdrdrv/2.4.4, .., x86_64: installed") is None
    result = run_module(gpudirect_dkms, {"kernels": [".."]})
    assert result["failed"] and "gpudirect_dkms_kernels" in result["msg"] and "'..'" in result["msg"]
