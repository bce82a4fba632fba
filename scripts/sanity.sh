#!/usr/bin/env bash
# `ansible-test sanity` on the collection gpudirect.rdma (issue #31), as scripts/test.sh's static
# stage runs it:
#
#   scripts/sanity.sh                 # the tests below
#   scripts/sanity.sh --test import   # extra ansible-test arguments replace the list of tests
#
# ansible-test only runs from inside an ansible_collections/NAMESPACE/NAME/ tree, and the
# repository keeps its playbook layout (library/, module_utils/, doc_fragments/ ... at the top),
# so the script builds the collection with scripts/build-collection.sh into a temporary folder,
# unpacks the tarball under TMP/ansible_collections/NAMESPACE/NAME/ and runs ansible-test there,
# on the venv's Python only (no containers). What it checks is what Galaxy users install: the
# rewritten module_utils imports and doc fragment names, tests/sanity/ignore-X.Y.txt
# (X.Y: ansible-core's version; every line says why).
#
# The tests' own requirements (voluptuous, antsibull-docs-parser for validate-modules) are in
# requirements-test.txt; ansible-test makes venvs for import, yamllint, ansible-doc,
# validate-modules and runtime-metadata itself and installs their pinned requirements from PyPI.
# It bootstraps pip into those venvs with a script from ci-files.testing.ansible.com, which is
# not reachable here: scripts/sanity_pip_bootstrap.py stands in for it (ensurepip, then pip from
# PyPI). The venvs and that script live under .cache/sanity/home (ansible-test's HOME), so a
# second run reuses the venvs. Prints its wall time; exits with ansible-test's status.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
t0=$(date +%s.%N)
took() { awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }

[[ -x .venv/bin/ansible-test ]] || { echo "[sanity] no .venv/bin/ansible-test: run scripts/setup.sh first" >&2; exit 1; }
PATH=$root/.venv/bin:$PATH
python=$root/.venv/bin/python
pyver=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')

# cheap and meaningful; pylint, pep8 (style, not correctness), pslint (PowerShell), changelog
# (antsibull-changelog fragments, which the project does not keep) are left out
tests=(action-plugin-docs ansible-doc compile empty-init ignores import line-endings no-assert
       no-get-exception no-illegal-filenames no-smart-quotes replace-urlopen runtime-metadata shebang
       symlinks use-argspec-type-path use-compat-six validate-modules yamllint)
args=()
if (($#)); then
  args=("$@")
else
  for t in "${tests[@]}"; do args+=(--test "$t"); done
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tarball=$(scripts/build-collection.sh "$work/dist" | tail -n 1)
read -r namespace name < <("$python" -c 'import yaml; g = yaml.safe_load(open("galaxy.yml")); print(g["namespace"], g["name"])')
coll=$work/ansible_collections/$namespace/$name
mkdir -p "$coll"
tar -xzf "$tarball" -C "$coll"

# ansible-test keeps its venvs and looks for the pip bootstrap script under ~/.ansible/test;
# pip in those venvs still reads the user's pip configuration and cache
export XDG_CONFIG_HOME=${XDG_CONFIG_HOME:-$HOME/.config} XDG_CACHE_HOME=${XDG_CACHE_HOME:-$HOME/.cache}
export HOME=$root/.cache/sanity/home
pip_version=$("$python" -c '
import types
from ansible_test._internal.python_requirements import get_venv_packages
print(get_venv_packages(types.SimpleNamespace(version="'"$pyver"'"))["pip"])')
mkdir -p "$HOME/.ansible/test/cache"
cp scripts/sanity_pip_bootstrap.py "$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py"

echo "[sanity] ansible-test sanity --python $pyver in $coll"
rc=0
(cd "$coll" && ansible-test sanity --python "$pyver" --color no "${args[@]}") || rc=$?
echo "[sanity] $( ((rc)) && echo FAILED || echo passed) in $(took) s"
exit "$rc"
