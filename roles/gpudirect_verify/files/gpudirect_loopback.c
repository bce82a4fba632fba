/* gpudirect_loopback helper: RDMA WRITE loopback through one port of one RDMA
 * device into host or GPU memory, copy back, compare every byte, measure.
 * Prints exactly one JSON line on stdout. Built by the gpudirect_loopback
 * Ansible module with: cc -O2 -o helper helper.c -libverbs -ldl
 * libcuda.so.1 is opened at run time; no CUDA headers are needed. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#define HELPER_VERSION 2   /* 2: pair mode; both sides of a pair must run the same version */

/* ---- CUDA driver API subset (declared here: no cuda.h needed) ---- */
typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef unsigned long long CUdeviceptr;
#define CU_POINTER_ATTRIBUTE_SYNC_MEMOPS 6
#define CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED 116
#define CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED 124
#define CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD 1
#define CU_MEMHOSTREGISTER_PORTABLE 1

static struct {
    void *lib;
    CUresult (*Init)(unsigned);
    CUresult (*DriverGetVersion)(int *);
    CUresult (*DeviceGetByPCIBusId)(CUdevice *, const char *);
    CUresult (*DeviceGetName)(char *, int, CUdevice);
    CUresult (*DeviceGetAttribute)(int *, int, CUdevice);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*DevicePrimaryCtxRelease)(CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*CtxSynchronize)(void);
    CUresult (*MemGetInfo)(size_t *, size_t *);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
    CUresult (*MemsetD8)(CUdeviceptr, unsigned char, size_t);
    CUresult (*PointerSetAttribute)(const void *, int, CUdeviceptr);
    CUresult (*MemGetHandleForAddressRange)(void *, CUdeviceptr, size_t, int, unsigned long long);
    CUresult (*MemHostRegister)(void *, size_t, unsigned);
    CUresult (*MemHostUnregister)(void *);
    CUresult (*GetErrorName)(CUresult, const char **);
} cu;

typedef struct ibv_mr *(*reg_dmabuf_fn)(struct ibv_pd *, uint64_t, size_t, uint64_t, int, int);

/* ---- result, printed as one JSON line ---- */
static char out[16384];
static size_t outlen;
static const char *err_code;   /* NULL: success */
static char err_detail[1024];
static const char *err_stage = "";
static int err_errno;

static void jraw(const char *fmt, ...)
{
    va_list ap;
    if (outlen >= sizeof(out) - 1)
        return;
    va_start(ap, fmt);
    int n = vsnprintf(out + outlen, sizeof(out) - outlen, fmt, ap);
    va_end(ap);
    if (n > 0)
        outlen += (size_t)n < sizeof(out) - outlen ? (size_t)n : sizeof(out) - outlen - 1;
}

static void jkey(const char *key) { jraw("%s\"%s\":", outlen > 1 ? "," : "", key); }

static void jstr(const char *key, const char *val)
{
    jkey(key);
    if (!val) {
        jraw("null");
        return;
    }
    jraw("\"");
    for (const unsigned char *p = (const unsigned char *)val; *p; p++) {
        if (*p == '"' || *p == '\\')
            jraw("\\%c", *p);
        else if (*p < 0x20 || *p >= 0x7f)
            jraw("\\u%04x", *p);
        else
            jraw("%c", *p);
    }
    jraw("\"");
}
static void jint(const char *key, long long v) { jkey(key); jraw("%lld", v); }
static void jdbl(const char *key, double v)
{
    jkey(key);
    if (v < 0)
        jraw("null");
    else
        jraw("%.4f", v);
}

static int fail(const char *code, const char *stage, int errnum, const char *fmt, ...)
{
    va_list ap;
    if (err_code)   /* keep the first error */
        return -1;
    err_code = code;
    err_stage = stage;
    err_errno = errnum;
    va_start(ap, fmt);
    vsnprintf(err_detail, sizeof(err_detail), fmt, ap);
    va_end(ap);
    return -1;
}

static const char *cuerr(CUresult r)
{
    const char *name = NULL;
    static char buf[32];
    if (cu.GetErrorName && cu.GetErrorName(r, &name) == 0 && name)
        return name;
    snprintf(buf, sizeof(buf), "CUresult %d", r);
    return buf;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Pattern B (what is sent) varies with the offset, so a write that lands at the
 * wrong place is caught; pattern A (what the destination holds before) is its
 * complement, so A[i] != B[i] at every offset and a byte that was not written is
 * always a mismatch. */
static inline uint8_t pat_b(size_t i)
{
    uint32_t h = (uint32_t)i * 2654435761u + (uint32_t)(i >> 32);
    h ^= h >> 15;
    return (uint8_t)(h ^ (h >> 8));
}
static inline uint8_t pat_a(size_t i) { return (uint8_t)~pat_b(i); }

static void fill(uint8_t *buf, size_t n, int which)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = which ? pat_b(i) : pat_a(i);
}

struct cmp {
    size_t compared, mismatches, old_pattern;
    long long first;
    int got, expected;
};

static void compare(const uint8_t *got, size_t n, struct cmp *c)
{
    c->compared += n;
    for (size_t i = 0; i < n; i++) {
        uint8_t b = pat_b(i);
        if (got[i] != b) {
            if (c->mismatches == 0) {
                c->first = (long long)i;
                c->got = got[i];
                c->expected = b;
            }
            c->mismatches++;
            if (got[i] == pat_a(i))
                c->old_pattern++;
        }
    }
}

static int load_sym(void **slot, const char *const *names, int required)
{
    for (; *names; names++) {
        *slot = dlsym(cu.lib, *names);
        if (*slot)
            return 0;
    }
    return required ? -1 : 0;
}

static int cuda_open(void)
{
    cu.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!cu.lib)
        return fail("cuda_unavailable", "dlopen", 0, "cannot load libcuda.so.1: %s", dlerror());
