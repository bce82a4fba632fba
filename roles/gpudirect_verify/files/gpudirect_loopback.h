/* gpudirect_loopback helper: RDMA WRITE through one RDMA port (loopback) or to another
 * host (pair mode) into host or GPU memory, copy back, compare every byte, measure.
 * Prints exactly one JSON line on stdout.
 *
 * Built on the node by the gpudirect_loopback Ansible module from the files the
 * gpudirect_verify role ships (roles/gpudirect_verify/files/):
 *   cc -O2 -std=gnu99 -Wall -o gpudirect_loopback_helper gpudirect_loopback.c \
 *      loopback_result.c loopback_verbs.c loopback_pair.c -libverbs -ldl
 * again whenever the sha256 of these files (and the flags) changes.
 * libcuda.so.1 is opened at run time; no CUDA headers are needed.
 *
 *   gpudirect_loopback.h  what the files share: CUDA driver API subset, options, state
 *   gpudirect_loopback.c  options, the GPU-only selftest, main: the loopback sequence
 *   loopback_result.c     the JSON result and failures, test patterns, loading libcuda
 *   loopback_verbs.c      verbs and CUDA resources, writes, completions, compare, bandwidth
 *   loopback_pair.c       pair mode: the TCP exchange with the other host and its sequence */
#ifndef GPUDIRECT_LOOPBACK_H
#define GPUDIRECT_LOOPBACK_H

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

struct cuda_api {
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
};
extern struct cuda_api cu;

typedef struct ibv_mr *(*reg_dmabuf_fn)(struct ibv_pd *, uint64_t, size_t, uint64_t, int, int);

/* ---- options (gpudirect_loopback.c) ---- */
struct options {
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
};
extern struct options opt;

#define PAIR_SERVER 1
#define PAIR_CLIENT 2

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

struct cmp {
    size_t compared, mismatches, old_pattern;
    long long first;
    int got, expected;
};

struct conn {
    int version, mtu;
    char role[16], mode[16];
    unsigned qpn, psn, lid, rkey;
    unsigned long long addr, size;
    long iters;
    union ibv_gid gid;
};

/* ---- loopback_result.c ---- */
extern char out[16384];
extern size_t outlen;
extern const char *err_code;
extern char err_detail[1024];
extern const char *err_stage;
extern int err_errno;
void jraw(const char *fmt, ...);
void jstr(const char *key, const char *val);
void jint(const char *key, long long v);
void jdbl(const char *key, double v);
int fail(const char *code, const char *stage, int errnum, const char *fmt, ...);
const char *cuerr(CUresult r);
double now_s(void);
void fill(uint8_t *buf, size_t n, int which);
void compare(const uint8_t *got, size_t n, struct cmp *c);
int cuda_open(void);

/* ---- loopback_verbs.c ---- */
extern struct ibv_device **dev_list;
extern struct ibv_context *ctx;
extern struct ibv_pd *pd;
extern struct ibv_cq *cq;
extern struct ibv_qp *qp;
extern struct ibv_mr *src_mr, *dst_mr, *stage_mr;
extern uint8_t *src_buf, *dst_host, *stage_buf, *check_buf;
extern int stage_cuda_registered;
extern CUdeviceptr dptr;
extern int dmabuf_fd;
void cleanup(void);
size_t round_up(size_t n, size_t a);
void *host_alloc(size_t n);
int cuda_setup(size_t alloc, int *dmabuf_attr, int *gdr_attr, int *driver_version, char *name, size_t *free_b, size_t *total_b);
int export_dmabuf(size_t alloc);
int wait_one(const char *stage);
int post_write(void *laddr, uint32_t lkey, uint64_t raddr, uint32_t rkey, size_t len, uint64_t wr_id, int signaled);
int reg_fail(const char *stage, const char *what);
int connect_qp(enum ibv_mtu mtu, uint32_t dqpn, uint16_t dlid, union ibv_gid *dgid, uint32_t rq_psn, uint32_t sq_psn);
int connect_self(struct ibv_port_attr *pa, union ibv_gid *gid);
struct ibv_mr *reg_gpu(size_t alloc, int access);
int verify_destination(int gpu_mode, struct cmp *c);
int measure_bandwidth(void *laddr, uint32_t lkey, uint64_t raddr, uint32_t rkey, double *bw, double *elapsed);

/* ---- loopback_pair.c ---- */
extern char peer_text[INET6_ADDRSTRLEN];
extern char local_text[INET6_ADDRSTRLEN];
extern char local_gid_text[40], remote_gid_text[40];
extern struct conn remote;
extern int remote_known;
extern char peer_error[48];
const char *own_role(void);
int pair_run(struct ibv_port_attr *pa, union ibv_gid *gid, int gpu_mode, size_t alloc, struct cmp *c, double *bw, double *elapsed);
void pair_close(void);

#endif
