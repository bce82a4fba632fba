#!/bin/sh
# After the pair runs, nothing of the gpudirect_loopback helper may be left on the
# node: no helper process, no listener on the pair port, no RC queue pair and no
# user memory registration on the RDMA devices (the helper releases everything,
# on success and on failure). Prints what it finds; exits 1 when anything is left.
#   leftovers.sh PAIR_PORT
set -u
PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin
port=$1
left=0
procs=$(pgrep -a -f gpudirect_loopback_helper || true)
[ -z "$procs" ] || { echo "LEFT helper process: $procs"; left=1; }
listening=$(ss -Htln "sport = :$port")
[ -z "$listening" ] || { echo "LEFT listener on TCP $port: $listening"; left=1; }
qps=$(rdma resource show qp | grep ' type RC' || true)
[ -z "$qps" ] || { echo "LEFT RC queue pairs: $qps"; left=1; }
mrs=$(rdma resource show mr | grep ' pid ' || true)
[ -z "$mrs" ] || { echo "LEFT memory registrations: $mrs"; left=1; }
echo "devices: $(rdma link show | awk '{print $2, $4, $NF}' | tr '\n' ' ')"
[ "$left" -eq 1 ] || echo "CLEAN: no helper process, no listener on TCP $port, no RC QP, no user MR"
exit "$left"
