/* SPDX-License-Identifier: MIT */
/* STAND-IN: the version (written by build.sh) and the NVIDIA sources (written by make) */
#include "gdrdrv_standin_version.h"
#include "gdrdrv_standin_src.h"
