// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * STAND-IN for the peer-memory ("PeerDirect") part of MLNX_OFED's ib_core.
 *
 * Real DOCA-OFED / MLNX_OFED replace Debian's ib_core with their own, which
 * exports ib_register_peer_memory_client / ib_unregister_peer_memory_client.
 * A stand-in cannot ship a module named ib_core without shadowing the inbox
 * one that rdma_rxe (soft-RoCE) and ib_uverbs need, so the symbols live in
 * this small module instead. It depends on the inbox ib_core (it registers a
 * no-op IB client), so loading it pulls ib_core in, as with the real stack.
 *
 * Like the real stack it publishes registered clients under
 * /sys/kernel/mm/memory_peers/<name>/version, which is where one looks to see
 * whether nvidia-peermem registered ("nv_mem", "nv_mem_nc").
 */
#include <linux/module.h>
#include <linux/kernel.h>
#include <linux/slab.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/kobject.h>
#include <linux/sysfs.h>
#include <linux/mm.h>
#include <rdma/ib_verbs.h>
#include <rdma/peer_mem.h>
#include "standin_version.h"

MODULE_AUTHOR("gpudirect-rdma test harness (stand-in)");
MODULE_DESCRIPTION("STAND-IN: MLNX_OFED/DOCA-OFED peer memory client API (ib_register_peer_memory_client)");
MODULE_LICENSE("Dual BSD/GPL");
MODULE_VERSION(OFED_STANDIN_VERSION);

struct peer_entry {
	struct list_head list;
	const struct peer_memory_client *client;
	struct kobject *kobj;
	char version[IB_PEER_MEMORY_VER_MAX];
};

static LIST_HEAD(peers);
static DEFINE_MUTEX(peers_lock);
static struct kobject *memory_peers_kobj;

static int standin_invalidate(void *reg_handle, u64 core_context)
{
	return 0;
}

static ssize_t version_show(struct kobject *kobj, struct kobj_attribute *attr, char *buf)
{
	struct peer_entry *e;
	ssize_t n = -ENOENT;

	mutex_lock(&peers_lock);
	list_for_each_entry(e, &peers, list) {
		if (e->kobj == kobj) {
			n = sysfs_emit(buf, "%s\n", e->version);
			break;
		}
	}
	mutex_unlock(&peers_lock);
	return n;
}

static ssize_t zero_show(struct kobject *kobj, struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "0\n");
}

static struct kobj_attribute version_attr = __ATTR_RO(version);
static struct kobj_attribute num_alloc_mrs_attr = __ATTR(num_alloc_mrs, 0444, zero_show, NULL);
static struct kobj_attribute num_reg_pages_attr = __ATTR(num_reg_pages, 0444, zero_show, NULL);
static struct attribute *peer_attrs[] = {
	&version_attr.attr,
	&num_alloc_mrs_attr.attr,
	&num_reg_pages_attr.attr,
	NULL,
};
static const struct attribute_group peer_group = { .attrs = peer_attrs };

void *ib_register_peer_memory_client(const struct peer_memory_client *peer_client,
				     invalidate_peer_memory *invalidate_callback)
{
	struct peer_entry *e;

	if (!peer_client)
		return NULL;
	e = kzalloc(sizeof(*e), GFP_KERNEL);
	if (!e)
		return NULL;
	e->client = peer_client;
	strscpy(e->version, peer_client->version, sizeof(e->version));
	if (memory_peers_kobj) {
		e->kobj = kobject_create_and_add(peer_client->name, memory_peers_kobj);
		if (e->kobj && sysfs_create_group(e->kobj, &peer_group)) {
			kobject_put(e->kobj);
			e->kobj = NULL;
		}
	}
	if (invalidate_callback)
		*invalidate_callback = standin_invalidate;
	mutex_lock(&peers_lock);
	list_add_tail(&e->list, &peers);
	mutex_unlock(&peers_lock);
	pr_info("ib_peer_mem: registered peer memory client '%s' version %s\n",
		peer_client->name, e->version);
	return e;
}
EXPORT_SYMBOL(ib_register_peer_memory_client);

void ib_unregister_peer_memory_client(void *reg_handle)
{
	struct peer_entry *e = reg_handle;

	if (!e)
		return;
	mutex_lock(&peers_lock);
	list_del(&e->list);
	mutex_unlock(&peers_lock);
	pr_info("ib_peer_mem: unregistered peer memory client '%s'\n", e->client->name);
	if (e->kobj)
		kobject_put(e->kobj);
	kfree(e);
}
EXPORT_SYMBOL(ib_unregister_peer_memory_client);

/* A no-op IB client: makes this module depend on the inbox ib_core. */
static int standin_add_one(struct ib_device *device)
{
	return 0;
}

static void standin_remove_one(struct ib_device *device, void *client_data)
{
}

static struct ib_client standin_client = {
	.name = "ib_peer_mem",
	.add = standin_add_one,
	.remove = standin_remove_one,
};

static int __init ib_peer_mem_init(void)
{
	int rc = ib_register_client(&standin_client);

	if (rc)
		return rc;
	memory_peers_kobj = kobject_create_and_add("memory_peers", mm_kobj);
	pr_info("ib_peer_mem: OFED stand-in %s loaded (peer memory API available)\n",
		OFED_STANDIN_VERSION);
	return 0;
}

static void __exit ib_peer_mem_exit(void)
{
	if (memory_peers_kobj)
		kobject_put(memory_peers_kobj);
	ib_unregister_client(&standin_client);
}

module_init(ib_peer_mem_init);
module_exit(ib_peer_mem_exit);