#define SYM(field, req, ...)                                                                  \
    do {                                                                                      \
        static const char *const n_[] = {__VA_ARGS__, NULL};                                 \
        if (load_sym((void **)&cu.field, n_, req))                                            \
            return fail("cuda_unavailable", "dlsym", 0, "libcuda.so.1 lacks %s (driver too old?)", n_[0]); \
    } while (0)
    SYM(Init, 1, "cuInit");
    SYM(DriverGetVersion, 1, "cuDriverGetVersion");
    SYM(DeviceGetByPCIBusId, 1, "cuDeviceGetByPCIBusId");
    SYM(DeviceGetName, 1, "cuDeviceGetName");
    SYM(DeviceGetAttribute, 1, "cuDeviceGetAttribute");
    SYM(DevicePrimaryCtxRetain, 1, "cuDevicePrimaryCtxRetain");
    SYM(DevicePrimaryCtxRelease, 1, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease");
    SYM(CtxSetCurrent, 1, "cuCtxSetCurrent");
    SYM(CtxSynchronize, 1, "cuCtxSynchronize");
    SYM(MemGetInfo, 1, "cuMemGetInfo_v2");
    SYM(MemAlloc, 1, "cuMemAlloc_v2");
    SYM(MemFree, 1, "cuMemFree_v2");
    SYM(MemcpyHtoD, 1, "cuMemcpyHtoD_v2");
    SYM(MemcpyDtoH, 1, "cuMemcpyDtoH_v2");
    SYM(MemsetD8, 1, "cuMemsetD8_v2");
    SYM(PointerSetAttribute, 1, "cuPointerSetAttribute");
    SYM(MemGetHandleForAddressRange, 0, "cuMemGetHandleForAddressRange");
    SYM(MemHostRegister, 0, "cuMemHostRegister_v2", "cuMemHostRegister");
    SYM(MemHostUnregister, 0, "cuMemHostUnregister");
    SYM(GetErrorName, 0, "cuGetErrorName");
#undef SYM
    return 0;
}

/* ---- options ---- */
static struct {
    const char *mode;       /* host | cuda_peermem | cuda_dmabuf */
    const char *device;
    int port;
    int gid_index;          /* -1: no GRH (InfiniBand) */
    const char *gpu;        /* PCI bus id */
    size_t size;
    long iters;
    int depth;
    int staged;
    int corrupt;
    double timeout;
    int selftest;
    int pair;               /* 0: loopback; PAIR_SERVER (target) or PAIR_CLIENT (initiator) */
    const char *peer;       /* client: the server's address */
    int pair_port;          /* TCP port of the out-of-band exchange */
    double pair_timeout;    /* server: wait for the client; client: keep trying to connect */
    int gid_auto;           /* --gid-index auto: the GID that carries this side's TCP address */
} opt = {"host", NULL, 1, -1, NULL, 1 << 20, 100, 128, 1, 0, 60.0, 0, 0, NULL, 18516, 120.0, 0};

#define PAIR_SERVER 1
#define PAIR_CLIENT 2

/* ---- state released in cleanup() ---- */
static struct ibv_device **dev_list;
static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_qp *qp;
static struct ibv_mr *src_mr, *dst_mr, *stage_mr;
static uint8_t *src_buf, *dst_host, *stage_buf, *check_buf;
static int stage_cuda_registered;
static CUdevice cudev;
static CUcontext cuctx;
static int ctx_retained;
static CUdeviceptr dptr;
static int dmabuf_fd = -1;

static void cleanup(void)
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

static size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

static void *host_alloc(size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, 4096, round_up(n, 4096)))
        return NULL;
    return p;
}

