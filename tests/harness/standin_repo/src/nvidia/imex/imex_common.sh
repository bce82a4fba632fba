# STAND-IN helper shared by nvidia-imex and nvidia-imex-ctl (installed as
# /usr/share/nvidia-imex-standin/imex_common.sh; gpudirect-rdma tests/harness/standin_repo).

# the node list file: IMEX_NODE_CONFIG_FILE of the configuration, as the real config.cfg names it
imex_nodes_file() {
	f=$(sed -n 's/^[[:space:]]*IMEX_NODE_CONFIG_FILE=//p' "${1:-/etc/nvidia-imex/config.cfg}" 2>/dev/null | tail -n 1)
	echo "${f:-/etc/nvidia-imex/nodes_config.cfg}"
}

# the node IPs, one a line, in file order (comments and blank lines dropped)
imex_nodes() {
	sed -e 's/#.*//' -e 's/[[:space:]]//g' "$1" 2>/dev/null | grep -v '^$'
}

# this machine's addresses, one a line
imex_local_ips() {
	{
		hostname -I 2>/dev/null | tr ' ' '\n'
		ip -o addr show 2>/dev/null | awk '{ sub(/\/.*/, "", $4); print $4 }'
	} | grep -v '^$' | sort -u
}

# the first listed node that is one of this machine's addresses, or nothing
imex_local_node() {
	locals=$(imex_local_ips)
	for node in $(imex_nodes "$1"); do
		if printf '%s\n' "$locals" | grep -qxF "$node"; then
			echo "$node"
			return 0
		fi
	done
	return 1
}

IMEX_PIDFILE=/run/nvidia-imex/nvidia-imex.pid

# true while the daemon stand-in started by the unit runs
imex_running() {
	[ -r "$IMEX_PIDFILE" ] || return 1
	pid=$(cat "$IMEX_PIDFILE" 2>/dev/null)
	[ -n "$pid" ] && [ -r "/proc/$pid/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" 2>/dev/null
}
