#!/usr/bin/env bash
# Build the project as an Ansible collection tarball (galaxy.yml: gpudirect.rdma), keeping the
# repository's playbook layout as it is (issue #31).
#
#   scripts/build-collection.sh [OUTPUT_DIR]      # default: OUTPUT_DIR=dist
#
# A collection keeps its plugins under plugins/, the repository at the top (library/,
# module_utils/, filter_plugins/, callback_plugins/ that ./ansible.cfg points at). So the build
# stages a copy in a temporary folder:
#
#   galaxy.yml README.md LICENSE     -> as they are
#   roles/ playbooks/                -> as they are; site.yml -> playbooks/site.yml (its
#                                       import_playbook paths made relative to playbooks/)
#   library/*.py                     -> plugins/modules/
#   module_utils/*.py                -> plugins/module_utils/ (the modules' helpers, shipped to nodes)
#   plugin_utils/*.py                -> plugins/plugin_utils/ (the filters' and callbacks' helpers,
#                                       controller only)
#   filter_plugins/*.py              -> plugins/filter/
#   filter_plugins/*.yml             -> plugins/filter/ (each filter's documentation, for ansible-doc)
#   callback_plugins/*.py            -> plugins/callback/
#   doc_fragments/*.py               -> plugins/doc_fragments/
#   tests/sanity/ignore-*.txt        -> tests/sanity/ (ansible-test sanity's per-file ignores,
#                                       for scripts/sanity.sh and for Galaxy users who run it)
#   meta/runtime.yml, CHANGELOG.md   -> copied from the root
#
# and, in the staged copy only, rewrites the imports of the project's own module_utils and
# plugin_utils (`from ansible.module_utils.gpudirect_x import ...`, `from ansible.module_utils import
# gpudirect_x`: in a checkout both folders are on that package's path) to the collection's names
# (ansible_collections.NAMESPACE.NAME.plugins.module_utils.gpudirect_x, or .plugin_utils.), which is
# how a plugin in a collection finds them. It fails when an import of either is left unrewritten. The same for the modules' doc fragments: an
# `extends_documentation_fragment` entry naming a file of doc_fragments/ (`gpudirect_x`,
# `gpudirect_x.var`, which the checkout resolves through ./ansible.cfg's doc_fragment_plugins)
# becomes `NAMESPACE.NAME.gpudirect_x[.var]`, the only name an installed collection resolves. Then `ansible-galaxy collection build` runs in the
# staged folder and the path of the tarball is the last line printed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$(pwd)

out=${1:-dist}
mkdir -p "$out"
out=$(cd "$out" && pwd)

if [[ -x .venv/bin/ansible-galaxy ]]; then
  PATH="$repo/.venv/bin:$PATH"
fi
python=$(command -v python3)
[[ -x .venv/bin/python ]] && python=.venv/bin/python

read -r namespace name version < <("$python" - <<'EOF'
import yaml
with open("galaxy.yml") as f:
    g = yaml.safe_load(f)
print(g["namespace"], g["name"], g["version"])
EOF
)
prefix="ansible_collections.${namespace}.${name}.plugins"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

cp galaxy.yml README.md LICENSE "$stage/"
cp -r roles playbooks "$stage/"
sed -E 's#^([[:space:]]*(ansible\.builtin\.)?import_playbook:[[:space:]]*)playbooks/#\1#' site.yml >"$stage/playbooks/site.yml"
if grep -Eq 'import_playbook:[[:space:]]*playbooks/' "$stage/playbooks/site.yml"; then
  echo "[build-collection] playbooks/site.yml still imports playbooks/...: the rewrite missed a line" >&2
  exit 1
fi
mkdir -p "$stage/plugins/modules" "$stage/plugins/module_utils" "$stage/plugins/plugin_utils" "$stage/plugins/filter" \
         "$stage/plugins/callback" "$stage/plugins/doc_fragments" "$stage/meta" "$stage/tests/sanity"
