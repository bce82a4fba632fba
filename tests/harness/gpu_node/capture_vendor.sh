#!/usr/bin/env bash
# GPU node: capture what the vendor stack on a real node prints, for the unit
# tests' fixtures (no ansible needed). Writes under $OUT (default ./gpu-node-vendor).
#   vendor.txt            driver version files, package names and versions, PCI
#                         config-space sizes, memlock limits, Secure Boot state
#   supported-gpus.json   NVIDIA's own per-device list, where the driver ships it
set -u
OUT=${OUT:-$PWD/gpu-node-vendor}; mkdir -p "$OUT"
sec() { printf '\n=== %s\n' "$*"; }
{
  sec "uname -r"; uname -r
  sec "cat /proc/driver/nvidia/version"; cat /proc/driver/nvidia/version
  sec "nvidia-smi --query-gpu=driver_version,pci.device_id,name,vbios_version --format=csv"
  nvidia-smi --query-gpu=driver_version,pci.device_id,name,vbios_version,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max --format=csv 2>&1
  sec "modinfo nvidia (version, license, signer)"; modinfo -F version nvidia 2>&1; modinfo -F license nvidia 2>&1; modinfo -F signer nvidia 2>&1
  sec "dpkg-query nvidia/cuda/fabric/dcgm/gdrcopy/rdma packages"
  dpkg-query -W -f='${db:Status-Abbrev} ${Package} ${Version}\n' 2>/dev/null | grep -Ei 'nvidia|cuda|fabric|dcgm|gdr|rdma|ibverbs|mlnx|ofed|doca|mokutil|shim|grub' | head -120
  sec "apt-mark showhold"; apt-mark showhold 2>&1 | head
  sec "ls /etc/apt/preferences.d /etc/apt/sources.list.d"; ls -la /etc/apt/preferences.d /etc/apt/sources.list.d 2>&1
  sec "find supported-gpus.json"; find / -xdev -name 'supported-gpus.json*' 2>/dev/null | head
  sec "lspci -nn (NVIDIA, Mellanox, bridges)"; lspci -nn 2>&1 | head -60
  sec "PCI config sizes and ids"
  for d in /sys/bus/pci/devices/*; do
    printf '%s %s:%s class=%s config=%s driver=%s\n' "${d##*/}" "$(cat $d/vendor)" "$(cat $d/device)" "$(cat $d/class)" \
      "$(stat -c %s $d/config)" "$(basename "$(readlink $d/driver 2>/dev/null)" 2>/dev/null)"
  done
  sec "lspci -vvv ACS/link of NVIDIA GPU and its bridges"; lspci -vvv -d 10de: 2>&1 | grep -E '^[0-9a-f]|LnkCap:|LnkSta:|ACS' | head -40
  sec "mokutil --sb-state"; mokutil --sb-state 2>&1
  sec "efivars SecureBoot/SetupMode"; ls /sys/firmware/efi 2>&1 | head; for v in /sys/firmware/efi/efivars/SecureBoot-* /sys/firmware/efi/efivars/SetupMode-*; do [ -e "$v" ] && { echo "$v"; od -An -tx1 "$v"; }; done
  sec "keyrings"; cat /proc/keys 2>&1 | grep -Ei 'platform|machine|builtin|secondary|\.blacklist|asymmetri' | head -40
  sec "kernel lockdown, module.sig_enforce"; cat /sys/kernel/security/lockdown 2>&1; cat /sys/module/module/parameters/sig_enforce 2>&1
  sec "keyctl list %:.platform / %:.builtin_trusted_keys"; keyctl list %:.platform 2>&1 | head -20; keyctl list %:.builtin_trusted_keys 2>&1 | head -20
  sec "ulimit -l (this shell), limits.conf, systemd DefaultLimitMEMLOCK"
  ulimit -l; ulimit -Hl; grep -rhs memlock /etc/security/limits.conf /etc/security/limits.d/ | grep -v '^#'
  systemctl show -p DefaultLimitMEMLOCK -p DefaultLimitMEMLOCKSoft 2>&1; cat /proc/1/limits 2>&1 | grep -i lock
  sec "systemd-run ulimit -l"; timeout 20 systemd-run --pipe --wait --quiet sh -c 'ulimit -l' 2>&1
  sec "grub / boot"; ls /boot 2>&1 | head; ls /etc/default/grub* 2>&1; cat /proc/cmdline
  sec "is-system-running"; systemctl is-system-running 2>&1
  sec "lsmod nvidia / ib"; lsmod 2>&1 | grep -E '^(nvidia|ib_|mlx|rdma)' ; ls /sys/class/infiniband 2>&1
  sec "dcgmi / nv-fabricmanager / gdrcopy"; command -v dcgmi nv-fabricmanager gdrcopy_sanity nvidia-peermem 2>&1; ls /usr/share/doc | grep -Ei 'nvidia|fabric|dcgm' | head
} >"$OUT/vendor.txt" 2>&1
f=$(find / -xdev -name 'supported-gpus.json' 2>/dev/null | head -1)
[ -n "$f" ] && cp "$f" "$OUT/supported-gpus.json"
ls -la "$OUT"; head -c 3000 "$OUT/vendor.txt"