static int cuda_setup(size_t alloc, int *dmabuf_attr, int *gdr_attr, int *driver_version,
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

static int export_dmabuf(size_t alloc)
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

static int wait_one(const char *stage)
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

static int post_write(void *laddr, uint32_t lkey, uint64_t raddr, uint32_t rkey, size_t len,
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

static int reg_fail(const char *stage, const char *what)
{
    int e = errno;
    if (e == ENOMEM)
        return fail("memlock_too_low", stage, e, "%s: %s (locked-memory limit or pinned memory exhausted)",
                    what, strerror(e));
    return fail("verbs_error", stage, e, "%s: %s", what, strerror(e));
}

/* INIT -> RTR -> RTS towards (dqpn, dlid, dgid): the QP itself in loopback, the
 * other host's QP in pair mode. */
static int connect_qp(enum ibv_mtu mtu, uint32_t dqpn, uint16_t dlid, union ibv_gid *dgid,
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

static int connect_self(struct ibv_port_attr *pa, union ibv_gid *gid)
{
    /* connected to itself: loopback through the port */
    return connect_qp(pa->active_mtu, qp->qp_num, pa->lid, gid, 0, 0);
}

/* Register the cuMemAlloc buffer (dptr) with the NIC the way opt.mode says. */
static struct ibv_mr *reg_gpu(size_t alloc, int access)
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
static int verify_destination(int gpu_mode, struct cmp *c)
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
static int measure_bandwidth(void *laddr, uint32_t lkey, uint64_t raddr, uint32_t rkey, double *bw, double *elapsed)
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

/* ---- pair mode: an RC QP to the helper on another host; connection data over TCP ----
 * The server (target) owns the destination: it fills it with pattern A, publishes
 * its address and rkey, and after the client's write copies it back and compares
 * every byte (its compare is the verdict). The client (initiator) writes pattern B
 * from its source, then measures the bandwidth. One text line per message:
 *   both:   GDRPAIR <version> <role> <qpn> <psn> <lid> <gid hex> <mtu> <addr hex> <rkey hex> <size> <iters> <mode>
 *   server: READY                    its QP is connected: the client may write
 *   client: WRITTEN                  the correctness write completed
 *   server: VERDICT <ok> <compared> <mismatches> <first> <got> <expected> <old_pattern>
 *   client: DONE <gbps> <elapsed_s>  after the bandwidth writes
 *   either: ERROR <code> <stage> <detail>   instead of its next message, then it exits */
struct conn {
    int version, mtu;
    char role[16], mode[16];
    unsigned qpn, psn, lid, rkey;
    unsigned long long addr, size;
    long iters;
    union ibv_gid gid;
};

static int sock_fd = -1;
static struct sockaddr_storage local_sa;
static char peer_text[INET6_ADDRSTRLEN];    /* the other side's address on the TCP connection */
static char local_text[INET6_ADDRSTRLEN];   /* this side's address on it */
static char local_gid_text[40], remote_gid_text[40];
static struct conn remote;
static int remote_known;
static char rbuf[2048];
static size_t rlen;
static int peer_told;                       /* the other side knows the outcome already: no ERROR line */
static char peer_error[48];                 /* the other side's failure code */

static const char *own_role(void) { return opt.pair == PAIR_SERVER ? "server" : "client"; }
static const char *other_role(void) { return opt.pair == PAIR_SERVER ? "client" : "server"; }

static void addr_text(const struct sockaddr *sa, char *buf, size_t n)
{
    const void *a = &((const struct sockaddr_in *)sa)->sin_addr;
    int family = sa->sa_family;
    if (family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
        a = &s6->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {   /* an IPv4 client of a dual-stack server */
            a = &s6->sin6_addr.s6_addr[12];
            family = AF_INET;
        }
    }
    if (!inet_ntop(family, a, buf, (socklen_t)n))
        snprintf(buf, n, "?");
}

static void gid_text(const union ibv_gid *g, char *buf, size_t n)
{
    const uint8_t *r = g->raw;
    snprintf(buf, n, "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x", r[0], r[1], r[2], r[3],
             r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12], r[13], r[14], r[15]);
}

static int send_line(const char *stage, const char *fmt, ...)
{
    char line[768];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n < 0)
        return fail("peer_protocol", stage, 0, "cannot format a message");
    if ((size_t)n >= sizeof(line)) {   /* cut, but keep it one line */
        n = (int)sizeof(line) - 1;
        line[n - 1] = '\n';
    }
    for (int off = 0; off < n;) {
        ssize_t w = send(sock_fd, line + off, (size_t)(n - off), MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return fail("peer_lost", stage, errno, "sending to the %s (%s) during %s: %s", other_role(), peer_text,
                        stage, strerror(errno));
        off += (int)w;
    }
    return 0;
}

static int recv_line(char *line, size_t n, double deadline, const char *stage)
{
    for (;;) {
        char *nl = memchr(rbuf, '\n', rlen);
        if (nl) {
            size_t len = (size_t)(nl - rbuf), keep = len < n - 1 ? len : n - 1;
            memcpy(line, rbuf, keep);
            line[keep] = 0;
            memmove(rbuf, nl + 1, rlen - len - 1);
            rlen -= len + 1;
            return 0;
        }
        if (rlen == sizeof(rbuf))
            return fail("peer_protocol", stage, 0, "a line longer than %zu bytes from %s", sizeof(rbuf), peer_text);
        double left = deadline - now_s();
        if (left <= 0)
            return fail("pair_timeout", stage, 0, "no word from the %s (%s) within %.0f s (this side at stage %s)",
                        other_role(), peer_text, opt.pair_timeout + opt.timeout, stage);
        struct pollfd p = {.fd = sock_fd, .events = POLLIN};
        if (poll(&p, 1, left > 1 ? 1000 : (int)(left * 1000) + 1) <= 0)
            continue;
        ssize_t got = recv(sock_fd, rbuf + rlen, sizeof(rbuf) - rlen, 0);
        if (got == 0)
            return fail("peer_lost", stage, 0, "the %s (%s) closed the connection (this side at stage %s): "
                        "it failed or was stopped; its own result says why", other_role(), peer_text, stage);
        if (got < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (got < 0)
            return fail("peer_lost", stage, errno, "receiving from the %s (%s) during %s: %s", other_role(), peer_text,
                        stage, strerror(errno));
        rlen += (size_t)got;
    }
}

/* The next line must start with word; an ERROR line from the other side fails as peer_failed. */
static int expect(const char *word, char *line, size_t n, double deadline, const char *stage)
{
    size_t k = strlen(word);
    if (recv_line(line, n, deadline, stage))
        return -1;
    if (!strncmp(line, "ERROR ", 6)) {
        char code[48] = "", where[48] = "";
        int used = 0;
        if (sscanf(line + 6, "%47s %47s %n", code, where, &used) < 2)
            used = 0;
        snprintf(peer_error, sizeof(peer_error), "%s", code);
        peer_told = 1;
        return fail("peer_failed", stage, 0, "the %s (%s) failed at its stage %s: [%s] %s", other_role(), peer_text,
                    where, code, used ? line + 6 + used : "");
    }
    if (strncmp(line, word, k) || (line[k] != ' ' && line[k] != 0))
        return fail("peer_protocol", stage, 0, "expected %s from %s, got \"%.80s\"", word, peer_text, line);
    return 0;
}

static int listen_socket(int family)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int one = 1, zero = 0, fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    memset(&ss, 0, sizeof(ss));
    if (family == AF_INET6) {   /* dual stack: IPv4 clients arrive as ::ffff:a.b.c.d */
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_any;
        a->sin6_port = htons((uint16_t)opt.pair_port);
        len = sizeof(*a);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_ANY);
        a->sin_port = htons((uint16_t)opt.pair_port);
        len = sizeof(*a);
    }
    if (bind(fd, (struct sockaddr *)&ss, len) || listen(fd, 1)) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static int pair_accept(double deadline)
{
    int fd = listen_socket(AF_INET6);
    if (fd < 0 && errno != EADDRINUSE && errno != EACCES)
        fd = listen_socket(AF_INET);   /* a host without IPv6 */
    if (fd < 0) {
        int e = errno;
        if (e == EADDRINUSE || e == EACCES)
            return fail("pair_port_in_use", "listen", e, "cannot listen on TCP port %d: %s", opt.pair_port, strerror(e));
        return fail("pair_socket_error", "listen", e, "cannot listen on TCP port %d: %s", opt.pair_port, strerror(e));
    }
    while (sock_fd < 0) {
        double left = deadline - now_s();
        if (left <= 0) {
            close(fd);
            return fail("pair_timeout", "accept", 0, "no pair client connected to TCP port %d within %.0f s",
                        opt.pair_port, opt.pair_timeout);
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, left > 1 ? 1000 : (int)(left * 1000) + 1) <= 0)
            continue;
        struct sockaddr_storage from;
        socklen_t fl = sizeof(from);
        int c = accept(fd, (struct sockaddr *)&from, &fl);
        if (c < 0)
            continue;
        sock_fd = c;
        addr_text((struct sockaddr *)&from, peer_text, sizeof(peer_text));
    }
    close(fd);   /* one client per run */
    return 0;
}

static int pair_connect(double deadline)
{
    struct addrinfo hints, *res = NULL, *ai;
    char port[16];
    int r, last = 0, attempts = 0;
    memset(&hints, 0, sizeof(hints));
    hints.ai_socktype = SOCK_STREAM;
    snprintf(port, sizeof(port), "%d", opt.pair_port);
    if ((r = getaddrinfo(opt.peer, port, &hints, &res)))
        return fail("peer_unreachable", "getaddrinfo", 0, "cannot resolve the server address %s: %s", opt.peer,
                    gai_strerror(r));
    snprintf(peer_text, sizeof(peer_text), "%s", opt.peer);
    while (sock_fd < 0) {
        for (ai = res; ai && sock_fd < 0; ai = ai->ai_next) {
            int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            if (fd < 0) {
                last = errno;
                continue;
            }
            attempts++;
            int e = connect(fd, ai->ai_addr, ai->ai_addrlen) ? errno : 0;
            if (e == EINPROGRESS) {
                struct pollfd p = {.fd = fd, .events = POLLOUT};
                double left = deadline - now_s();
                socklen_t l = sizeof(e);
                if (poll(&p, 1, left > 5 ? 5000 : left > 0 ? (int)(left * 1000) + 1 : 1) == 1)
                    getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &l);
                else
                    e = ETIMEDOUT;
            }
            if (e) {
                last = e;
                close(fd);
                continue;
            }
            fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
            sock_fd = fd;
            addr_text(ai->ai_addr, peer_text, sizeof(peer_text));
        }
        /* refused or unanswered: the server may still be building its helper; no route: give up */
        if (sock_fd < 0 && (last == ENETUNREACH || now_s() >= deadline)) {
            freeaddrinfo(res);
            return fail("peer_unreachable", "connect", last, "no pair server answered at %s TCP port %d within %.0f s "
                        "(%d attempts, last: %s)", opt.peer, opt.pair_port, opt.pair_timeout, attempts, strerror(last));
        }
        if (sock_fd < 0)
            usleep(250000);
    }
    freeaddrinfo(res);
    return 0;
}

