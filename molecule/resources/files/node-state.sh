#!/bin/bash
# Print a node's state for before/after comparisons in the test sequences:
# package selections and a checksum of every file under /etc and /usr/local.
# podman writes /etc/hosts, /etc/hostname and /etc/resolv.conf itself.
set -euo pipefail
if command -v dpkg >/dev/null; then dpkg --get-selections; else rpm -qa | sort; fi
find /etc /usr/local -xdev -type f \
  ! -path /etc/hosts ! -path /etc/hostname ! -path /etc/resolv.conf -print0 \
  | sort -z | xargs -0 md5sum
