#!/bin/sh
# Run INSIDE a test VM (root): install the stand-in OFED / NVIDIA packages in a
# given order, then try `modprobe nvidia_peermem` and say whether it loaded or
# failed with "Invalid argument" (the real nvidia-peermem built without OFED).
#
#   check_in_vm.sh [--configure BASE_URL] [--expect loaded|einval] [--keep]
#                  [--doca 2.9.1] [--driver 580.95.05] ORDER
#
# ORDER:
#   ofed-first    doca-ofed, then nvidia-open             -> expect: loaded
#   nvidia-first  nvidia-open, then doca-ofed (no rebuild) -> expect: einval
#   nvidia-only   nvidia-open only                        -> expect: einval
#   rebuild       nvidia-first, then `dkms remove/install` of nvidia -> expect: loaded
#   none          install nothing, only probe what is there
#
# --configure BASE_URL  write the apt sources + keyrings first, e.g.
#                       --configure http://10.0.2.2:8765/ (what serve.sh prints as
#                       STANDIN_BASE_URL_VM). Without it the repositories must
#                       already be configured (by the roles under test).
# --expect X            exit 0 only when the outcome is X (else 1)
# --keep                do not purge stand-in packages installed before
#
# Output ends with one line:  RESULT: loaded | RESULT: einval | RESULT: error (...)
# Exit status without --expect: 0 loaded, 1 einval, 2 other failure.
# Needs: apt, dkms, kernel headers of the running kernel, python3 (for --configure).
set -eu

BASE=""; EXPECT=""; KEEP=0; DOCA=2.9.1; DRIVER=580.95.05; ORDER=""
while [ $# -gt 0 ]; do
	case "$1" in
		--configure) BASE=$2; shift 2 ;;
		--expect) EXPECT=$2; shift 2 ;;
		--keep) KEEP=1; shift ;;
		--doca) DOCA=$2; shift 2 ;;
		--driver) DRIVER=$2; shift 2 ;;
		-h|--help) sed -n '2,27p' "$0"; exit 0 ;;
		*) ORDER=$1; shift ;;
	esac
done
[ -n "$ORDER" ] || { echo "usage: $0 [options] ofed-first|nvidia-first|nvidia-only|rebuild|none" >&2; exit 2; }

export DEBIAN_FRONTEND=noninteractive LC_ALL=C
KVER=$(uname -r)
say() { printf '\n=== %s\n' "$*"; }
apt_install() { apt-get install -y -q -o Dpkg::Use-Pty=0 "$@" 2>&1 | grep -E '^(Setting up|Unpacking) |Error|error|Building' || true; }
NV_PKGS="nvidia-open=$DRIVER-1 nvidia-driver-cuda=$DRIVER-1 nvidia-kernel-open-dkms=$DRIVER-1 nvidia-smi=$DRIVER-1 nvidia-persistenced=$DRIVER-1"

if [ -n "$BASE" ]; then
	BASE=${BASE%/}
	say "configuring stand-in repositories from $BASE"
	install -d /etc/apt/keyrings
	python3 - "$BASE" <<'PY'
import sys, urllib.request
base = sys.argv[1]
for name in ("doca", "cuda"):
    data = urllib.request.urlopen("%s/keys/%s-archive-keyring.gpg" % (base, name), timeout=30).read()
    open("/etc/apt/keyrings/%s-standin.gpg" % name, "wb").write(data)
PY
	echo "deb [signed-by=/etc/apt/keyrings/doca-standin.gpg] $BASE/public/repo/doca/$DOCA/debian12/x86_64/ ./" \
		> /etc/apt/sources.list.d/doca.list
	echo "deb [signed-by=/etc/apt/keyrings/cuda-standin.gpg] $BASE/compute/cuda/repos/debian12/x86_64/ /" \
		> /etc/apt/sources.list.d/cuda-debian12-x86_64.list
	cat /etc/apt/sources.list.d/doca.list /etc/apt/sources.list.d/cuda-debian12-x86_64.list
fi

if [ "$ORDER" != none ]; then
	say "unloading stand-in modules"
	modprobe -r nvidia_peermem 2>/dev/null || true
	modprobe -r nvidia ib_peer_mem 2>/dev/null || true
	if [ $KEEP -eq 0 ]; then
		pkgs=$(dpkg-query -W -f='${Package} ${Status}\n' 'nvidia-*' 'cuda-drivers*' 'doca-*' 'mlnx-ofed-*' 2>/dev/null | awk '/ installed$/{print $1}' | tr '\n' ' ')
		if [ -n "$pkgs" ]; then
			say "purging $pkgs"
			apt-get purge -y -q $pkgs >/dev/null
		fi
	fi
	apt-get update -q >/dev/null
fi

case "$ORDER" in
	ofed-first)
		say "install OFED (doca-ofed from DOCA $DOCA), then NVIDIA $DRIVER"
		apt_install doca-ofed
		apt_install $NV_PKGS
		;;
	nvidia-first|rebuild)
		say "install NVIDIA $DRIVER, then OFED (doca-ofed from DOCA $DOCA)"
		apt_install $NV_PKGS
		apt_install doca-ofed
		if [ "$ORDER" = rebuild ]; then
			say "rebuild nvidia/$DRIVER for $KVER (dkms remove + install)"
			dkms remove -m nvidia -v "$DRIVER" -k "$KVER" >/dev/null 2>&1 || true
			dkms install -m nvidia -v "$DRIVER" -k "$KVER" 2>&1 | tail -n 3
		fi
		;;
	nvidia-only)
		say "install NVIDIA $DRIVER only"
		apt_install $NV_PKGS
		;;
	none) ;;
	*) echo "unknown ORDER $ORDER" >&2; exit 2 ;;
esac

say "state"
dkms status 2>/dev/null || true
command -v ofed_info >/dev/null && echo "ofed_info -s: $(ofed_info -s)" || echo "ofed_info: not installed"
ko=$(modinfo -n nvidia_peermem 2>/dev/null || true)
echo "nvidia_peermem: ${ko:-not found}"
[ -n "$ko" ] && echo "  depends: '$(modinfo -F depends nvidia_peermem)'  version: $(modinfo -F version nvidia_peermem)"

say "modprobe nvidia_peermem"
modprobe -r nvidia_peermem 2>/dev/null || true
set +e
err=$(modprobe nvidia_peermem 2>&1)
rc=$?
set -e
[ -n "$err" ] && echo "$err"
echo "modprobe exit status: $rc"
if [ $rc -eq 0 ]; then
	lsmod | grep -E '^(nvidia_peermem|nvidia|ib_peer_mem|ib_core) ' || true
	for c in /sys/kernel/mm/memory_peers/*/version; do
		[ -e "$c" ] && echo "$c: $(cat "$c" | tr -d '\001')"
	done
	cat /proc/driver/nvidia/version 2>/dev/null || true
	nvidia-smi -L 2>/dev/null || true
	result=loaded
elif echo "$err" | grep -q "Invalid argument"; then
	result=einval
else
	result="error (rc=$rc)"
fi
dmesg 2>/dev/null | grep -E 'nvidia-peermem|ib_peer_mem|NVRM' | tail -n 5 || true
echo "RESULT: $result"

if [ -n "$EXPECT" ]; then
	[ "$result" = "$EXPECT" ] && exit 0
	echo "EXPECTED: $EXPECT" >&2
	exit 1
fi
case "$result" in
	loaded) exit 0 ;;
	einval) exit 1 ;;
	*) exit 2 ;;
esac
