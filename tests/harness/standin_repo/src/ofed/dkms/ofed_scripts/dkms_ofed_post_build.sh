#!/bin/sh
# STAND-IN for mlnx-ofed-kernel's ofed_scripts/dkms_ofed_post_build.sh:
# publish the build headers and Module.symvers for other out-of-tree modules
# (nvidia-peermem, nv_peer_mem, ...) under /usr/src/ofa_kernel/<arch>/<kernel>/
# and point the ofa_kernel_headers alternative (/usr/src/ofa_kernel/default) at it.
set -e
kernelver=$1
build_dir=$2
arch=$(uname -m)
dest=/usr/src/ofa_kernel/$arch/$kernelver
echo "Copying build sources from '$build_dir' to '$dest' ..."
if [ ! -f "$build_dir/Module.symvers" ]; then
	echo "-E- Cannot find $build_dir/Module.symvers !" >&2
	exit 1
fi
rm -rf "$dest"
mkdir -p "$dest"
cp -a "$build_dir/include" "$dest/"
cp -a "$build_dir/standin_version.h" "$dest/"
cp -a "$build_dir"/Module*.symvers "$dest/"
if command -v update-alternatives >/dev/null 2>&1; then
	update-alternatives --quiet --install /usr/src/ofa_kernel/default ofa_kernel_headers "$dest" 30 || true
fi
