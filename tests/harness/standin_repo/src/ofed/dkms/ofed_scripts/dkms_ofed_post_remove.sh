#!/bin/sh
# STAND-IN: undo dkms_ofed_post_build.sh for one kernel.
kernelver=$1
dest=/usr/src/ofa_kernel/$(uname -m)/$kernelver
if command -v update-alternatives >/dev/null 2>&1; then
	update-alternatives --quiet --remove ofa_kernel_headers "$dest" 2>/dev/null || true
fi
rm -rf "$dest"
rmdir /usr/src/ofa_kernel/$(uname -m) /usr/src/ofa_kernel 2>/dev/null || true
exit 0
