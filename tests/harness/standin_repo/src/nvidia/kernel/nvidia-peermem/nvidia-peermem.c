/* SPDX-License-Identifier: Linux-OpenIB */
/*
 * STAND-IN for nvidia-peermem.ko (kernel-open/nvidia-peermem/nvidia-peermem.c).
 *
 * Same control flow as the real module where the provisioning roles care:
 *
 *  - Built WITH the OFED peer-memory symbols (Kbuild found
 *    ib_register_peer_memory_client in an OFED Module.symvers and defined
 *    NV_MLNX_IB_PEER_MEM_SYMBOLS_PRESENT): init registers the "nv_mem" and
 *    "nv_mem_nc" peer memory clients with OFED, so the module depends on the
 *    OFED module (and on nvidia.ko through nvidia_p2p_*), and loads.
 *
 *  - Built WITHOUT them (NVIDIA driver installed before OFED, or inbox RDMA
 *    only): everything but the parameter check is compiled out and init
 *    returns -EINVAL, so `modprobe nvidia-peermem` fails with
 *    "could not insert 'nvidia_peermem': Invalid argument". The real stub
 *    prints nothing in that case, and neither does this one.
 */
#include <linux/module.h>
#include <linux/init.h>
#include <linux/slab.h>
#include <linux/errno.h>
#include <linux/string.h>

#include "nv-p2p.h"
#include "peer_mem.h"
#include "nv_standin_version.h"

#define DRV_NAME    "nv_mem"
#define DRV_VERSION NV_VERSION_STRING

MODULE_AUTHOR("gpudirect-rdma test harness (stand-in)");
MODULE_DESCRIPTION("NVIDIA GPU memory plug-in (STAND-IN)");
MODULE_LICENSE("Linux-OpenIB");
MODULE_VERSION(DRV_VERSION);

enum {
	NV_MEM_PEERDIRECT_SUPPORT_DEFAULT = 0,
	NV_MEM_PEERDIRECT_SUPPORT_LEGACY = 1,
};
static int peerdirect_support = NV_MEM_PEERDIRECT_SUPPORT_DEFAULT;
module_param(peerdirect_support, int, 0444);
MODULE_PARM_DESC(peerdirect_support, "Set level of support for Peer-direct, 0 [default] or 1 [legacy, for example MLNX_OFED 4.9 LTS]");

#define peer_err(FMT, ARGS...) printk(KERN_ERR "nvidia-peermem" " %s:%d " FMT, __func__, __LINE__, ## ARGS)

#if defined(NV_MLNX_IB_PEER_MEM_SYMBOLS_PRESENT)

static invalidate_peer_memory mem_invalidate_callback;
static void *reg_handle;
static void *reg_handle_nc;

struct nv_mem_context {
	struct nvidia_p2p_page_table *page_table;
	u64 core_context;
};

static void nv_mem_dummy_callback(void *data)
{
}

/* acquire return code: 1 mine, 0 - not mine. The stand-in nvidia.ko never owns memory. */
static int nv_mem_acquire(unsigned long addr, size_t size, void *peer_mem_private_data,
			  char *peer_mem_name, void **client_context)
{
	struct nv_mem_context ctx = { 0 };

	if (nvidia_p2p_get_pages(0, 0, addr, size, &ctx.page_table,
				 nv_mem_dummy_callback, &ctx) < 0)
		return 0;
	nvidia_p2p_put_pages(0, 0, addr, ctx.page_table);
	return 0;
}

static int nv_mem_get_pages(unsigned long addr, size_t size, int write, int force,
			    struct sg_table *sg_head, void *client_context, u64 core_context)
{
	return -EINVAL;
}

static int nv_dma_map(struct sg_table *sg_head, void *context, struct device *dma_device,
		      int dmasync, int *nmap)
{
	return -EINVAL;
}

static int nv_dma_unmap(struct sg_table *sg_head, void *context, struct device *dma_device)
{
	return 0;
}

static void nv_mem_put_pages(struct sg_table *sg_head, void *context)
{
}

static unsigned long nv_mem_get_page_size(void *context)
{
	return 1UL << 16;
}

static void nv_mem_release(void *context)
{
	struct nv_mem_context *c = context;

	if (c && c->page_table)
		nvidia_p2p_free_page_table(c->page_table);
}

