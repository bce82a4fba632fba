/* SPDX-License-Identifier: MIT */
/* STAND-IN for nv-p2p.h: the few nvidia_p2p_* entry points nvidia-peermem uses. */
#ifndef STANDIN_NV_P2P_H
#define STANDIN_NV_P2P_H
#include <linux/types.h>

struct nvidia_p2p_page_table;

extern bool nvidia_p2p_cap_persistent_pages;
int nvidia_p2p_get_pages(u64 p2p_token, u32 va_space, u64 virtual_address, u64 length,
			 struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data);
int nvidia_p2p_put_pages(u64 p2p_token, u32 va_space, u64 virtual_address,
			 struct nvidia_p2p_page_table *page_table);
int nvidia_p2p_free_page_table(struct nvidia_p2p_page_table *page_table);
#endif