static int gid_is_v2(int index)
{
    char path[256], type[64] = "";
    snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%d/gid_attrs/types/%d", opt.device, opt.port, index);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    if (!fgets(type, sizeof(type), f))
        type[0] = 0;
    fclose(f);
    return strstr(type, "v2") != NULL;
}

/* --gid-index auto: the GID that carries this side's address on the TCP connection
 * (RoCE v2 first): the RDMA traffic then takes the network the exchange took. */
static int gid_for_tcp_address(struct ibv_port_attr *pa, union ibv_gid *gid)
{
    union ibv_gid want, g;
    int first = -1, v2 = -1;
    memset(&want, 0, sizeof(want));
    if (local_sa.ss_family == AF_INET) {
        want.raw[10] = want.raw[11] = 0xff;
        memcpy(&want.raw[12], &((struct sockaddr_in *)&local_sa)->sin_addr, 4);
    } else {   /* IPv6, or IPv4 as ::ffff:a.b.c.d, which is the GID form already */
        memcpy(want.raw, &((struct sockaddr_in6 *)&local_sa)->sin6_addr, 16);
    }
    for (int i = 0; i < pa->gid_tbl_len && v2 < 0; i++) {
        if (ibv_query_gid(ctx, (uint8_t)opt.port, i, &g) || memcmp(&g, &want, sizeof(g)))
            continue;
        if (first < 0)
            first = i;
        if (gid_is_v2(i))
            v2 = i;
    }
    if (first < 0)
        return fail("no_gid", "gid_for_peer", 0, "no GID of %s port %d carries %s, this host's address on the TCP "
                    "connection to the %s (%s): the RDMA port is not on the network the pair was connected through. "
                    "The client's peer must be the server's address on the network of the RDMA ports (or set gid_index "
                    "on both sides)", opt.device, opt.port, local_text, other_role(), peer_text);
    opt.gid_index = v2 >= 0 ? v2 : first;
    *gid = want;
    return 0;
}

static int send_conn(struct ibv_port_attr *pa, union ibv_gid *gid, uint32_t psn, uint64_t addr, uint32_t rkey)
{
    char hex[33];
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", gid->raw[i]);
    return send_line("exchange", "GDRPAIR %d %s %u %u %u %s %d %llx %x %zu %ld %s\n", HELPER_VERSION, own_role(),
                     qp->qp_num, psn, (unsigned)pa->lid, hex, (int)pa->active_mtu, (unsigned long long)addr, rkey,
                     opt.size, opt.iters, opt.mode);
}

static int recv_conn(struct conn *c, double deadline)
{
    char line[512], hex[40];
    if (expect("GDRPAIR", line, sizeof(line), deadline, "exchange"))
        return -1;
    if (sscanf(line, "GDRPAIR %d %15s %u %u %u %39s %d %llx %x %llu %ld %15s", &c->version, c->role, &c->qpn, &c->psn,
               &c->lid, hex, &c->mtu, &c->addr, &c->rkey, &c->size, &c->iters, c->mode) != 12 || strlen(hex) != 32)
        return fail("peer_protocol", "exchange", 0, "cannot read the connection data from %s: \"%.80s\"", peer_text, line);
    for (int i = 0; i < 16; i++) {
        unsigned b;
        if (sscanf(hex + 2 * i, "%2x", &b) != 1)
            return fail("peer_protocol", "exchange", 0, "bad GID %s from %s", hex, peer_text);
        c->gid.raw[i] = (uint8_t)b;
    }
    remote_known = 1;
    gid_text(&c->gid, remote_gid_text, sizeof(remote_gid_text));
    if (c->version != HELPER_VERSION)
        return fail("pair_mismatch", "exchange", 0, "the %s (%s) runs helper version %d, this side version %d",
                    other_role(), peer_text, c->version, HELPER_VERSION);
    if (strcmp(c->role, other_role()))
        return fail("peer_protocol", "exchange", 0, "the other side (%s) is a %s too", peer_text, c->role);
    if (c->size != opt.size)
        return fail("pair_mismatch", "exchange", 0, "the %s (%s) was started with size %llu, this side with %zu",
                    other_role(), peer_text, c->size, opt.size);
    if (c->mtu < IBV_MTU_256 || c->mtu > IBV_MTU_4096)
        return fail("peer_protocol", "exchange", 0, "bad MTU code %d from %s", c->mtu, peer_text);
    return 0;
}

/* A failed or missing completion towards another host: say which path it was. */
static int pair_path_hint(void)
{
    size_t used = strlen(err_detail);
    if (err_code && (!strcmp(err_code, "completion_error") || !strcmp(err_code, "completion_timeout")))
        snprintf(err_detail + used, sizeof(err_detail) - used,
                 "; pair path: %s port %d GID %s (index %d) -> %s GID %s QP %u: the two ports must reach each other "
                 "(same subnet or a route between them, UDP port 4791 open, same MTU)", opt.device, opt.port,
                 local_gid_text[0] ? local_gid_text : "-", opt.gid_index, peer_text,
                 remote_gid_text[0] ? remote_gid_text : "-", remote.qpn);
    return -1;
}

