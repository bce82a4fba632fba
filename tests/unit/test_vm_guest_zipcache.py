"""The test VM's zipimport code cache (tests/harness/vm/guest/gpudirect_testbed_zipcache.py).

It changes how the test node's python3 runs every Ansible module, so it must give
the same behaviour as Python's own zipimport: the same code, the file name of the
zip it was imported from (tracebacks name this run's AnsiballZ path), and a
compile as usual when the cache entry is missing or corrupt. Each case runs in a
fresh interpreter, as each Ansible task does.
"""
import os
import subprocess
import sys
import textwrap
import zipfile
from hang_guard import HANG_GUARD_S

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GUEST = os.path.join(ROOT, "tests", "harness", "vm", "guest")

RUN = textwrap.dedent("""\
    import sys, traceback
    sys.dont_write_bytecode = True
    sys.path.insert(0, {guest!r})
    import gpudirect_testbed_zipcache as c
    c.CACHE_DIR = {cache!r}
    sys.path.insert(0, {zip!r})
    import payload
    print(payload.answer(), payload.Inner().where())
    try:
        payload.boom()
    except ZeroDivisionError:
        print([l.strip() for l in traceback.format_exc().splitlines() if "in boom" in l][0])
""")


def make_zip(path, body):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("payload.py", body)
    return str(path)


BODY = textwrap.dedent("""\
    def answer():
        return 42

    class Inner:
        def where(self):
            return (lambda: __file__)()

    def boom():
        return 1 / 0
""")


def run(tmp_path, zip_path):
    code = RUN.format(guest=GUEST, cache=str(tmp_path / "cache"), zip=zip_path)
    return subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=HANG_GUARD_S, check=True).stdout.splitlines()


def test_compiles_once_then_loads_with_this_runs_file_name(tmp_path):
    first = run(tmp_path, make_zip(tmp_path / "a.zip", BODY))
    cached = os.listdir(tmp_path / "cache")
    assert len(cached) == 1
    second = run(tmp_path, make_zip(tmp_path / "b.zip", BODY))
    assert os.listdir(tmp_path / "cache") == cached   # nothing compiled again
    assert first[0] == f"42 {tmp_path / 'a.zip' / 'payload.py'}"
    # code loaded from the cache names the zip it came from, nested functions too
    assert second[0] == f"42 {tmp_path / 'b.zip' / 'payload.py'}"
    assert second[1] == f'File "{tmp_path / "b.zip" / "payload.py"}", line 9, in boom'


def test_another_source_is_compiled_not_served_from_the_cache(tmp_path):
    run(tmp_path, make_zip(tmp_path / "a.zip", BODY))
    out = run(tmp_path, make_zip(tmp_path / "b.zip", BODY.replace("return 42", "return 43")))
    assert out[0].startswith("43 ")
    assert len(os.listdir(tmp_path / "cache")) == 2


def test_a_corrupt_cache_entry_is_compiled_again_and_replaced(tmp_path):
    run(tmp_path, make_zip(tmp_path / "a.zip", BODY))
    (entry,) = (tmp_path / "cache").iterdir()
    entry.write_bytes(b"\x00garbage")
    assert run(tmp_path, make_zip(tmp_path / "b.zip", BODY))[0].startswith("42 ")
    assert entry.read_bytes() != b"\x00garbage"


def test_an_unwritable_cache_still_imports(tmp_path):
    (tmp_path / "cache").write_text("a file where the directory should be")
    assert run(tmp_path, make_zip(tmp_path / "a.zip", BODY))[0].startswith("42 ")


def test_the_image_installs_it_and_its_hash_covers_it():
    recipe = open(os.path.join(ROOT, "tests", "harness", "vm", "build-image.sh")).read()
    assert 'install -m 644 "$here/guest/gpudirect_testbed_zipcache.py" "$pydist/"' in recipe
    assert 'echo "import gpudirect_testbed_zipcache" >"$pydist/gpudirect_testbed_zipcache.pth"' in recipe
    assert "find \"$here/guest\" -type f ! -path '*/__pycache__/*'" in recipe
