#!/bin/sh
# Stand-ins, on the VM, for what a real GPU server brings before our roles run:
#  * an RDMA NIC: soft-RoCE (rdma_rxe) device rxe0 on the main virtio NIC;
#  * firmware that leaves ACS enabled on the PCIe root port above that NIC.
# Both come back at every boot (two small systemd units), as hardware would.
#
#   testbed-setup.sh install [NIC]   prepare: install units, apply now (NIC: default route's);
#                                    on a node whose units were already there (it booted
#                                    with them) ACS stays as boot and the roles left it
#   testbed-setup.sh rxe NIC         boot: load rdma_rxe, create rxe0 on NIC
#   testbed-setup.sh acs BDF         boot: "firmware" turns ACS on at root port BDF
# Under kernel lockdown (Secure Boot: /sys/kernel/security/lockdown says [integrity] or
# [confidentiality]) user space may not write PCI configuration space, so this stand-in
# cannot play the firmware there and writes nothing: it says what the kernel left. The
# secureboot scenario has the kernel turn ACS on itself (vm.py start --intel-iommu).
# NIC may also be given as an IPv4 address: the NIC that holds it (molecule/pair
# puts rxe0 on the pair link's NIC this way: `rxe 10.99.0.1`).
# Prints CHANGED lines for what it changed (Ansible's changed_when reads them).
set -eu
PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin
SELF=/usr/local/sbin/gpudirect-testbed
RXE=rxe0

nic_of() {
  # a NIC name as it is, or the NIC that holds an IPv4 address (waits up to 30 s
  # for the address: networkd may still be configuring the link)
  case $1 in
    *.*.*.*)
      i=0
      while :; do
        n=$(ip -o -4 addr show | awk -v a="$1" '{split($4, p, "/"); if (p[1] == a) {print $2; exit}}')
        [ -n "$n" ] && { echo "$n"; return 0; }
        i=$((i + 1))
        [ "$i" -lt 30 ] || { echo "no NIC holds $1" >&2; exit 1; }
        sleep 1
      done ;;
    *) echo "$1" ;;
  esac
}

rxe() {
  nic=$(nic_of "$1")
  if [ ! -d /sys/module/rdma_rxe ]; then modprobe rdma_rxe; echo "CHANGED modprobe rdma_rxe"; fi
  if ! rdma link show | grep -q "^link $RXE/"; then
    rdma link add "$RXE" type rxe netdev "$nic"
    echo "CHANGED rdma link add $RXE type rxe netdev $nic"
  fi
}

acs() {
  port=$1
  cap=$(setpci -s "$port" ECAP_ACS+0x4.w)        # fails when the port has no ACS capability
  want=$(printf '%04x' $(( 0x$cap & 0x1d )))      # SV RR CR UF: what firmware/Linux enable on root ports
  cur=$(setpci -s "$port" ECAP_ACS+0x6.w)
  lockdown=$(cat /sys/kernel/security/lockdown 2>/dev/null || true)
  case $lockdown in
    *"[integrity]"*|*"[confidentiality]"*)
      echo "acs $port: kernel lockdown ($lockdown) refuses user-space PCI writes: ACSCtl $cur left as the kernel set it"
      return 0 ;;
  esac
  if [ "$cur" != "$want" ]; then
    setpci -s "$port" "ECAP_ACS+0x6.w=$want"
    echo "CHANGED acs $port ctl $cur -> $want"
  fi
}

root_port_of() {
  # the PCI bridge above the NIC's PCI function, from sysfs (no fixed address):
  # climb from the netdev's device (a virtio device for virtio-net) to the first
  # PCI function, then one more level to the port it hangs off
  d=$(readlink -f "/sys/class/net/$1/device")
  while [ "$d" != / ] && [ ! -e "$d/config" ]; do d=$(dirname "$d"); done
  p=$(dirname "$d")
  [ -e "$p/config" ] || { echo "no PCI bridge above $1 ($d)" >&2; exit 1; }
  basename "$p"
}

install_units() {
  nic=$1 port=$2 tmp=$(mktemp -d)
  cat >"$tmp/gpudirect-testbed-acs.service" <<UNIT
[Unit]
Description=Testbed stand-in for firmware: ACS on at root port $port
DefaultDependencies=no
After=local-fs.target
Before=sysinit.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=$SELF acs $port

[Install]
WantedBy=sysinit.target
UNIT
  cat >"$tmp/gpudirect-testbed-rxe.service" <<UNIT
[Unit]
Description=Testbed stand-in for an RDMA NIC: soft-RoCE $RXE on $nic
Wants=sys-subsystem-net-devices-$nic.device
After=sys-subsystem-net-devices-$nic.device
Before=network.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=$SELF rxe $nic

[Install]
WantedBy=multi-user.target
UNIT
  cp "$0" "$tmp/self"
  for f in "$tmp/self:$SELF" "$tmp/gpudirect-testbed-acs.service:/etc/systemd/system/gpudirect-testbed-acs.service" \
           "$tmp/gpudirect-testbed-rxe.service:/etc/systemd/system/gpudirect-testbed-rxe.service"; do
    src=${f%%:*} dst=${f#*:}
    if ! cmp -s "$src" "$dst"; then install -m 0755 "$src" "$dst"; echo "CHANGED $dst"; units_changed=1; fi
  done
  chmod 0644 /etc/systemd/system/gpudirect-testbed-*.service
  rm -rf "$tmp"
  systemctl daemon-reload
  for u in gpudirect-testbed-acs.service gpudirect-testbed-rxe.service; do
    if ! systemctl -q is-enabled "$u"; then systemctl -q enable "$u"; echo "CHANGED enable $u"; units_changed=1; fi
  done
}

case "${1:-}" in
  install)
    nic=${2:-$(ip -4 route show default | awk '{for (i=1;i<NF;i++) if ($i=="dev") {print $(i+1); exit}}')}
    [ -n "$nic" ] || { echo "no NIC given and no default route" >&2; exit 1; }
    nic=$(nic_of "$nic")
    port=$(root_port_of "$nic")
    units_changed=0
    install_units "$nic" "$port"
    rxe "$nic"
    # "firmware" sets ACS at boot: apply it now only where its unit is new (this
    # boot ran without it); a node that booted with it (one started from a saved
    # disk) keeps what boot and the roles left, as a real server would
    if [ "$units_changed" = 1 ]; then acs "$port"; fi
    # and the units stand as they do on a node that booted with them: active. Their
    # start runs what was just applied (no change), but an inactive gpudirect-* unit
    # is what the converged-state record would hold, and after the first boot it
    # is active: the record would differ there for no reason of the toolkit's
    for u in gpudirect-testbed-acs.service gpudirect-testbed-rxe.service; do
      if ! systemctl -q is-active "$u"; then systemctl start "$u"; echo "CHANGED start $u"; fi
    done
    echo "NIC=$nic ROOT_PORT=$port"
    ;;
  rxe) rxe "$2"; echo "RXE=$RXE NIC=$(nic_of "$2")" ;;
  acs) acs "$2" ;;
  *) echo "usage: $0 install [NIC|ADDR] | rxe NIC|ADDR | acs BDF" >&2; exit 2 ;;
esac
