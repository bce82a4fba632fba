#!/usr/bin/env bash
# Serve the STAND-IN vendor repositories over HTTP on 127.0.0.1 (see README.md).
#
#   tests/harness/standin_repo/serve.sh start [PORT]   # build if needed, start (idempotent)
#   tests/harness/standin_repo/serve.sh stop
#   tests/harness/standin_repo/serve.sh status         # exit 0 when serving
#   tests/harness/standin_repo/serve.sh env  [PORT]    # print the variables only
#
# PORT defaults to $GPUDIRECT_STANDIN_PORT or 8765. The server binds to
# 127.0.0.1 only; a qemu guest with user-mode networking reaches it as
# http://10.0.2.2:PORT/. `start` prints shell-style lines (eval-able) with the
# base URLs for the host and for VMs, the repo paths and the key URLs.
# State: ${GPUDIRECT_CACHE:-$HOME/.cache/gpudirect-rdma}/standin-repo/serve-<port>.{pid,log}
# Keys: serve-<port>.keys links to the served build's keys/ directory, where
# {doca,cuda}-archive-keyring.fpr hold the keys' fingerprints; the test inventories
# read them (lookup 'file') into the roles' pinned-fingerprint knobs.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache_root=${GPUDIRECT_CACHE:-$HOME/.cache/gpudirect-rdma}/standin-repo
cmd=${1:-start}
port=${2:-${GPUDIRECT_STANDIN_PORT:-8765}}
pidfile="$cache_root/serve-$port.pid"
logfile="$cache_root/serve-$port.log"
rootfile="$cache_root/serve-$port.root"

log() { printf '[standin-serve] %s\n' "$*" >&2; }

running() {
  [[ -f "$pidfile" ]] || return 1
  local pid; pid=$(cat "$pidfile")
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null && grep -q 'http.server' "/proc/$pid/cmdline" 2>/dev/null
}

print_env() {
  local root=$1
  # shellcheck disable=SC1091
  source "$root/repo.env"
  local host="http://127.0.0.1:$port" vm="http://10.0.2.2:$port"
  local first_doca=${STANDIN_DOCA_VERSIONS%% *}
  cat <<EOV
STANDIN_PORT=$port
STANDIN_ROOT=$root
STANDIN_BASE_URL_HOST=$host/
STANDIN_BASE_URL_VM=$vm/
# DOCA-OFED (flat repo, suite "./"); one directory per DOCA release: $STANDIN_DOCA_VERSIONS
STANDIN_DOCA_REPO_URL_VM=$vm/${STANDIN_DOCA_REPO_PATH_TEMPLATE/\{doca_version\}/$first_doca}
STANDIN_DOCA_KEY_URL_VM=$vm/$STANDIN_DOCA_KEY_PATH
# MLNX_OFED (flat repo, suite "./"): $STANDIN_MLNX_OFED_VERSIONS
STANDIN_MLNX_OFED_REPO_URL_VM=$vm/${STANDIN_MLNX_OFED_REPO_PATH_TEMPLATE/\{ofed_version\}/$STANDIN_MLNX_OFED_VERSIONS}
STANDIN_MLNX_OFED_KEY_URL_VM=$vm/$STANDIN_MLNX_OFED_KEY_PATH
# CUDA (flat repo, suite "/"); drivers: $STANDIN_NVIDIA_VERSIONS
STANDIN_CUDA_REPO_URL_VM=$vm/$STANDIN_CUDA_REPO_PATH
STANDIN_CUDA_KEY_URL_VM=$vm/$STANDIN_CUDA_KEY_PATH
# binary keyrings for signed-by= (also under $host/keys/ and $vm/keys/)
STANDIN_DOCA_KEYRING=$root/keys/doca-archive-keyring.gpg
STANDIN_CUDA_KEYRING=$root/keys/cuda-archive-keyring.gpg
# fingerprints of the keys (also in $root/keys/*.fpr and $cache_root/serve-$port.keys/)
STANDIN_DOCA_KEY_FPR=$STANDIN_DOCA_KEY_FPR
STANDIN_CUDA_KEY_FPR=$STANDIN_CUDA_KEY_FPR
EOV
}

case "$cmd" in
  start)
    root=$("$here/build.sh")
    # two scenarios starting at once (scripts/test.sh runs two lanes): the second
    # waits here, then finds the first one's server
    mkdir -p "$cache_root"
    exec 8>"$cache_root/.serve-$port.lock"
    flock 8
    if running; then
      if [[ "$(cat "$rootfile" 2>/dev/null)" == "$root" ]]; then
        log "already serving $root on 127.0.0.1:$port (pid $(cat "$pidfile"))"
        ln -sfn "$root/keys" "$cache_root/serve-$port.keys"
        print_env "$root"; exit 0
      fi
      log "repository changed: restarting"
      "$0" stop "$port"
    fi
    mkdir -p "$cache_root"
    touch "$root/.serving"
    setsid python3 -m http.server --bind 127.0.0.1 --directory "$root/www" "$port" \
      </dev/null >"$logfile" 2>&1 8>&- &
    echo $! > "$pidfile"
    echo "$root" > "$rootfile"
    ln -sfn "$root/keys" "$cache_root/serve-$port.keys"
    for _ in $(seq 1 50); do
      if python3 - "$port" <<'PY' 2>/dev/null
import sys, urllib.request
urllib.request.urlopen("http://127.0.0.1:%s/keys/" % sys.argv[1], timeout=1).read()
PY
      then
        log "serving $root/www on http://127.0.0.1:$port/ (pid $(cat "$pidfile"))"
        print_env "$root"; exit 0
      fi
      if ! running; then log "server failed to start:"; cat "$logfile" >&2; rm -f "$pidfile"; exit 1; fi
      sleep 0.1
    done
    log "server did not answer in 5 s"; exit 1
    ;;
  stop)
    if running; then
      pid=$(cat "$pidfile")
      kill "$pid"
      for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      log "stopped pid $pid"
    else
      log "not running on port $port"
    fi
    if [[ -f "$rootfile" ]]; then rm -f "$(cat "$rootfile")/.serving"; fi
    rm -f "$pidfile" "$rootfile" "$cache_root/serve-$port.keys"
    ;;
  status)
    if running; then log "serving $(cat "$rootfile") on 127.0.0.1:$port (pid $(cat "$pidfile"))"; exit 0; fi
    log "not running on port $port"; exit 3
    ;;
  env)
    print_env "$("$here/build.sh")"
    ;;
  *)
    echo "usage: $0 {start|stop|status|env} [PORT]" >&2; exit 2 ;;
esac
