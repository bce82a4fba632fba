/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * STAND-IN for MLNX_OFED / DOCA-OFED <rdma/peer_mem.h>.
 *
 * The real header declares the "PeerDirect" peer-memory client API that
 * MLNX_OFED's ib_core exports and that nvidia-peermem (and the legacy
 * nv_peer_mem) register with. Only the shape the stand-in needs is kept:
 * the two exported entry points, the client structure with the same field
 * names, and the size constants nvidia-peermem checks.
 */
#ifndef STANDIN_RDMA_PEER_MEM_H
#define STANDIN_RDMA_PEER_MEM_H

#include <linux/types.h>
#include <linux/scatterlist.h>

#define IB_PEER_MEMORY_NAME_MAX 64
#define IB_PEER_MEMORY_VER_MAX 16
#define PEER_MEM_INVALIDATE_UNMAPS (1 << 0)

struct device;

struct peer_memory_client {
	char name[IB_PEER_MEMORY_NAME_MAX];
	char version[IB_PEER_MEMORY_VER_MAX];
	int (*acquire)(unsigned long addr, size_t size, void *peer_mem_private_data,
		       char *peer_mem_name, void **client_context);
	int (*get_pages)(unsigned long addr, size_t size, int write, int force,
			 struct sg_table *sg_head, void *client_context, u64 core_context);
	int (*dma_map)(struct sg_table *sg_head, void *client_context,
		       struct device *dma_device, int dmasync, int *nmap);
	int (*dma_unmap)(struct sg_table *sg_head, void *client_context,
			 struct device *dma_device);
	void (*put_pages)(struct sg_table *sg_head, void *client_context);
	unsigned long (*get_page_size)(void *client_context);
	void (*release)(void *client_context);
};

struct peer_memory_client_ex {
	struct peer_memory_client client;
	size_t ex_size;
	u32 flags;
};

typedef int (*invalidate_peer_memory)(void *reg_handle, u64 core_context);

void *ib_register_peer_memory_client(const struct peer_memory_client *peer_client,
				     invalidate_peer_memory *invalidate_callback);
void ib_unregister_peer_memory_client(void *reg_handle);

#endif
