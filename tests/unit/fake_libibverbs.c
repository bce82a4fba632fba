/* A stand-in libibverbs for the unit tests: lets the gpudirect_loopback helper
 * run on a machine without an RDMA device, so that its pair mode (server and
 * client in two processes, connection data over TCP) and its loopback are
 * exercised end to end: option parsing, the exchange, the QP transitions it asks
 * for, the byte compare and the JSON result.
 *
 * One device "fake0", port 1 ACTIVE, Ethernet (RoCE), GID 0 fe80::1, GID 1
 * ::ffff:127.0.0.1 (RoCE v2 is not known: there is no sysfs). The QP number is
 * the process id, so an RDMA WRITE "through the NIC" lands in the process named
 * by the destination QP number, with process_vm_writev (the same process in
 * loopback). Completions are queued per CQ.
 *
 * Knobs (environment): FAKE_VERBS_DROP=1 completes writes successfully and
 * moves no data (the silent failure); FAKE_VERBS_NO_IPV4_GID=1 leaves GID 1 out.
 *
 *   cc -shared -fPIC -o libibverbs.so fake_libibverbs.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#undef ibv_query_port
#undef ibv_reg_mr

struct fake_cq {
    struct ibv_cq cq;
    struct ibv_wc ring[4096];
    unsigned head, tail;
};

struct fake_qp {
    struct ibv_qp qp;
    pid_t dest;
    int rts;
};

static struct ibv_device fake_dev;
static struct ibv_device *fake_list[2];
static uint32_t next_key = 0x100;

static int env_on(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0");
}

struct ibv_device **ibv_get_device_list(int *num)
{
    strcpy(fake_dev.name, "fake0");
    strcpy(fake_dev.dev_name, "uverbs0");
    fake_list[0] = &fake_dev;
    fake_list[1] = NULL;
    if (num)
        *num = 1;
    return fake_list;
}

void ibv_free_device_list(struct ibv_device **list) { (void)list; }

const char *ibv_get_device_name(struct ibv_device *device) { return device->name; }

static int fake_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
    struct fake_cq *f = (struct fake_cq *)cq;
    int got = 0;
    while (got < n && f->head != f->tail) {
        wc[got++] = f->ring[f->head % 4096];
        f->head++;
    }
    return got;
}

static int fake_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
    struct fake_qp *f = (struct fake_qp *)qp;
    for (; wr; wr = wr->next) {
        if (!f->rts || wr->opcode != IBV_WR_RDMA_WRITE || wr->num_sge != 1) {
            *bad = wr;
            return EINVAL;
        }
        enum ibv_wc_status status = IBV_WC_SUCCESS;
        size_t len = wr->sg_list[0].length;
        void *src = (void *)(uintptr_t)wr->sg_list[0].addr;
        void *dst = (void *)(uintptr_t)wr->wr.rdma.remote_addr;
        if (!env_on("FAKE_VERBS_DROP")) {
            if (f->dest == getpid()) {
                memmove(dst, src, len);
            } else {
                struct iovec l = {src, len}, r = {dst, len};
                if (process_vm_writev(f->dest, &l, 1, &r, 1, 0) != (ssize_t)len)
                    status = IBV_WC_REM_ACCESS_ERR;
            }
        }
        if ((wr->send_flags & IBV_SEND_SIGNALED) || status != IBV_WC_SUCCESS) {
            struct fake_cq *cq = (struct fake_cq *)qp->send_cq;
            struct ibv_wc *wc = &cq->ring[cq->tail % 4096];
            memset(wc, 0, sizeof(*wc));
            wc->wr_id = wr->wr_id;
            wc->status = status;
            wc->opcode = IBV_WC_RDMA_WRITE;
            wc->qp_num = qp->qp_num;
            cq->tail++;
        }
    }
    return 0;
}

struct ibv_context *ibv_open_device(struct ibv_device *device)
{
    struct ibv_context *ctx = calloc(1, sizeof(*ctx));
    if (!ctx)
        return NULL;
    ctx->device = device;
    ctx->ops.poll_cq = fake_poll_cq;
    ctx->ops.post_send = fake_post_send;
    ctx->cmd_fd = -1;
    ctx->async_fd = -1;
    return ctx;
}

int ibv_close_device(struct ibv_context *ctx)
{
    free(ctx);
    return 0;
}

int ibv_query_port(struct ibv_context *ctx, uint8_t port, struct _compat_ibv_port_attr *compat)
{
    struct ibv_port_attr *pa = (struct ibv_port_attr *)compat;   /* the caller passes the full struct */
    (void)ctx;
    if (port != 1)
        return EINVAL;
    pa->state = IBV_PORT_ACTIVE;
    pa->max_mtu = IBV_MTU_4096;
    pa->active_mtu = IBV_MTU_1024;
    pa->gid_tbl_len = 4;
    pa->max_msg_sz = 1u << 31;
    pa->lid = 0;
    pa->link_layer = IBV_LINK_LAYER_ETHERNET;
    return 0;
}

