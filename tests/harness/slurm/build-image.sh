#!/usr/bin/env bash
# Build the Slurm test node image: the project's container node image
# (tests/harness/container/build-image.sh, built or reused) plus Debian 12's
# slurmctld, slurmd, slurm-client and munge, installed with apt in a container
# started from it and saved with `podman commit`. No registry is needed.
#
# The daemons are installed disabled and without a munge key: the cluster
# (tests/harness/slurm/start-cluster.yml) writes one key and one slurm.conf into
# every node and starts them itself.
#
# The image tag carries a hash of this recipe and of the base image's tag (which
# carries the base recipe's hash), so the image is rebuilt exactly when either
# changes and reused otherwise. Prints the image name on stdout; progress and
# timings go to stderr.
#
#   tests/harness/slurm/build-image.sh                           # build or reuse
#   GPUDIRECT_IMAGE_FORCE=1 tests/harness/slurm/build-image.sh   # rebuild (this layer only)
set -euo pipefail

# Recommends left out: slurm-wlm-plugins (a metapackage of the HDF5, RRD, IPMI,
# InfluxDB, Elasticsearch, JWT, MySQL and ROCm SMI plugins) serves no test here.
# Without libpmix2 the daemons log a harmless "mpi/pmix_v4: ... can not load
# PMIx library" error line at start.
PACKAGES=(slurmctld slurmd slurm-client munge)
RUNTIME=${GPUDIRECT_PODMAN_RUNTIME:-runc}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
log() { printf '[slurm-image] %s\n' "$*" >&2; }

# GPUDIRECT_IMAGE_FORCE rebuilds this layer only, not the base's debootstrap.
base=$(GPUDIRECT_IMAGE_FORCE='' "$here/../container/build-image.sh")
recipe_hash=$( { cat "${BASH_SOURCE[0]}"; echo "$base"; } | sha256sum | cut -c1-12)
image="localhost/gpudirect-slurm-node:debian12-${recipe_hash}"

if [[ -z "${GPUDIRECT_IMAGE_FORCE:-}" ]] && podman image exists "$image"; then
  log "image cached: $image"
  echo "$image"
  exit 0
fi

start=$(date +%s)
# a forced rebuild's predecessor, removed below rather than left untagged
previous=$(podman image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
builder="gpudirect-slurm-build-$$"
trap 'podman rm -f "$builder" >/dev/null 2>&1 || true' EXIT
log "apt-get install ${PACKAGES[*]} on $base (recipe $recipe_hash)"
# The same runtime and ulimits as the test nodes (start-nodes.yml says why).
# Without systemd running, the packages' postinst scripts start nothing.
if ! podman run --name "$builder" --runtime "$RUNTIME" \
    --ulimit nofile=8192:8192 --ulimit nproc=8192:8192 "$base" bash -euc '
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -q
      apt-get install -y -q --no-install-recommends "$@"
      systemctl disable munge.service slurmctld.service slurmd.service
      rm -f /etc/munge/munge.key
      apt-get clean
      rm -rf /var/lib/apt/lists/*' bash "${PACKAGES[@]}" >"/var/tmp/$builder.log" 2>&1; then
  tail -n 30 "/var/tmp/$builder.log" >&2
  rm -f "/var/tmp/$builder.log"
  exit 1
fi
rm -f "/var/tmp/$builder.log"

podman commit -q \
  --change 'CMD ["/sbin/init"]' --change 'STOPSIGNAL SIGRTMIN+3' \
  --change "LABEL org.gpudirect.recipe=${recipe_hash}" "$builder" "$image" >/dev/null
[[ -z "$previous" ]] || podman rmi "$previous" >/dev/null 2>&1 || true
# Older recipes are dead weight once a new one is built.
podman images --format '{{.Repository}}:{{.Tag}}' \
  | grep '^localhost/gpudirect-slurm-node:debian12-' | grep -v -- "-${recipe_hash}\$" \
  | xargs -r podman rmi -f >/dev/null 2>&1 || true
log "image build: $(( $(date +%s) - start )) s -> $image"
echo "$image"
