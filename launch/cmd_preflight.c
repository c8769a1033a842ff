// `zerotrain preflight`: the six-check gate, standalone (run it with the same
// mpirun line as the job, or alone with --world W to check the data balance).
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "launch/args.h"
#include "launch/commands.h"
#include "runtime/comm_mpi.h"
#include "runtime/common.h"
#include "runtime/preflight.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: [mpirun -n W] zerotrain preflight --data DIR [options]\n"
            "\n"
            "The pre-launch gate: six checks in seconds, each PASS / FAIL / SKIP with its measured value.\n"
            "  1 data integrity    sizes, crc32c and token ids of every file (split across ranks), and the\n"
            "                      per-rank block balance: min, max, spread, what evenfix drops\n"
            "  2 token total       within +-10%% of --expect-tokens\n"
            "  3 devices           (--device cuda) each rank has its GPU, no other process on it, same model\n"
            "                      and driver everywhere (NVML)\n"
            "  4 rendezvous        --ifname (or NCCL_SOCKET_IFNAME) is up on every rank, --port (or\n"
            "                      MASTER_PORT) is free on every node\n"
            "  5 checkpoint disk   free space >= (keep-last + 1) x checkpoint size (3 x 4 bytes per parameter)\n"
            "  6 interconnect      (--probe-bandwidth) all-gather / all-reduce bus bandwidth\n"
            "\n"
            "options:\n"
            "  --data DIR            dataset directory (required)\n"
            "  --model PATH          config.json or HF dir: vocab for the id check, parameters for check 5\n"
            "  --run-dir RUN         where checkpoints will go (check 5)\n"
            "  --world W             ranks of the job (default: this launch's ranks)\n"
            "  --micro-batch B, --grad-accum G   as for train (block balance is in whole steps)\n"
            "  --no-evenfix          fail if the per-rank step counts differ (train --no-evenfix would hang)\n"
            "  --expect-tokens N     expected token total (check 2)\n"
            "  --keep-last K         checkpoints kept (default 2)\n"
            "  --assume-free BYTES   use this free-space figure instead of statvfs (testing)\n"
            "  --device D            cpu (default) or cuda\n"
            "  --ifname NAME         network interface to require (default $NCCL_SOCKET_IFNAME)\n"
            "  --port P              rendezvous port to require free (default $MASTER_PORT)\n"
            "  --probe-bandwidth     run check 6;  --min-bus-gbps X  fail below X GB/s\n"
            "  --no-verify-crc       check 1 skips crc32c (sizes and ids are still checked)\n"
            "  --allow-long-seq      check 1 passes a seq_len beyond the model's max_position_embeddings\n"
            "  -h, --help\n"
            "exit status: 0 all passed or skipped, 1 a check failed, 2 usage error\n");
}

enum { P_DATA = 256, P_MODEL, P_RUN, P_WORLD, P_MB, P_GA, P_NOEVEN, P_EXPECT, P_KEEP, P_FREE, P_DEVICE, P_IF, P_PORT,
       P_PROBE, P_MINBW, P_NOCRC, P_LONGSEQ };

int zt_cmd_preflight(int argc, char **argv) {
    static const struct option opts[] = {
        {"data", required_argument, 0, P_DATA},         {"model", required_argument, 0, P_MODEL},
        {"run-dir", required_argument, 0, P_RUN},       {"world", required_argument, 0, P_WORLD},
        {"micro-batch", required_argument, 0, P_MB},    {"grad-accum", required_argument, 0, P_GA},
        {"no-evenfix", no_argument, 0, P_NOEVEN},       {"expect-tokens", required_argument, 0, P_EXPECT},
        {"keep-last", required_argument, 0, P_KEEP},    {"assume-free", required_argument, 0, P_FREE},
        {"device", required_argument, 0, P_DEVICE},     {"ifname", required_argument, 0, P_IF},
        {"port", required_argument, 0, P_PORT},         {"probe-bandwidth", no_argument, 0, P_PROBE},
        {"min-bus-gbps", required_argument, 0, P_MINBW}, {"no-verify-crc", no_argument, 0, P_NOCRC},
        {"allow-long-seq", no_argument, 0, P_LONGSEQ}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    zt_preflight_opts o;
    zt_preflight_defaults(&o);
    int64_t v;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        int rc = 0;
        switch (c) {
        case P_DATA: o.data = optarg; break;
        case P_MODEL: o.model = optarg; break;
        case P_LONGSEQ: o.allow_long_seq = 1; break;
        case P_RUN: o.run_dir = optarg; break;
        case P_WORLD: rc = zt_arg_i64("--world", optarg, 1, 1 << 20, &v); o.world = (int)v; break;
        case P_MB: rc = zt_arg_i64("--micro-batch", optarg, 1, 1 << 20, &v); o.micro_batch = (int)v; break;
        case P_GA: rc = zt_arg_i64("--grad-accum", optarg, 1, 1 << 20, &v); o.grad_accum = (int)v; break;
        case P_NOEVEN: o.evenfix = 0; break;
        case P_EXPECT: rc = zt_arg_i64("--expect-tokens", optarg, 1, INT64_MAX, &o.expect_tokens); break;
        case P_KEEP: rc = zt_arg_i64("--keep-last", optarg, 0, 1 << 20, &v); o.keep_last = (int)v; break;
        case P_FREE: rc = zt_arg_i64("--assume-free", optarg, 1, INT64_MAX, &o.assume_free_bytes); break;
        case P_DEVICE:
            if (strcmp(optarg, "cpu") && strcmp(optarg, "cuda")) rc = zt_err("--device: '%s' is not cpu or cuda", optarg);
            o.device = optarg;
            break;
        case P_IF: o.ifname = optarg; break;
        case P_PORT: rc = zt_arg_i64("--port", optarg, 1, 65535, &v); o.port = (int)v; break;
        case P_PROBE: o.probe_bandwidth = 1; break;
        case P_MINBW: rc = zt_arg_f64("--min-bus-gbps", optarg, 0, 1e6, &o.min_bus_gbps); break;
        case P_NOCRC: o.verify_crc = 0; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
        if (rc) {
            fprintf(stderr, "zerotrain preflight: error: %s\n", zt_errmsg());
            return 2;
        }
    }
    if (!o.data || optind < argc) {
        fprintf(stderr, "zerotrain preflight: error: %s\n\n", o.data ? "unexpected argument" : "--data is required");
        usage(stderr);
        return 2;
    }
    if (zt_mpi_init_once() != 0) zt_die_on_err();
    zt_comm *comm;
    zt_comm_opts co = zt_comm_opts_default();
    co.timeout_s = co.first_timeout_s = 120;
    if (zt_comm_init_mpi(&comm, MPI_COMM_WORLD, &co) != 0) zt_die_on_err();
    int rc = zt_preflight_run(comm, &o, stdout);
    zt_comm_info info;
    zt_comm_get_info(comm, &info);
    if (rc != 0 && info.rank == 0) fprintf(stderr, "zerotrain preflight: error: %s\n", zt_errmsg());
    zt_comm_finalize(comm);
    zt_mpi_finalize_once();
    return rc == 0 ? 0 : 1;
}
