// SPDX-License-Identifier: MIT
/*
 * STAND-IN for gdrdrv.ko (GDRCopy's kernel module, DKMS package gdrdrv-dkms).
 *
 * It maps no GPU memory. Where the provisioning roles care it behaves like the
 * real module:
 *   - it links against the nvidia module's nvidia_p2p_* symbols, so that
 *     `modinfo -F depends gdrdrv` is "nvidia" and modprobe loads nvidia first;
 *   - it is built by DKMS from the NVIDIA sources found under /usr/src/nvidia-*
 *     (as the real Makefile does), and records which ones in its modinfo
 *     ("nvidia_src"), so a gdrdrv built before the driver it runs with shows it;
 *   - loaded, it provides /dev/gdrdrv (here a misc device that devtmpfs creates;
 *     the real one is a char device the package's init script makes with mknod).
 */
#include <linux/module.h>
#include <linux/kernel.h>
#include <linux/miscdevice.h>
#include <linux/fs.h>
#include "nv-p2p.h"
#include "gdrdrv_standin.h"

MODULE_LICENSE("Dual MIT/GPL");
MODULE_DESCRIPTION("STAND-IN for GDRCopy's gdrdrv (no GPU memory is mapped)");
MODULE_VERSION(GDRDRV_STANDIN_VERSION);
MODULE_INFO(nvidia_src, GDRDRV_STANDIN_NVIDIA_SRC);

/* what the real module calls to pin GPU pages; never called here, but linked */
static int (*gdrdrv_get_pages)(u64, u32, u64, u64, struct nvidia_p2p_page_table **,
			       void (*)(void *), void *) = nvidia_p2p_get_pages;

static int gdrdrv_open(struct inode *inode, struct file *filp)
{
	return 0;
}

static const struct file_operations gdrdrv_fops = {
	.owner = THIS_MODULE,
	.open = gdrdrv_open,
};

static struct miscdevice gdrdrv_dev = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "gdrdrv",
	.fops = &gdrdrv_fops,
	.mode = 0666,
};

static int __init gdrdrv_init(void)
{
	pr_info("gdrdrv: loading gdrdrv version %s built for %s (stand-in, get_pages at %p)\n",
		GDRDRV_STANDIN_VERSION, GDRDRV_STANDIN_NVIDIA_SRC, gdrdrv_get_pages);
	return misc_register(&gdrdrv_dev);
}

static void __exit gdrdrv_exit(void)
{
	misc_deregister(&gdrdrv_dev);
}

module_init(gdrdrv_init);
module_exit(gdrdrv_exit);