cp library/*.py "$stage/plugins/modules/"
cp module_utils/*.py "$stage/plugins/module_utils/"
cp plugin_utils/*.py "$stage/plugins/plugin_utils/"
cp filter_plugins/*.py "$stage/plugins/filter/"
cp filter_plugins/*.yml "$stage/plugins/filter/"
cp callback_plugins/*.py "$stage/plugins/callback/"
cp doc_fragments/*.py "$stage/plugins/doc_fragments/"
cp tests/sanity/ignore-*.txt "$stage/tests/sanity/"
# the root's meta/runtime.yml (requires_ansible) and the changelog Galaxy wants
cp meta/runtime.yml "$stage/meta/runtime.yml"
cp CHANGELOG.md "$stage/CHANGELOG.md"
find "$stage" \( -name __pycache__ -o -name '*.pyc' -o -name .molecule \) -prune -exec rm -rf {} +

# the project's helpers are the files under module_utils/ and plugin_utils/; only imports of
# those are rewritten, each to the folder it is in
for utils in module_utils plugin_utils; do
  own=$(cd "$utils" && ls -1 *.py | sed 's/\.py$//' | paste -sd'|')
  find "$stage/plugins" -name '*.py' -print0 | xargs -0 sed -i -E \
    -e "s/^([[:space:]]*)from ansible\.module_utils\.(${own})([[:space:]]+import[[:space:]])/\1from ${prefix}.${utils}.\2\3/" \
    -e "s/^([[:space:]]*)from ansible\.module_utils import (${own})([[:space:],]|$)/\1from ${prefix}.${utils} import \2\3/" \
    -e "s/^([[:space:]]*)import ansible\.module_utils\.(${own})([[:space:]]|$)/\1import ${prefix}.${utils}.\2\3/"
  left=$(grep -rnE "ansible\.module_utils(\.| import )(${own})\b" "$stage/plugins" || true)
  if [[ -n "$left" ]]; then
    echo "[build-collection] imports of the project's $utils left unrewritten:" >&2
    echo "$left" >&2
    exit 1
  fi
done

# doc fragments: the project's are the files under doc_fragments/; only entries naming those are
# rewritten, inside each staged module's extends_documentation_fragment list (or one-line value)
"$python" - "$stage/plugins/modules" "$namespace.$name" <<'EOF'
import os
import re
import sys

modules, fqcn = sys.argv[1], sys.argv[2]
own = sorted(f[:-3] for f in os.listdir("doc_fragments") if f.endswith(".py") and not f.startswith("_"))
name = r"(?:%s)(?:\.[A-Za-z_][A-Za-z0-9_]*)?" % "|".join(map(re.escape, own))
key = re.compile(r"^(extends_documentation_fragment:[ \t]*)(%s)?[ \t]*$" % name)
item = re.compile(r"^([ \t]*-[ \t]+)(%s)[ \t]*$" % name)
count = 0
for fname in sorted(os.listdir(modules)):
    path = os.path.join(modules, fname)
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    inside = False
    for i, line in enumerate(lines):
        m = key.match(line)
        if m:
            inside = m.group(2) is None
            if not inside:
                lines[i] = m.group(1) + fqcn + "." + m.group(2)
                count += 1
            continue
        if inside:
            m = item.match(line)
            if m:
                lines[i] = m.group(1) + fqcn + "." + m.group(2)
                count += 1
            elif not re.match(r"^[ \t]*-[ \t]", line):
                inside = False
    text = "\n".join(lines)
    left = re.findall(r"^(?:extends_documentation_fragment:|[ \t]*-)[ \t]+(%s)[ \t]*$" % name, text, re.M)
    if left:
        sys.exit("[build-collection] %s: doc fragments left unrewritten: %s" % (fname, ", ".join(left)))
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
print("[build-collection] %d doc fragment names in plugins/modules/ named %s.NAME" % (count, fqcn), file=sys.stderr)
EOF

# Inside a collection, a role finds the collection's modules by their short names, but not its
# filters (Ansible resolves short filter names only among ansible.builtin and the playbook's
# adjacent plugins): in the staged roles/ and playbooks/, `| gpudirect_x` becomes
# `| NAMESPACE.NAME.gpudirect_x` for every filter that filter_plugins/ defines.
"$python" - "$stage" "$namespace.$name" <<'EOF'
import importlib.util
import os
import re
import sys

stage, fqcn = sys.argv[1], sys.argv[2]
names = set()
for fname in sorted(os.listdir("filter_plugins")):
    if fname.endswith(".py"):
        spec = importlib.util.spec_from_file_location("_build_" + fname[:-3], os.path.join("filter_plugins", fname))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        names.update(mod.FilterModule().filters())
if not names:
    sys.exit("[build-collection] filter_plugins/ defines no filter")
pipe = re.compile(r"\|(\s*)(%s)\b" % "|".join(sorted(names, key=len, reverse=True)))
count = 0
for top in ("roles", "playbooks"):
    for dirpath, _, files in os.walk(os.path.join(stage, top)):
        for fname in files:
            path = os.path.join(dirpath, fname)
            try:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
            except UnicodeDecodeError:
                continue
            new, n = pipe.subn(lambda m: "|%s%s.%s" % (m.group(1), fqcn, m.group(2)), text)
            if n:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(new)
                count += n
print("[build-collection] %d filters, %d uses in roles/ and playbooks/ named %s.NAME" % (len(names), count, fqcn),
      file=sys.stderr)
EOF

ansible-galaxy collection build --force --output-path "$out" "$stage" >&2
tarball="$out/${namespace}-${name}-${version}.tar.gz"
[[ -f "$tarball" ]] || { echo "[build-collection] no $tarball" >&2; exit 1; }
echo "$tarball"
