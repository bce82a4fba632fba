/* gpudirect_loopback helper: pair mode (see the protocol below). */
#include "gpudirect_loopback.h"

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

static int sock_fd = -1;
static struct sockaddr_storage local_sa;
char peer_text[INET6_ADDRSTRLEN];    /* the other side's address on the TCP connection */
char local_text[INET6_ADDRSTRLEN];   /* this side's address on it */
char local_gid_text[40], remote_gid_text[40];
struct conn remote;
int remote_known;
static char rbuf[2048];
static size_t rlen;
static int peer_told;                       /* the other side knows the outcome already: no ERROR line */
char peer_error[48];                 /* the other side's failure code */

const char *own_role(void) { return opt.pair == PAIR_SERVER ? "server" : "client"; }
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

int pair_run(struct ibv_port_attr *pa, union ibv_gid *gid, int gpu_mode, size_t alloc, struct cmp *c,
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
void pair_close(void)
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