static struct peer_memory_client_ex nv_mem_client_ex = { .client = {
	.acquire	= nv_mem_acquire,
	.get_pages	= nv_mem_get_pages,
	.dma_map	= nv_dma_map,
	.dma_unmap	= nv_dma_unmap,
	.put_pages	= nv_mem_put_pages,
	.get_page_size	= nv_mem_get_page_size,
	.release	= nv_mem_release,
}};

static struct peer_memory_client nv_mem_client_nc = {
	.acquire	= nv_mem_acquire,
	.get_pages	= nv_mem_get_pages,
	.dma_map	= nv_dma_map,
	.dma_unmap	= nv_dma_unmap,
	.put_pages	= nv_mem_put_pages,
	.get_page_size	= nv_mem_get_page_size,
	.release	= nv_mem_release,
};

#endif /* NV_MLNX_IB_PEER_MEM_SYMBOLS_PRESENT */

static int nv_mem_param_conf_check(void)
{
	switch (peerdirect_support) {
	case NV_MEM_PEERDIRECT_SUPPORT_DEFAULT:
	case NV_MEM_PEERDIRECT_SUPPORT_LEGACY:
		return 0;
	default:
		peer_err("invalid peerdirect_support param value %d\n", peerdirect_support);
		return -EINVAL;
	}
}

static int __init nv_mem_client_init(void)
{
	int rc = nv_mem_param_conf_check();

	if (rc)
		return rc;

#if defined(NV_MLNX_IB_PEER_MEM_SYMBOLS_PRESENT)
	{
	int status = 0;

	strscpy(nv_mem_client_ex.client.name, DRV_NAME, IB_PEER_MEMORY_NAME_MAX);
	strscpy(nv_mem_client_ex.client.version, DRV_VERSION, IB_PEER_MEMORY_VER_MAX - 1);
	nv_mem_client_ex.client.version[IB_PEER_MEMORY_VER_MAX - 1] = 1;
	if (peerdirect_support != NV_MEM_PEERDIRECT_SUPPORT_LEGACY) {
		nv_mem_client_ex.ex_size = sizeof(struct peer_memory_client_ex);
		nv_mem_client_ex.flags = PEER_MEM_INVALIDATE_UNMAPS;
	} else {
		nv_mem_client_ex.ex_size = 0;
		nv_mem_client_ex.flags = 0;
	}

	reg_handle = ib_register_peer_memory_client(&nv_mem_client_ex.client,
						    &mem_invalidate_callback);
	if (!reg_handle) {
		peer_err("nv_mem_client_init -- error while registering traditional client\n");
		status = -EINVAL;
		goto out;
	}

	/* The real module BUG()s here when nvidia.ko lacks persistent-pages support. */
	if (!nvidia_p2p_cap_persistent_pages) {
		status = -EINVAL;
		goto out;
	}
	strscpy(nv_mem_client_nc.name, DRV_NAME "_nc", IB_PEER_MEMORY_NAME_MAX);
	strscpy(nv_mem_client_nc.version, DRV_VERSION, IB_PEER_MEMORY_VER_MAX);
	reg_handle_nc = ib_register_peer_memory_client(&nv_mem_client_nc, NULL);
	if (!reg_handle_nc) {
		peer_err("nv_mem_client_init -- error while registering nc client\n");
		status = -EINVAL;
		goto out;
	}

out:
	if (status) {
		if (reg_handle) {
			ib_unregister_peer_memory_client(reg_handle);
			reg_handle = NULL;
		}
		if (reg_handle_nc) {
			ib_unregister_peer_memory_client(reg_handle_nc);
			reg_handle_nc = NULL;
		}
	}
	return status;
	}
#else
	return -EINVAL;
#endif
}

static void __exit nv_mem_client_cleanup(void)
{
#if defined(NV_MLNX_IB_PEER_MEM_SYMBOLS_PRESENT)
	if (reg_handle)
		ib_unregister_peer_memory_client(reg_handle);
	if (reg_handle_nc)
		ib_unregister_peer_memory_client(reg_handle_nc);
#endif
}

module_init(nv_mem_client_init);
module_exit(nv_mem_client_cleanup);