int ibv_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid)
{
    (void)ctx;
    if (port != 1 || index < 0 || index >= 4)
        return EINVAL;
    memset(gid, 0, sizeof(*gid));
    if (index == 0) {
        gid->raw[0] = 0xfe;
        gid->raw[1] = 0x80;
        gid->raw[15] = 1;
    } else if (index == 1 && !env_on("FAKE_VERBS_NO_IPV4_GID")) {
        gid->raw[10] = gid->raw[11] = 0xff;
        gid->raw[12] = 127;
        gid->raw[15] = 1;
    }
    return 0;
}

int ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr)
{
    (void)ctx;
    memset(attr, 0, sizeof(*attr));
    attr->max_qp_wr = 1024;
    attr->max_cqe = 4095;
    return 0;
}

struct ibv_pd *ibv_alloc_pd(struct ibv_context *ctx)
{
    struct ibv_pd *pd = calloc(1, sizeof(*pd));
    if (pd)
        pd->context = ctx;
    return pd;
}

int ibv_dealloc_pd(struct ibv_pd *pd)
{
    free(pd);
    return 0;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_context, struct ibv_comp_channel *channel,
                             int comp_vector)
{
    struct fake_cq *f = calloc(1, sizeof(*f));
    (void)cq_context;
    (void)channel;
    (void)comp_vector;
    if (!f)
        return NULL;
    f->cq.context = ctx;
    f->cq.cqe = cqe;
    return &f->cq;
}

int ibv_destroy_cq(struct ibv_cq *cq)
{
    free(cq);
    return 0;
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
    struct fake_qp *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    f->qp.context = pd->context;
    f->qp.pd = pd;
    f->qp.send_cq = attr->send_cq;
    f->qp.recv_cq = attr->recv_cq;
    f->qp.qp_type = attr->qp_type;
    f->qp.qp_num = (uint32_t)getpid();
    f->qp.state = IBV_QPS_RESET;
    return &f->qp;
}

int ibv_destroy_qp(struct ibv_qp *qp)
{
    free(qp);
    return 0;
}

int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
    struct fake_qp *f = (struct fake_qp *)qp;
    if (!(mask & IBV_QP_STATE))
        return EINVAL;
    if (attr->qp_state == IBV_QPS_RTR) {
        if (!(mask & IBV_QP_DEST_QPN) || !(mask & IBV_QP_AV) || qp->state != IBV_QPS_INIT)
            return EINVAL;
        /* RoCE needs a GRH with a source GID the port has */
        if (!attr->ah_attr.is_global || attr->ah_attr.grh.sgid_index >= 4)
            return EINVAL;
        f->dest = (pid_t)attr->dest_qp_num;
    }
    if (attr->qp_state == IBV_QPS_RTS) {
        if (qp->state != IBV_QPS_RTR)
            return EINVAL;
        f->rts = 1;
    }
    qp->state = attr->qp_state;
    return 0;
}

static struct ibv_mr *fake_mr(struct ibv_pd *pd, void *addr, size_t length)
{
    struct ibv_mr *mr = calloc(1, sizeof(*mr));
    if (!mr)
        return NULL;
    mr->context = pd->context;
    mr->pd = pd;
    mr->addr = addr;
    mr->length = length;
    mr->lkey = next_key++;
    mr->rkey = next_key++;
    return mr;
}

struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
    (void)access;
    return fake_mr(pd, addr, length);
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, unsigned int access)
{
    (void)iova;
    (void)access;
    return fake_mr(pd, addr, length);
}

int ibv_dereg_mr(struct ibv_mr *mr)
{
    free(mr);
    return 0;
}

const char *ibv_wc_status_str(enum ibv_wc_status status)
{
    return status == IBV_WC_SUCCESS ? "success" : status == IBV_WC_REM_ACCESS_ERR ? "remote access error" : "error";
}

const char *ibv_port_state_str(enum ibv_port_state state)
{
    return state == IBV_PORT_ACTIVE ? "PORT_ACTIVE" : "PORT_DOWN";
}
