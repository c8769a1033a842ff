// `zerotrain preflight`: the six-check gate, standalone (run it with the same
// mpirun line as the job, or alone with --world W to check the data balance).
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/flags.h"
#include "cli/tables.h"
#include "cli/commands.h"
#include "engine/comm_mpi.h"
#include "engine/fsdp.h"
#include "base/common.h"
#include "train/input_digest.h"
#include "train/preflight.h"
#include "train/settings_agree.h"

#define T zt_preflight_opts
static const zt_flag_choice device_choices[] = {{"cpu", 0}, {"cuda", 1}, {"auto", 2}, {0}};

const zt_flag zt_preflight_flags[] = {
    {.type = ZT_FLAG_SECTION, .help = "data, batch and the gate (the same flags as `zerotrain train`):"},
    ZT_FLAGS_DATA_AND_BATCH(T),

    {.type = ZT_FLAG_SECTION, .help = "preflight only:"},
    {"world", ZT_FLAG_INT, ZT_AT_INT(T, world), "W", 1, 1 << 20, .help = "ranks of the job (default: this launch's ranks)"},
    {"expect-tokens", ZT_FLAG_I64, ZT_AT_I64(T, expect_tokens), "N", 1, INT64_MAX,
     .help = "expected token total (check 2)"},
    {"assume-free", ZT_FLAG_I64, ZT_AT_I64(T, assume_free_bytes), "BYTES", 1, INT64_MAX,
     .help = "use this free-space figure instead of statvfs (testing)"},
    {"assume-device-memory", ZT_FLAG_I64, ZT_AT_I64(T, assume_device_bytes), "BYTES", 1, INT64_MAX,
     .help = "keep-gathered memory check: the GPU's (cuda) or the host's available\nmemory (cpu) instead of NVML or "
             "/proc/meminfo (testing)"},
    {"device", ZT_FLAG_KEYWORD, ZT_AT_STR(T, device), "D", .sdef = "cpu", .choices = device_choices,
     .help = "cpu, cuda, or auto (cuda when this host's driver shows a GPU, as train's\n"
             "--device auto; lets one --config file serve train and preflight) (default {default})"},
    {"ifname", ZT_FLAG_STR, ZT_AT_STR(T, ifname), "NAME",
     .help = "network interface to require (default $NCCL_SOCKET_IFNAME)"},
    {"port", ZT_FLAG_INT, ZT_AT_INT(T, port), "P", 1, 65535, .help = "rendezvous port to require free (default $MASTER_PORT)"},
    {"probe-bandwidth", ZT_FLAG_SET, ZT_AT_INT(T, probe_bandwidth), .help = "run check 6"},
    {"min-bus-gbps", ZT_FLAG_F64, ZT_AT_F64(T, min_bus_gbps), "X", .fmin = 0, .fmax = 1e6,
     .help = "check 6 fails below X GB/s (default {default}: report only)"},
    {.type = ZT_FLAG_END, .config_also = zt_train_flags}};
#undef T

static const char synopsis[] =
    "usage: [mpirun -n W] zerotrain preflight --data DIR [options]\n"
    "\n"
    "The pre-launch gate: six checks in seconds, each PASS / FAIL / SKIP with its measured value.\n"
    "  1 data integrity    sizes, crc32c and token ids of every file (split across ranks), and the\n"
    "                      per-rank block balance: min, max, spread, what evenfix drops\n"
    "  2 token total       within +-10% of --expect-tokens\n"
    "  3 devices           (--device cuda) each rank has its GPU, no other process on it, same model\n"
    "                      and driver everywhere (NVML)\n"
    "  4 rendezvous        --ifname (or NCCL_SOCKET_IFNAME) is up on every rank, --port (or\n"
    "                      MASTER_PORT) is free on every node\n"
    "  5 checkpoint disk   free space >= (keep-last + 1) x checkpoint size (3 x 4 bytes per parameter)\n"
    "  6 interconnect      (--probe-bandwidth) all-gather / all-reduce bus bandwidth\n";
static const char epilog[] = "exit status: 0 all passed or skipped, 1 a check failed, 2 usage error\n";

int zt_cmd_preflight(int argc, char **argv) {
    zt_preflight_opts o;
    zt_preflight_defaults(&o);
    const int prc = zt_flags_parse("preflight", zt_preflight_flags, &o, argc, argv, synopsis, epilog);
    if (prc) return prc == 1 ? 0 : 2;
    if (!o.data) {
        fprintf(stderr, "zerotrain preflight: error: --data is required\n\n");
        zt_flags_usage(stderr, zt_preflight_flags, synopsis, epilog);
        return 2;
    }
    if (!strcmp(o.device, "auto")) o.device = zt_fsdp_cuda_devices(0) > 0 ? "cuda" : "cpu";
    // The gate's deadline (120 s) for its collectives and for MPI's own start, which waits for
    // every rank of the job (engine/comm_mpi.h zt_mpi_init_guarded)
    const double deadline = 120;
    const zt_mpi_start_deadline sd = {.deadline_s = deadline, .source = "preflight's deadline"};
    if (zt_mpi_init_guarded(MPI_THREAD_FUNNELED, &sd) != 0) zt_die_on_err();
    zt_comm *comm;  // the world's process group (the checks' collectives run on it)
    zt_comm_opts co = zt_comm_opts_default();
    co.timeout_s = co.first_timeout_s = deadline;
    if (zt_comm_init_world(&comm, &co) != 0) zt_die_on_err();
    zt_comm_info info;
    zt_comm_get_info(comm, &info);
    {  // every rank checks the same job: its flags and run file agree (as `train` requires)
        static const char *const per_rank[] = {"threads", NULL};
        char *cj = zt_flags_config_json(zt_preflight_flags, &o);
        const char *cfile = NULL;
        uint32_t crc = 0;
        const int has_file = zt_flags_config_file(&o, &cfile, &crc);
        int arc = zt_settings_agree(zt_comm_mpi_base(comm), cj, has_file ? cfile : NULL, crc, per_rank);
        free(cj);
        if (arc == 0) {  // and what each rank reads at those paths (train/input_digest.h), as `train` does
            zt_input_digest d;
            zt_input_digest_make(&d, &(zt_input_paths){.model = o.model, .data = o.data});
            arc = zt_input_digest_agree(zt_comm_mpi_base(comm), &d);
            zt_input_digest_free(&d);
        }
        if (arc != 0) {
            if (info.rank == 0) fprintf(stderr, "zerotrain preflight: error: %s\n", zt_errmsg());
            zt_comm_finalize(comm);
            zt_mpi_finalize_once();
            return 1;
        }
    }
    int rc = zt_preflight_run(comm, &o, stdout);
    if (rc != 0 && info.rank == 0) fprintf(stderr, "zerotrain preflight: error: %s\n", zt_errmsg());
    zt_comm_finalize(comm);
    zt_mpi_finalize_once();
    return rc == 0 ? 0 : 1;
}
