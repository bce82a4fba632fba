// SPDX-License-Identifier: MIT
/*
 * STAND-IN for nvidia.ko (NVIDIA GPU driver core module).
 *
 * It touches no hardware: it loads on any machine, with or without a GPU,
 * and only
 *   - creates /proc/driver/nvidia/version in the real format
 *     ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  <ver>  Release Build ..."),
 *     and /proc/driver/nvidia/gpus/ (empty: no GPU is driven);
 *   - exports the nvidia_p2p_* symbols nvidia-peermem links against, so that
 *     nvidia-peermem depends on nvidia as the real one does. They never hand
 *     out GPU memory (-EINVAL).
 * License string: "Dual MIT/GPL" for the open flavour, "NVIDIA" for the
 * proprietary one, as `modinfo -F license nvidia` shows on real systems.
 */
#include <linux/module.h>
#include <linux/kernel.h>
#include <linux/proc_fs.h>
#include <linux/seq_file.h>
#include "nv-p2p.h"
#include "nv_standin_version.h"

/* the machine name as uname -m prints it, as in the real line (aarch64 on Grace) */
#if defined(__aarch64__)
#define NV_ARCH_NAME "aarch64"
#else
#define NV_ARCH_NAME "x86_64"
#endif

#ifdef NV_STANDIN_PROPRIETARY
#define NV_VERSION_LINE "NVIDIA UNIX " NV_ARCH_NAME " Kernel Module  " NV_VERSION_STRING "  " NV_BUILD_DATE
MODULE_LICENSE("NVIDIA");
#else
#define NV_VERSION_LINE "NVIDIA UNIX Open Kernel Module for " NV_ARCH_NAME "  " NV_VERSION_STRING "  Release Build  (" NV_BUILD_USER ")  " NV_BUILD_DATE
MODULE_LICENSE("Dual MIT/GPL");
#endif
MODULE_DESCRIPTION("STAND-IN for the NVIDIA GPU kernel module (no hardware access)");
MODULE_VERSION(NV_VERSION_STRING);
MODULE_ALIAS("char-major-195-*");

static struct proc_dir_entry *nv_proc_dir;

bool nvidia_p2p_cap_persistent_pages = true;
EXPORT_SYMBOL(nvidia_p2p_cap_persistent_pages);

int nvidia_p2p_get_pages(u64 p2p_token, u32 va_space, u64 virtual_address, u64 length,
			 struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data)
{
	return -EINVAL;
}
EXPORT_SYMBOL(nvidia_p2p_get_pages);

int nvidia_p2p_put_pages(u64 p2p_token, u32 va_space, u64 virtual_address,
			 struct nvidia_p2p_page_table *page_table)
{
	return -EINVAL;
}
EXPORT_SYMBOL(nvidia_p2p_put_pages);

int nvidia_p2p_free_page_table(struct nvidia_p2p_page_table *page_table)
{
	return 0;
}
EXPORT_SYMBOL(nvidia_p2p_free_page_table);

static int nv_version_show(struct seq_file *m, void *v)
{
	seq_printf(m, "NVRM version: %s\n", NV_VERSION_LINE);
	seq_printf(m, "GCC version:  %s\n", NV_COMPILER);
	return 0;
}

static int __init nvidia_init(void)
{
	nv_proc_dir = proc_mkdir("driver/nvidia", NULL);
	if (!nv_proc_dir)
		return -ENOMEM;
	if (!proc_create_single_data("version", 0444, nv_proc_dir, nv_version_show, NULL) ||
	    !proc_mkdir("gpus", nv_proc_dir)) {
		proc_remove(nv_proc_dir);
		return -ENOMEM;
	}
	pr_info("nvidia: loading out-of-tree module taints kernel.\n");
	pr_info("NVRM: loading %s\n", NV_VERSION_LINE);
	pr_info("NVRM: STAND-IN module from the gpudirect-rdma test harness: no GPU is driven.\n");
	return 0;
}

static void __exit nvidia_exit(void)
{
	proc_remove(nv_proc_dir);
}

module_init(nvidia_init);
module_exit(nvidia_exit);
