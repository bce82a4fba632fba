"""The Python snippets the benchmark scripts run through a here-document import what they name.

benchmarks/loopback_vs_perftest.sh parses ib_write_bw's result with the role's own parser
(module_utils/gpudirect_crosscheck.py) from a `"$PY" - FILE <<'PY'` snippet run in the
repository root. When that module started importing another of the project's module_utils
(gpudirect_versions), the snippet's plain `sys.path` import broke, and only the gpudirect_kernel_update
VM lane saw it, an hour into the suite. Here the snippet runs as the script runs it, on a
published ib_write_bw output (tests/fixtures/crosscheck/README.md names its source).
"""

import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT
from hang_guard import HANG_GUARD_S

SCRIPT = os.path.join(ROOT, "benchmarks", "loopback_vs_perftest.sh")
SNIPPET = re.compile(r"<<'PY'\n(.*?)\nPY\n", re.S)


def _snippets():
    with open(SCRIPT) as handle:
        return SNIPPET.findall(handle.read())


def test_every_snippet_compiles():
    snippets = _snippets()
    assert len(snippets) >= 3, "the here-documents of %s were not found" % SCRIPT
    for text in snippets:
        compile(text, SCRIPT, "exec")


@pytest.mark.parametrize("fixture", ["perftest_host_gbits_issue273.txt", "perftest_dmabuf_h200_dranet.txt"])
def test_the_perftest_snippet_parses_a_real_result_from_the_repository_root(fixture):
    parse = [text for text in _snippets() if "parse_perftest" in text]
    assert len(parse) == 1, "loopback_vs_perftest.sh no longer parses ib_write_bw with gpudirect_crosscheck"
    path = os.path.join(ROOT, "tests", "fixtures", "crosscheck", fixture)
    proc = subprocess.run([sys.executable, "-", path], input=parse[0], cwd=ROOT, capture_output=True, text=True,
                          timeout=HANG_GUARD_S)
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    assert float(proc.stdout.strip()) > 0, proc.stdout