static int pair_run(struct ibv_port_attr *pa, union ibv_gid *gid, int gpu_mode, size_t alloc, struct cmp *c,
                    double *bw, double *elapsed)
{
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, one = 1;
    uint64_t addr = 0;
    uint32_t rkey = 0, lkey = 0, psn;
    void *laddr = NULL;
    char line[512];
    double wait = opt.pair_timeout + opt.timeout;
    socklen_t sl = sizeof(local_sa);
    CUresult r;

    srand48((long)getpid() ^ (long)time(NULL));
    psn = (uint32_t)lrand48() & 0xffffff;
    if (!(check_buf = host_alloc(opt.size)))
        return fail("host_memory", "alloc", ENOMEM, "cannot allocate %zu bytes of host memory", opt.size);
    if (opt.pair == PAIR_SERVER) {   /* the destination, holding pattern A */
        if (!gpu_mode) {
            if (!(dst_host = host_alloc(alloc)))
                return fail("host_memory", "alloc", ENOMEM, "cannot allocate %zu bytes of host memory", alloc);
            fill(dst_host, opt.size, 0);
            if (!(dst_mr = ibv_reg_mr(pd, dst_host, alloc, access)))
                return reg_fail("ibv_reg_mr_host", "registering the host destination buffer");
            addr = (uintptr_t)dst_host;
        } else {
            fill(check_buf, opt.size, 0);
            if ((r = cu.MemcpyHtoD(dptr, check_buf, opt.size)))
                return fail("cuda_error", "fill_a", 0, "%s", cuerr(r));
            if (!(dst_mr = reg_gpu(alloc, access)))
                return -1;
            addr = (uint64_t)dptr;
        }
        rkey = dst_mr->rkey;
        if (pair_accept(now_s() + opt.pair_timeout))
            return -1;
    } else {   /* the source, holding pattern B */
        if (!gpu_mode) {
            if (!(src_buf = host_alloc(opt.size)))
                return fail("host_memory", "alloc", ENOMEM, "cannot allocate %zu bytes of host memory", opt.size);
            fill(src_buf, opt.size, 1);
            if (!(src_mr = ibv_reg_mr(pd, src_buf, opt.size, IBV_ACCESS_LOCAL_WRITE)))
                return reg_fail("ibv_reg_mr_host", "registering the host source buffer");
            laddr = src_buf;
        } else {
            fill(check_buf, opt.size, 1);
            if ((r = cu.MemcpyHtoD(dptr, check_buf, opt.size)))
                return fail("cuda_error", "fill_b", 0, "%s", cuerr(r));
            if (!(src_mr = reg_gpu(alloc, IBV_ACCESS_LOCAL_WRITE)))
                return -1;
            laddr = (void *)(uintptr_t)dptr;
        }
        lkey = src_mr->lkey;
        if (pair_connect(now_s() + opt.pair_timeout))
            return -1;
    }
    setsockopt(sock_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (getsockname(sock_fd, (struct sockaddr *)&local_sa, &sl) == 0)
        addr_text((struct sockaddr *)&local_sa, local_text, sizeof(local_text));
    if (opt.gid_auto && gid_for_tcp_address(pa, gid))
        return -1;
    if (opt.gid_index >= 0)
        gid_text(gid, local_gid_text, sizeof(local_gid_text));
    if (send_conn(pa, gid, psn, addr, rkey) || recv_conn(&remote, now_s() + wait))
        return -1;
    enum ibv_mtu mtu = remote.mtu < (int)pa->active_mtu ? (enum ibv_mtu)remote.mtu : pa->active_mtu;
    if (connect_qp(mtu, remote.qpn, (uint16_t)remote.lid, &remote.gid, remote.psn, psn))
        return -1;

    if (opt.pair == PAIR_SERVER) {
        if (send_line("ready", "READY\n") || expect("WRITTEN", line, sizeof(line), now_s() + wait, "wait_write"))
            return -1;
        int bad = verify_destination(gpu_mode, c);
        if (bad && !c->compared)
            return -1;   /* no compare (copy-back failed): the ERROR line tells the client */
        if (send_line("verdict", "VERDICT %d %zu %zu %lld %d %d %zu\n", !bad, c->compared, c->mismatches, c->first,
                      c->got, c->expected, c->old_pattern))
            return -1;
        if (bad) {
            peer_told = 1;
            return -1;
        }
        if (expect("DONE", line, sizeof(line), now_s() + wait, "wait_done"))
            return -1;
        if (sscanf(line, "DONE %lf %lf", bw, elapsed) != 2)
            return fail("peer_protocol", "wait_done", 0, "bad DONE line from %s: \"%.80s\"", peer_text, line);
        return 0;
    }
    if (expect("READY", line, sizeof(line), now_s() + wait, "wait_ready"))
        return -1;
    if (post_write(laddr, lkey, remote.addr, remote.rkey, opt.size, 1, 1) || wait_one("write_correctness"))
        return pair_path_hint();
    if (send_line("written", "WRITTEN\n") || expect("VERDICT", line, sizeof(line), now_s() + wait, "wait_verdict"))
        return -1;
    int ok = 0;
    if (sscanf(line, "VERDICT %d %zu %zu %lld %d %d %zu", &ok, &c->compared, &c->mismatches, &c->first, &c->got,
               &c->expected, &c->old_pattern) != 7)
        return fail("peer_protocol", "wait_verdict", 0, "bad VERDICT line from %s: \"%.80s\"", peer_text, line);
    if (!ok) {
        peer_told = 1;
        return fail(c->mismatches && c->old_pattern == c->mismatches ? "pattern_not_overwritten" : "data_mismatch",
                    "compare_on_server", 0, "the server (%s) copied back what arrived: %zu of %zu bytes differ, first at "
                    "offset %lld (got 0x%02x, sent 0x%02x); %zu still hold the old pattern", peer_text, c->mismatches,
                    c->compared, c->first, c->got, c->expected, c->old_pattern);
    }
    if (measure_bandwidth(laddr, lkey, remote.addr, remote.rkey, bw, elapsed))
        return pair_path_hint();
    return send_line("done", "DONE %.6f %.6f\n", *bw, *elapsed);
}

/* Tell the other side why this side stops (unless it knows), then hang up. */
static void pair_close(void)
{
    if (sock_fd < 0)
        return;
    if (err_code && !peer_told) {
        char detail[sizeof(err_detail)];
        snprintf(detail, sizeof(detail), "%s", err_detail);
        for (char *p = detail; *p; p++)
            if (*p == '\n' || *p == '\r')
                *p = ' ';
        send_line("error", "ERROR %s %s %s\n", err_code, err_stage[0] ? err_stage : "-", detail);
    }
    close(sock_fd);
    sock_fd = -1;
}

static int usage(void)
{
    fprintf(stderr, "usage: helper --device NAME [--port N] [--gid-index N] [--mode host|cuda_peermem|cuda_dmabuf]\n"
                    "              [--gpu BUSID] [--size BYTES] [--iters N] [--depth N] [--staged 0|1]\n"
                    "              [--corrupt] [--timeout S] | --selftest-gpu-only --gpu BUSID [...]\n"
                    "  pair mode:  (--pair-listen | --pair-peer HOST) [--pair-port N] [--pair-timeout S]\n"
                    "              [--gid-index N|auto] and the options above\n");
    return 2;
}

static int selftest_gpu(void)
{
    size_t alloc = round_up(opt.size, 2u << 20), free_b = 0, total_b = 0;
    int dmabuf_attr = -1, gdr_attr = -1, drv = 0;
    char name[128] = "";
    struct cmp c = {0, 0, 0, -1, 0, 0};
    double h2d = -1, d2h = -1;
    CUresult r;

    if (!(src_buf = host_alloc(opt.size)) || !(check_buf = host_alloc(opt.size)))
        fail("host_memory", "alloc", ENOMEM, "cannot allocate %zu bytes of host memory", opt.size);
    if (!err_code && !cuda_setup(alloc, &dmabuf_attr, &gdr_attr, &drv, name, &free_b, &total_b) && !export_dmabuf(alloc)) {
        /* round trip: A in, A back, then B in, B back */
        fill(src_buf, opt.size, 0);
        if ((r = cu.MemcpyHtoD(dptr, src_buf, opt.size)) || (r = cu.MemcpyDtoH(check_buf, dptr, opt.size)))
            fail("cuda_error", "memcpy_a", 0, "%s", cuerr(r));
        else if (memcmp(check_buf, src_buf, opt.size))
            fail("data_mismatch", "roundtrip_a", 0, "pattern A did not survive H2D + D2H");
        if (!err_code) {
            fill(src_buf, opt.size, 1);
            if ((r = cu.MemcpyHtoD(dptr, src_buf, opt.size)))
                fail("cuda_error", "memcpy_b", 0, "%s", cuerr(r));
        }
        if (!err_code && opt.corrupt)
            cu.MemsetD8(dptr + opt.size / 2 + 1, (unsigned char)(pat_b(opt.size / 2 + 1) ^ 1), 1);
        if (!err_code) {
            if ((r = cu.MemcpyDtoH(check_buf, dptr, opt.size)))
                fail("cuda_error", "memcpy_back", 0, "%s", cuerr(r));
            else
                compare(check_buf, opt.size, &c);
        }
        if (!err_code && c.mismatches)
            fail(c.old_pattern == c.mismatches ? "pattern_not_overwritten" : "data_mismatch", "compare", 0,
                 "%zu of %zu bytes differ, first at offset %lld", c.mismatches, c.compared, c.first);
        if (!err_code) {
            int pinned = cu.MemHostRegister &&
                         cu.MemHostRegister(src_buf, round_up(opt.size, 4096), CU_MEMHOSTREGISTER_PORTABLE) == 0;
            double t0 = now_s();
            for (long i = 0; i < opt.iters && !err_code; i++)
                if ((r = cu.MemcpyHtoD(dptr, src_buf, opt.size)))
                    fail("cuda_error", "h2d_bandwidth", 0, "%s", cuerr(r));
            double t1 = now_s();
            for (long i = 0; i < opt.iters && !err_code; i++)
                if ((r = cu.MemcpyDtoH(src_buf, dptr, opt.size)))
                    fail("cuda_error", "d2h_bandwidth", 0, "%s", cuerr(r));
            double t2 = now_s();
            if (pinned && cu.MemHostUnregister)
                cu.MemHostUnregister(src_buf);
            if (!err_code) {
                h2d = opt.size * (double)opt.iters * 8 / (t1 - t0) / 1e9;
                d2h = opt.size * (double)opt.iters * 8 / (t2 - t1) / 1e9;
            }
        }
    }
    jstr("mode", "selftest_gpu_only");
    jstr("gpu", opt.gpu);
    jstr("gpu_name", name[0] ? name : NULL);
    jint("cuda_driver_version", drv);
    jint("dmabuf_supported_attr", dmabuf_attr);
    jint("gpudirect_rdma_supported_attr", gdr_attr);
    jint("dmabuf_exported", dmabuf_fd >= 0);
    jint("sync_memops", dptr != 0);
    jint("gpu_free_bytes", (long long)free_b);
    jint("size", (long long)opt.size);
    jint("iterations", opt.iters);
    jint("bytes_compared", (long long)c.compared);
    jint("mismatches", (long long)c.mismatches);
    jint("old_pattern_bytes", (long long)c.old_pattern);
    if (c.mismatches) {
        jint("first_mismatch", c.first);
        jint("first_mismatch_got", c.got);
        jint("first_mismatch_expected", c.expected);
    }
    jdbl("h2d_bandwidth_gbps", h2d);
    jdbl("d2h_bandwidth_gbps", d2h);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {
        {"mode", 1, 0, 'm'}, {"device", 1, 0, 'd'}, {"port", 1, 0, 'p'}, {"gid-index", 1, 0, 'x'},
        {"gpu", 1, 0, 'g'}, {"size", 1, 0, 's'}, {"iters", 1, 0, 'n'}, {"depth", 1, 0, 't'},
        {"staged", 1, 0, 'S'}, {"corrupt", 0, 0, 'C'}, {"timeout", 1, 0, 'T'},
        {"selftest-gpu-only", 0, 0, 'G'}, {"version", 0, 0, 'V'}, {"pair-listen", 0, 0, 'L'},
        {"pair-peer", 1, 0, 'P'}, {"pair-port", 1, 0, 'O'}, {"pair-timeout", 1, 0, 'W'}, {0, 0, 0, 0}};
    int c, both_roles = 0;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'm': opt.mode = optarg; break;
        case 'd': opt.device = optarg; break;
        case 'p': opt.port = atoi(optarg); break;
        case 'x':
            if (!strcmp(optarg, "auto"))
                opt.gid_auto = 1;
            else
                opt.gid_index = atoi(optarg);
            break;
        case 'g': opt.gpu = optarg; break;
        case 's': opt.size = strtoull(optarg, NULL, 0); break;
        case 'n': opt.iters = strtol(optarg, NULL, 0); break;
        case 't': opt.depth = atoi(optarg); break;
        case 'S': opt.staged = atoi(optarg); break;
        case 'C': opt.corrupt = 1; break;
        case 'T': opt.timeout = atof(optarg); break;
        case 'G': opt.selftest = 1; break;
        case 'L': both_roles |= opt.pair == PAIR_CLIENT; opt.pair = PAIR_SERVER; break;
        case 'P': both_roles |= opt.pair == PAIR_SERVER; opt.pair = PAIR_CLIENT; opt.peer = optarg; break;
        case 'O': opt.pair_port = atoi(optarg); break;
        case 'W': opt.pair_timeout = atof(optarg); break;
        case 'V': printf("{\"helper_version\":%d}\n", HELPER_VERSION); return 0;
        default: return usage();
        }
    }
    int gpu_mode = strcmp(opt.mode, "host") != 0;
    out[outlen++] = '{';
    jint("helper_version", HELPER_VERSION);
    if (opt.size == 0 || opt.size > (1ull << 31) || opt.iters < 1 || opt.depth < 1)
        fail("bad_input", "arguments", 0, "size must be 1..2^31 bytes, iters and depth >= 1");
    else if ((opt.selftest || gpu_mode) && !opt.gpu)
        fail("bad_input", "arguments", 0, "--gpu BUSID is needed for mode %s", opt.selftest ? "selftest" : opt.mode);
    else if (!opt.selftest && !opt.device)
        fail("bad_input", "arguments", 0, "--device NAME is needed");
    else if (gpu_mode && strcmp(opt.mode, "cuda_peermem") && strcmp(opt.mode, "cuda_dmabuf"))
        fail("bad_input", "arguments", 0, "unknown mode %s", opt.mode);
    else if (both_roles)
        fail("bad_input", "arguments", 0, "--pair-listen (server) and --pair-peer (client) exclude each other");
    else if (opt.pair && opt.selftest)
        fail("bad_input", "arguments", 0, "pair mode and --selftest-gpu-only exclude each other");
    else if (opt.pair == PAIR_CLIENT && opt.corrupt)
        fail("bad_input", "arguments", 0, "--corrupt flips a destination byte: give it to the server (--pair-listen)");
    else if (opt.gid_auto && !opt.pair)
        fail("bad_input", "arguments", 0, "--gid-index auto needs pair mode (the GID of the TCP connection's address)");
    else if (opt.pair && (opt.pair_port < 1 || opt.pair_port > 65535 || opt.pair_timeout <= 0))
        fail("bad_input", "arguments", 0, "--pair-port must be 1..65535 and --pair-timeout > 0");

    if (!err_code && opt.selftest) {
        selftest_gpu();
        goto done;
    }
    if (err_code)
        goto done;

    /* ---- verbs loopback ---- */
    size_t alloc = gpu_mode ? round_up(opt.size, 2u << 20) : round_up(opt.size, 4096);
    size_t free_b = 0, total_b = 0;
    int dmabuf_attr = -1, gdr_attr = -1, drv = 0, num = 0;
    char name[128] = "";
    struct ibv_port_attr pa;
    struct ibv_device_attr da;
    union ibv_gid gid;
    struct cmp cmpres = {0, 0, 0, -1, 0, 0};
    double bw = -1, staged_bw = -1, elapsed = -1;
    const char *link_layer = NULL, *port_state = NULL;
    uint64_t raddr = 0;
    memset(&gid, 0, sizeof(gid));
    memset(&pa, 0, sizeof(pa));

    if (gpu_mode && cuda_setup(alloc, &dmabuf_attr, &gdr_attr, &drv, name, &free_b, &total_b))
        goto report;
    dev_list = ibv_get_device_list(&num);
    if (!dev_list || num == 0) {
        fail("no_rdma_device", "ibv_get_device_list", errno, "libibverbs sees no RDMA device");
        goto report;
    }
    for (int i = 0; i < num; i++)
        if (!strcmp(ibv_get_device_name(dev_list[i]), opt.device)) {
            ctx = ibv_open_device(dev_list[i]);
            if (!ctx) {
                fail("verbs_error", "ibv_open_device", errno, "%s: %s", opt.device, strerror(errno));
                goto report;
            }
        }
    if (!ctx) {
        char names[512] = "";
        for (int i = 0; i < num; i++) {
            strncat(names, i ? ", " : "", sizeof(names) - strlen(names) - 1);
            strncat(names, ibv_get_device_name(dev_list[i]), sizeof(names) - strlen(names) - 1);
        }
        fail("unknown_rdma_device", "ibv_get_device_list", 0, "no RDMA device %s; libibverbs sees: %s", opt.device, names);
        goto report;
    }
    if ((c = ibv_query_port(ctx, (uint8_t)opt.port, &pa))) {
        fail("verbs_error", "ibv_query_port", c, "port %d of %s: %s", opt.port, opt.device, strerror(c));
        goto report;
    }
    link_layer = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand";
    port_state = ibv_port_state_str(pa.state);
    if (pa.state != IBV_PORT_ACTIVE) {
        fail("port_down", "ibv_query_port", 0, "port %d of %s is %s, not ACTIVE", opt.port, opt.device, port_state);
        goto report;
    }
    if (pa.link_layer != IBV_LINK_LAYER_ETHERNET)
        opt.gid_auto = 0;   /* InfiniBand: LID routing, no GRH */
    if (pa.link_layer == IBV_LINK_LAYER_ETHERNET && opt.gid_index < 0 && !opt.gid_auto) {
        fail("no_gid", "gid", 0, "RoCE port needs a GID index (none populated?)");
        goto report;
    }
    if (opt.gid_index >= 0 && (c = ibv_query_gid(ctx, (uint8_t)opt.port, opt.gid_index, &gid))) {
        fail("no_gid", "ibv_query_gid", c, "GID index %d of %s port %d: %s", opt.gid_index, opt.device, opt.port, strerror(c));
        goto report;
    }
    if (ibv_query_device(ctx, &da) == 0) {
        if (opt.depth > da.max_qp_wr)
            opt.depth = da.max_qp_wr;
        if (opt.depth > da.max_cqe)
            opt.depth = da.max_cqe;
    }
    if (opt.size > pa.max_msg_sz) {
        fail("bad_input", "size", 0, "size %zu exceeds the port's max message size %u", opt.size, pa.max_msg_sz);
        goto report;
    }
    if (!(pd = ibv_alloc_pd(ctx))) {
        fail("verbs_error", "ibv_alloc_pd", errno, "%s", strerror(errno));
        goto report;
    }
    if (!(cq = ibv_create_cq(ctx, opt.depth + 1, NULL, NULL, 0))) {
        fail("verbs_error", "ibv_create_cq", errno, "%s", strerror(errno));
        goto report;
    }
    {
        struct ibv_qp_init_attr qa;
        memset(&qa, 0, sizeof(qa));
        qa.send_cq = cq;
        qa.recv_cq = cq;
        qa.qp_type = IBV_QPT_RC;
        qa.sq_sig_all = 0;
        qa.cap.max_send_wr = (uint32_t)opt.depth;
        qa.cap.max_recv_wr = 1;
        qa.cap.max_send_sge = 1;
        qa.cap.max_recv_sge = 1;
        if (!(qp = ibv_create_qp(pd, &qa))) {
            fail("verbs_error", "ibv_create_qp", errno, "%s", strerror(errno));
            goto report;
        }
    }
    if (opt.pair) {   /* the other end of the QP is on another host */
        pair_run(&pa, &gid, gpu_mode, alloc, &cmpres, &bw, &elapsed);
        goto report;
    }
    if (!(src_buf = host_alloc(opt.size)) || !(check_buf = host_alloc(opt.size))) {
        fail("host_memory", "alloc", ENOMEM, "cannot allocate %zu bytes of host memory", opt.size);
        goto report;
    }
    fill(src_buf, opt.size, 1);
    if (!(src_mr = ibv_reg_mr(pd, src_buf, opt.size, IBV_ACCESS_LOCAL_WRITE))) {
        reg_fail("ibv_reg_mr_host", "registering the host source buffer");
        goto report;
    }
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    if (!gpu_mode) {
        if (!(dst_host = host_alloc(alloc))) {
            fail("host_memory", "alloc", ENOMEM, "cannot allocate %zu bytes of host memory", alloc);
            goto report;
        }
        fill(dst_host, opt.size, 0);
        if (!(dst_mr = ibv_reg_mr(pd, dst_host, alloc, access))) {
            reg_fail("ibv_reg_mr_host", "registering the host destination buffer");
            goto report;
        }
        raddr = (uintptr_t)dst_host;
    } else {
        CUresult r;
        fill(check_buf, opt.size, 0);
        if ((r = cu.MemcpyHtoD(dptr, check_buf, opt.size))) {
            fail("cuda_error", "fill_a", 0, "%s", cuerr(r));
            goto report;
        }
        if (!(dst_mr = reg_gpu(alloc, access)))
            goto report;
        raddr = (uint64_t)dptr;
    }
    if (connect_self(&pa, &gid))
        goto report;

    /* 1. correctness: one write of B over A, completion, copy back, compare */
    if (post_write(src_buf, src_mr->lkey, raddr, dst_mr->rkey, opt.size, 1, 1) || wait_one("write_correctness"))
        goto report;
    if (verify_destination(gpu_mode, &cmpres))
        goto report;

    /* 2. bandwidth: iters writes of size, depth outstanding, signal every cq_mod */
    if (measure_bandwidth(src_buf, src_mr->lkey, raddr, dst_mr->rkey, &bw, &elapsed))
        goto report;

    /* 3. staged path (GPU modes): RDMA WRITE into host memory, then cuMemcpyHtoD */
    if (gpu_mode && opt.staged) {
        CUresult r;
        if (!(stage_buf = host_alloc(opt.size))) {
            fail("host_memory", "alloc", ENOMEM, "cannot allocate the staging buffer");
            goto report;
        }
        memset(stage_buf, 0, opt.size);
        if (cu.MemHostRegister && cu.MemHostRegister(stage_buf, round_up(opt.size, 4096), CU_MEMHOSTREGISTER_PORTABLE) == 0)
            stage_cuda_registered = 1;
        if (!(stage_mr = ibv_reg_mr(pd, stage_buf, opt.size, access))) {
            reg_fail("ibv_reg_mr_host", "registering the staging buffer");
            goto report;
        }
        double t0 = now_s();
        for (long i = 0; i < opt.iters; i++) {
            if (post_write(src_buf, src_mr->lkey, (uintptr_t)stage_buf, stage_mr->rkey, opt.size, 1, 1) ||
                wait_one("write_staged"))
                goto report;
            if ((r = cu.MemcpyHtoD(dptr, stage_buf, opt.size))) {
                fail("cuda_error", "staged_h2d", 0, "cuMemcpyHtoD: %s", cuerr(r));
                goto report;
            }
        }
        staged_bw = opt.size * (double)opt.iters * 8 / (now_s() - t0) / 1e9;
    }

