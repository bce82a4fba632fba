/* gpudirect_loopback helper: verbs and CUDA resources (released in cleanup), RDMA writes,
 * completions, the copy-back and compare, the bandwidth measurement. */
#include "gpudirect_loopback.h"

/* ---- state released in cleanup() ---- */
struct ibv_device **dev_list;
struct ibv_context *ctx;
struct ibv_pd *pd;
struct ibv_cq *cq;
struct ibv_qp *qp;
struct ibv_mr *src_mr, *dst_mr, *stage_mr;
uint8_t *src_buf, *dst_host, *stage_buf, *check_buf;
int stage_cuda_registered;
static CUdevice cudev;
static CUcontext cuctx;
static int ctx_retained;
CUdeviceptr dptr;
int dmabuf_fd = -1;

void cleanup(void)
{
    if (qp) ibv_destroy_qp(qp);
    if (src_mr) ibv_dereg_mr(src_mr);
    if (dst_mr) ibv_dereg_mr(dst_mr);
    if (stage_mr) ibv_dereg_mr(stage_mr);
    if (cq) ibv_destroy_cq(cq);
    if (pd) ibv_dealloc_pd(pd);
    if (ctx) ibv_close_device(ctx);
    if (dev_list) ibv_free_device_list(dev_list);
    if (dmabuf_fd >= 0) close(dmabuf_fd);
    if (stage_cuda_registered && cu.MemHostUnregister) cu.MemHostUnregister(stage_buf);
    if (dptr) cu.MemFree(dptr);
    if (ctx_retained) cu.DevicePrimaryCtxRelease(cudev);
    free(src_buf);
    free(dst_host);
    free(stage_buf);
    free(check_buf);
}

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

void *host_alloc(size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, 4096, round_up(n, 4096)))
        return NULL;
    return p;
}

int cuda_setup(size_t alloc, int *dmabuf_attr, int *gdr_attr, int *driver_version,
               char *name, size_t *free_b, size_t *total_b)
{
    CUresult r;
    if (cuda_open())
        return -1;
    if ((r = cu.Init(0)))
        return fail("cuda_error", "cuInit", 0, "cuInit failed: %s (is the nvidia module loaded?)", cuerr(r));
    cu.DriverGetVersion(driver_version);
    if ((r = cu.DeviceGetByPCIBusId(&cudev, opt.gpu)))
        return fail("unknown_gpu", "cuDeviceGetByPCIBusId", 0, "CUDA has no device at %s: %s", opt.gpu, cuerr(r));
    cu.DeviceGetName(name, 128, cudev);
    cu.DeviceGetAttribute(dmabuf_attr, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, cudev);
    cu.DeviceGetAttribute(gdr_attr, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED, cudev);
    if ((r = cu.DevicePrimaryCtxRetain(&cuctx, cudev)))
        return fail("cuda_error", "cuDevicePrimaryCtxRetain", 0, "%s", cuerr(r));
    ctx_retained = 1;
    if ((r = cu.CtxSetCurrent(cuctx)))
        return fail("cuda_error", "cuCtxSetCurrent", 0, "%s", cuerr(r));
    if ((r = cu.MemGetInfo(free_b, total_b)))
        return fail("cuda_error", "cuMemGetInfo", 0, "%s", cuerr(r));
    if (alloc > *free_b)
        return fail("size_exceeds_gpu_memory", "cuMemGetInfo", 0,
                    "%zu bytes asked, %zu bytes free of %zu on %s", alloc, *free_b, *total_b, opt.gpu);
    if ((r = cu.MemAlloc(&dptr, alloc))) {
        dptr = 0;
        return fail("cuda_error", "cuMemAlloc", 0, "cuMemAlloc(%zu) failed: %s", alloc, cuerr(r));
    }
    /* Every CUDA memory operation on this allocation is synchronous with respect to
     * third-party (NIC) writes: a later cuMemcpyDtoH sees what the NIC wrote. */
    unsigned int one = 1;
    if ((r = cu.PointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, dptr)))
        return fail("cuda_error", "cuPointerSetAttribute", 0, "SYNC_MEMOPS: %s", cuerr(r));
    return 0;
}

