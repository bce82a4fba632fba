/* gpudirect_loopback helper: options, the GPU-only selftest and main (see gpudirect_loopback.h). */
#include "gpudirect_loopback.h"

struct options opt = {"host", NULL, 1, -1, NULL, 1 << 20, 100, 128, 1, 0, 60.0, 0, 0, NULL, 18516, 120.0, 0};

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
