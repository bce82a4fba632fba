/* gpudirect_loopback helper: the JSON result line, failures, test patterns, loading libcuda.so.1. */
#include "gpudirect_loopback.h"

struct cuda_api cu;

/* ---- result, printed as one JSON line ---- */
char out[16384];
size_t outlen;
const char *err_code;   /* NULL: success */
char err_detail[1024];
const char *err_stage = "";
int err_errno;

void jraw(const char *fmt, ...)
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

void jstr(const char *key, const char *val)
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
void jint(const char *key, long long v) { jkey(key); jraw("%lld", v); }
void jdbl(const char *key, double v)
{
    jkey(key);
    if (v < 0)
        jraw("null");
    else
        jraw("%.4f", v);
}

int fail(const char *code, const char *stage, int errnum, const char *fmt, ...)
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

const char *cuerr(CUresult r)
{
    const char *name = NULL;
    static char buf[32];
    if (cu.GetErrorName && cu.GetErrorName(r, &name) == 0 && name)
        return name;
    snprintf(buf, sizeof(buf), "CUresult %d", r);
    return buf;
}

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

void fill(uint8_t *buf, size_t n, int which)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = which ? pat_b(i) : pat_a(i);
}

void compare(const uint8_t *got, size_t n, struct cmp *c)
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

int cuda_open(void)
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