report:
    jstr("mode", opt.mode);
    jstr("device", opt.device);
    jint("port", opt.port);
    jstr("link_layer", link_layer);
    jstr("port_state", port_state);
    jint("gid_index", opt.gid_index);
    jint("active_mtu", pa.active_mtu ? 128 << pa.active_mtu : 0);
    jstr("gpu", opt.gpu);
    jstr("gpu_name", name[0] ? name : NULL);
    if (gpu_mode) {
        jint("cuda_driver_version", drv);
        jint("dmabuf_supported_attr", dmabuf_attr);
        jint("gpudirect_rdma_supported_attr", gdr_attr);
        jint("gpu_free_bytes", (long long)free_b);
        jint("sync_memops", dptr != 0);
    }
    jint("size", (long long)opt.size);
    jint("iterations", opt.iters);
    jint("depth", opt.depth);
    jint("bytes_compared", (long long)cmpres.compared);
    jint("mismatches", (long long)cmpres.mismatches);
    jint("old_pattern_bytes", (long long)cmpres.old_pattern);
    if (cmpres.mismatches) {
        jint("first_mismatch", cmpres.first);
        jint("first_mismatch_got", cmpres.got);
        jint("first_mismatch_expected", cmpres.expected);
    }
    jdbl("bandwidth_gbps", bw);
    jdbl("elapsed_s", elapsed);
    jdbl("staged_bandwidth_gbps", staged_bw);
    if (opt.pair) {
        jstr("pair_role", own_role());
        jstr("peer", peer_text[0] ? peer_text : opt.peer);
        jint("pair_port", opt.pair_port);
        jstr("local_address", local_text[0] ? local_text : NULL);
        jstr("gid", local_gid_text[0] ? local_gid_text : NULL);
        jstr("remote_gid", remote_known ? remote_gid_text : NULL);
        jstr("peer_mode", remote_known ? remote.mode : NULL);
        jstr("peer_error", peer_error[0] ? peer_error : NULL);
    }
done:
    jint("ok", err_code == NULL);
    jstr("error", err_code);
    jstr("stage", err_code ? err_stage : NULL);
    jint("errno", err_errno);
    jstr("detail", err_code ? err_detail : NULL);
    jraw("}");
    pair_close();
    cleanup();
    fflush(stderr);
    printf("%s\n", out);
    fflush(stdout);
    return err_code ? 1 : 0;
}