int export_dmabuf(size_t alloc)
{
    CUresult r;
    if (!cu.MemGetHandleForAddressRange)
        return fail("dmabuf_unsupported", "cuMemGetHandleForAddressRange", 0,
                    "libcuda.so.1 has no cuMemGetHandleForAddressRange (driver older than 515)");
    r = cu.MemGetHandleForAddressRange(&dmabuf_fd, dptr, alloc, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
    if (r) {
        dmabuf_fd = -1;
        return fail("dmabuf_unsupported", "cuMemGetHandleForAddressRange", 0,
                    "dma-buf export of GPU memory failed: %s", cuerr(r));
    }
    return 0;
}

int wait_one(const char *stage)
{
    struct ibv_wc wc;
    double deadline = now_s() + opt.timeout;
    for (;;) {
        int n = ibv_poll_cq(cq, 1, &wc);
        if (n < 0)
            return fail("verbs_error", stage, 0, "ibv_poll_cq failed");
        if (n == 1) {
            if (wc.status != IBV_WC_SUCCESS)
                return fail("completion_error", stage, 0, "work completion status %d: %s (vendor_err 0x%x)",
                            wc.status, ibv_wc_status_str(wc.status), wc.vendor_err);
            return 0;
        }
        if (now_s() > deadline)
            return fail("completion_timeout", stage, 0, "no completion within %.0f s", opt.timeout);
    }
}

int post_write(void *laddr, uint32_t lkey, uint64_t raddr, uint32_t rkey, size_t len,
               uint64_t wr_id, int signaled)
{
    struct ibv_sge sge = {.addr = (uintptr_t)laddr, .length = (uint32_t)len, .lkey = lkey};
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    int rc = ibv_post_send(qp, &wr, &bad);
    if (rc)
        return fail("verbs_error", "ibv_post_send", rc, "ibv_post_send: %s", strerror(rc));
    return 0;
}

int reg_fail(const char *stage, const char *what)
{
    int e = errno;
    if (e == ENOMEM)
        return fail("memlock_too_low", stage, e, "%s: %s (locked-memory limit or pinned memory exhausted)",
                    what, strerror(e));
    return fail("verbs_error", stage, e, "%s: %s", what, strerror(e));
}

/* INIT -> RTR -> RTS towards (dqpn, dlid, dgid): the QP itself in loopback, the
 * other host's QP in pair mode. */
int connect_qp(enum ibv_mtu mtu, uint32_t dqpn, uint16_t dlid, union ibv_gid *dgid,
               uint32_t rq_psn, uint32_t sq_psn)
{
    struct ibv_qp_attr a;
    int rc;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = (uint8_t)opt.port;
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    if ((rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)))
        return fail("verbs_error", "modify_qp_init", rc, "QP to INIT: %s", strerror(rc));
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = mtu;
    a.dest_qp_num = dqpn;
    a.rq_psn = rq_psn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.port_num = (uint8_t)opt.port;
    a.ah_attr.dlid = dlid;
    if (opt.gid_index >= 0) {
        a.ah_attr.is_global = 1;
        a.ah_attr.grh.dgid = *dgid;
        a.ah_attr.grh.sgid_index = (uint8_t)opt.gid_index;
        a.ah_attr.grh.hop_limit = 64;
    }
    if ((rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                        IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)))
        return fail("verbs_error", "modify_qp_rtr", rc, "QP to RTR: %s (GID index %d)", strerror(rc), opt.gid_index);
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = sq_psn;
    a.max_rd_atomic = 1;
    if ((rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                        IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)))
        return fail("verbs_error", "modify_qp_rts", rc, "QP to RTS: %s", strerror(rc));
    return 0;
}

int connect_self(struct ibv_port_attr *pa, union ibv_gid *gid)
{
    /* connected to itself: loopback through the port */
    return connect_qp(pa->active_mtu, qp->qp_num, pa->lid, gid, 0, 0);
}

