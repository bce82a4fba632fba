// SPDX-License-Identifier: MIT
/*
 * STAND-IN for the real gdrdrv's nv-p2p-dummy.c: built next to gdrdrv only so that
 * modpost finds the nvidia_p2p_* exports (with the CRCs of the prototypes in the
 * NVIDIA sources' nv-p2p.h). It is named "nvidia" here (Kbuild: nvidia-y), so that
 * gdrdrv's modinfo depends names the real nvidia module. DKMS installs only gdrdrv.ko.
 */
#include <linux/module.h>
#include "nv-p2p.h"

MODULE_LICENSE("Dual MIT/GPL");
MODULE_DESCRIPTION("symbol table for gdrdrv's build only; never installed");

bool nvidia_p2p_cap_persistent_pages;
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