/* Register the cuMemAlloc buffer (dptr) with the NIC the way opt.mode says. */
struct ibv_mr *reg_gpu(size_t alloc, int access)
{
    struct ibv_mr *mr;
    if (!strcmp(opt.mode, "cuda_peermem")) {
        mr = ibv_reg_mr(pd, (void *)(uintptr_t)dptr, alloc, access);
        if (!mr) {
            int e = errno;
            if (e == ENOMEM)
                reg_fail("ibv_reg_mr_gpu", "ibv_reg_mr on cuMemAlloc memory");
            else
                fail("peermem_not_loaded", "ibv_reg_mr_gpu", e,
                     "ibv_reg_mr on GPU memory failed: %s (no peer-memory client: nvidia_peermem not loaded, "
                     "or built without MLNX_OFED peer-memory support)", strerror(e));
        }
        return mr;
    }
    reg_dmabuf_fn reg_dmabuf = (reg_dmabuf_fn)dlsym(RTLD_DEFAULT, "ibv_reg_dmabuf_mr");
    if (!reg_dmabuf) {
        fail("dmabuf_unsupported", "ibv_reg_dmabuf_mr", 0, "libibverbs has no ibv_reg_dmabuf_mr (rdma-core < 34)");
        return NULL;
    }
    if (export_dmabuf(alloc))
        return NULL;
    mr = reg_dmabuf(pd, 0, alloc, (uint64_t)dptr, dmabuf_fd, access);
    if (!mr) {
        int e = errno;
        if (e == ENOMEM)
            reg_fail("ibv_reg_dmabuf_mr", "ibv_reg_dmabuf_mr on the GPU dma-buf");
        else
            fail("dmabuf_unsupported", "ibv_reg_dmabuf_mr", e,
                 "ibv_reg_dmabuf_mr failed: %s (the RDMA driver or kernel cannot import dma-buf)", strerror(e));
    }
    return mr;
}

/* After the write of B over A: optionally flip one byte (--corrupt), copy the
 * destination back (GPU memory with cuMemcpyDtoH, never a CPU mapping) and
 * compare every byte. Fails with pattern_not_overwritten or data_mismatch. */
int verify_destination(int gpu_mode, struct cmp *c)
{
    size_t off = opt.size / 2 + (opt.size > 1 ? 1 : 0);
    if (off >= opt.size)
        off = opt.size - 1;
    if (opt.corrupt) {   /* flip one bit of one destination byte after the transfer */
        if (gpu_mode)
            cu.MemsetD8(dptr + off, (unsigned char)(pat_b(off) ^ 1), 1);
        else
            dst_host[off] ^= 1;
    }
    if (gpu_mode) {
        CUresult r = cu.MemcpyDtoH(check_buf, dptr, opt.size);   /* never a CPU mapping */
        if (r)
            return fail("cuda_error", "copy_back", 0, "cuMemcpyDtoH: %s", cuerr(r));
        compare(check_buf, opt.size, c);
    } else {
        compare(dst_host, opt.size, c);
    }
    if (c->mismatches)
        return fail(c->old_pattern == c->mismatches ? "pattern_not_overwritten" : "data_mismatch", "compare", 0,
                    "%zu of %zu bytes differ, first at offset %lld (got 0x%02x, sent 0x%02x); %zu still hold the old pattern",
                    c->mismatches, c->compared, c->first, c->got, c->expected, c->old_pattern);
    return 0;
}

/* iters writes of size, depth outstanding, signal every cq_mod */
int measure_bandwidth(void *laddr, uint32_t lkey, uint64_t raddr, uint32_t rkey, double *bw, double *elapsed)
{
    struct ibv_wc wc[16];
    long posted = 0, completed = 0;
    int cq_mod = opt.depth >= 2 ? opt.depth / 2 : 1;
    if (cq_mod > 64)
        cq_mod = 64;
    double t0 = now_s(), deadline = t0 + opt.timeout;
    while (completed < opt.iters) {
        while (posted < opt.iters && posted - completed < opt.depth) {
            int sig = ((posted + 1) % cq_mod == 0) || posted + 1 == opt.iters;
            if (post_write(laddr, lkey, raddr, rkey, opt.size, (uint64_t)(posted + 1), sig))
                return -1;
            posted++;
        }
        int n = ibv_poll_cq(cq, 16, wc);
        if (n < 0)
            return fail("verbs_error", "ibv_poll_cq", 0, "ibv_poll_cq failed");
        for (int i = 0; i < n; i++) {
            if (wc[i].status != IBV_WC_SUCCESS)
                return fail("completion_error", "write_bandwidth", 0, "work completion status %d: %s (vendor_err 0x%x)",
                            wc[i].status, ibv_wc_status_str(wc[i].status), wc[i].vendor_err);
            completed = (long)wc[i].wr_id;
        }
        if (n == 0 && now_s() > deadline)
            return fail("completion_timeout", "write_bandwidth", 0, "%ld of %ld writes completed within %.0f s",
                        completed, opt.iters, opt.timeout);
    }
    *elapsed = now_s() - t0;
    *bw = opt.size * (double)opt.iters * 8 / *elapsed / 1e9;
    return 0;
}
