// The six-check gate. Each check prints PASS / FAIL / SKIP with its measured value;
// every rank takes part (data files are verified in parallel, ports and interfaces
// are checked on every node) and all ranks agree on the verdict.
#define _GNU_SOURCE
#include "train/preflight.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "data/dataset.h"
#include "engine/fsdp.h"
#include "engine/job_shape.h"
#include "engine/rank_memory.h"
#include "model/config.h"
#include "base/common.h"
#include "train/nvml.h"
#include "train/train_defaults.h"

void zt_preflight_defaults(zt_preflight_opts *o) {
    memset(o, 0, sizeof *o);
    o->micro_batch = ZT_DEF_MICRO_BATCH;
    o->grad_accum = ZT_DEF_GRAD_ACCUM;
    o->evenfix = ZT_DEF_EVENFIX;
    o->keep_last = ZT_DEF_KEEP_LAST;
    o->device = "cpu";
    o->verify_crc = ZT_DEF_VERIFY_CRC;
    o->allow_long_seq = ZT_DEF_ALLOW_LONG_SEQ;
    o->reshard_after_forward = 1;
    o->context_parallel = 1;
}

int zt_shard_group_resolve(zt_comm *comm, const char *spec, int world, int *G) {
    zt_comm_info info;
    zt_comm_get_info(comm, &info);
    *G = world;
    if (!spec || !*spec) return 0;
    if (!strcmp(spec, "node")) {
        // [min ranks per node, -max ranks per node, min of "my node's ranks are consecutive"]
        const int consecutive = info.node == info.rank / info.local_world;
        int64_t v[3] = {info.local_world, -(int64_t)info.local_world, consecutive};
        if (zt_allreduce(comm, v, v, 3, ZT_DT_I64, ZT_RED_MIN, "shard group: node layout") != 0) return -1;
        if (v[0] != -v[1])
            return zt_err("--shard-group node: the nodes hold different numbers of ranks (%lld to %lld of %d on %d "
                          "nodes); a node group needs the same count on every node (launch with --map-by "
                          "ppr:N:node, or give --shard-group G)", (long long)v[0], (long long)-v[1], info.world,
                          info.nnodes);
        if (!v[2])
            return zt_err("--shard-group node: the ranks of a node are not consecutive (rank %d is on node %d of %d); "
                          "groups are consecutive ranks, so place ranks by node (mpirun --map-by slot / --rank-by "
                          "node off) or give --shard-group G", info.rank, info.node, info.nnodes);
        if (world != info.world)
            return zt_err("--shard-group node: the node layout is this launch's (%d ranks), not --world %d's",
                          info.world, world);
        *G = info.local_world;
        return 0;
    }
    char *end = NULL;
    const long g = strtol(spec, &end, 10);
    if (end == spec || *end || g < 0 || g > 1 << 20)
        return zt_err("--shard-group \"%s\": expected a number of ranks (a divisor of W = %d; 0 or W: full shard) or "
                      "`node`", spec, world);
    if (zt_fsdp_check_shard_group((int)g, world) != 0) return -1;
    *G = g == 0 ? world : (int)g;  // 0: full shard, as the divisor rule's message offers
    return 0;
}

enum { PASS, FAIL, SKIP };
static const char *verdict_name[] = {"PASS", "FAIL", "SKIP"};

typedef struct {
    zt_comm *comm;
    int rank, world, local_rank;
    FILE *out;
    int failed;
    char first_failure[512];
} gate;

// Agree on a verdict (worst over ranks) and print it once. `msg` is this rank's
// text; when ranks differ, the failing rank's message is the one that matters, so
// every failing rank prints its own.
static void report(gate *g, int num, const char *name, int verdict, double secs, const char *msg) {
    int64_t v[2] = {verdict == FAIL, verdict == SKIP};
    if (zt_allreduce(g->comm, v, v, 2, ZT_DT_I64, ZT_RED_SUM, "preflight verdict") != 0) zt_die_on_err();
    int global = v[0] ? FAIL : v[1] == g->world ? SKIP : PASS;
    if (global == FAIL) {
        g->failed++;
        if (!g->first_failure[0]) {
            if (verdict == FAIL)
                snprintf(g->first_failure, sizeof g->first_failure, "check %d (%s): %.400s", num, name, msg);
            else
                snprintf(g->first_failure, sizeof g->first_failure, "check %d (%s) failed on another rank", num, name);
        }
    }
    if (verdict == FAIL && g->rank != 0)  // a failing rank names itself; rank 0 prints the verdict line
        fprintf(stderr, "[FAIL] %d %-22s rank %d: %s (%.2f s)\n", num, name, g->rank, msg, secs);
    if (g->rank == 0)
        fprintf(g->out, "[%s] %d %-22s %s%s (%.2f s)\n", verdict_name[global], num, name, msg,
                global == FAIL && verdict != FAIL ? " [rank 0 passed; other ranks failed, see their lines]" : "",
                secs);
    if (g->rank == 0) fflush(g->out);
}

// ---- check 1: data integrity and per-rank balance ----
static void check_data(gate *g, const zt_preflight_opts *o, int64_t *total_tokens, int64_t vocab, int64_t max_pos, int yarn) {
    double t0 = zt_now();
    char msg[1024];
    zt_dataset ds;
    zt_dataset_opts d = {.verify_crc = o->verify_crc, .check_tokens = 1, .model_vocab = vocab,
                         .part = g->rank, .nparts = g->world};
    int ok = zt_dataset_open(&ds, o->data, &d) == 0;
    if (ok && zt_dataset_check_tokenizer(&ds, o->data, o->model) != 0) {  // packed with another tokenizer
        zt_dataset_close(&ds);
        ok = 0;
    }
    int64_t flag = !ok;
    zt_allreduce(g->comm, &flag, &flag, 1, ZT_DT_I64, ZT_RED_SUM, "preflight data open");
    if (!ok || flag) {
        snprintf(msg, sizeof msg, "%s", ok ? "another rank failed to open or verify the data" : zt_errmsg());
        report(g, 1, "data integrity", FAIL, zt_now() - t0, msg);
        if (ok) zt_dataset_close(&ds);
        *total_tokens = -1;
        return;
    }
    // the data-parallel ranks: a context group's C ranks share their blocks (--context-parallel)
    const int W = (o->world > 0 ? o->world : g->world) / (o->context_parallel > 1 ? o->context_parallel : 1);
    const int64_t per_rank_step = (int64_t)o->micro_batch * o->grad_accum, gstep = per_rank_step * W;
    *total_tokens = ds.total_blocks * ds.seq_len;
    int verdict = PASS;
    int64_t mn = INT64_MAX, mx = 0, sum = 0;
    if (g->rank != 0) {  // the balance is the same arithmetic everywhere: rank 0 judges it
        snprintf(msg, sizeof msg, "this rank's share of the files verified");
    } else if (ds.per_rank && ds.nfiles != W) {
        snprintf(msg, sizeof msg, "%d files, crc32c and ids ok, but the per-rank layout has %d files for %d ranks",
                 ds.nfiles, ds.nfiles, W);
        verdict = FAIL;
    } else {
        for (int r = 0; r < W; r++) {
            int64_t b;
            if (ds.per_rank) {
                b = ds.files[r].blocks;
            } else {
                b = ds.total_blocks / gstep * per_rank_step;
                int64_t extra = ds.total_blocks % gstep - (int64_t)r * per_rank_step;
                b += extra < 0 ? 0 : extra > per_rank_step ? per_rank_step : extra;
            }
            mn = b < mn ? b : mn;
            mx = b > mx ? b : mx;
            sum += b;
        }
        const int64_t keep = mn / per_rank_step * per_rank_step, dropped = sum - keep * W;
        snprintf(msg, sizeof msg,
                 "%d file%s, %lld blocks x %d tokens, crc32c %s, ids < %lld; blocks per rank (W=%d) min %lld max %lld "
                 "spread %lld; evenfix drops %lld blocks (%.3f%% of tokens)",
                 ds.nfiles, ds.nfiles == 1 ? "" : "s", (long long)ds.total_blocks, ds.seq_len,
                 o->verify_crc ? "ok" : "not checked", (long long)(vocab > 0 ? vocab : ds.vocab_size), W,
                 (long long)mn, (long long)mx, (long long)(mx - mn), (long long)dropped,
                 sum ? 100.0 * (double)dropped / (double)sum : 0.0);
        if (ds.token_flags) {
            char m2[200], trained[32] = "unrecorded";
            if (ds.trained_tokens >= 0) snprintf(trained, sizeof trained, "%lld", (long long)ds.trained_tokens);
            snprintf(m2, sizeof m2, "; version 2 words (loss masks%s), %s trained tokens",
                     ds.doc_isolated ? ", documents isolated" : "", trained);
            strncat(msg, m2, sizeof msg - strlen(msg) - 1);
            if (ds.trained_tokens == 0) {
                verdict = FAIL;
                strncat(msg, ": no token is a trained target (every word has the no-loss flag)",
                        sizeof msg - strlen(msg) - 1);
            }
        }
        if (max_pos > 0 && ds.seq_len > max_pos) {
            char m2[256];
            snprintf(m2, sizeof m2, "; seq_len %d exceeds the model's %s %lld (RoPE beyond the trained range)%s",
                     ds.seq_len, yarn ? "YaRN range (factor x original_max_position_embeddings)"
                                      : "max_position_embeddings", (long long)max_pos,
                     o->allow_long_seq ? ", allowed by --allow-long-seq" : ": --allow-long-seq to accept it");
            strncat(msg, m2, sizeof msg - strlen(msg) - 1);
            if (!o->allow_long_seq) verdict = FAIL;
        }
        if (mn < per_rank_step) {
            verdict = FAIL;
            strncat(msg, "; a rank has fewer blocks than one step needs", sizeof msg - strlen(msg) - 1);
        } else if (!o->evenfix && mx / per_rank_step != mn / per_rank_step) {
            verdict = FAIL;
            strncat(msg, "; --no-evenfix with uneven ranks WILL deadlock at the epoch end",
                    sizeof msg - strlen(msg) - 1);
        }
    }
    zt_dataset_close(&ds);
    report(g, 1, "data integrity", verdict, zt_now() - t0, msg);
}

// ---- check 2: token total ----
static void check_tokens(gate *g, const zt_preflight_opts *o, int64_t total) {
    char msg[256];
    if (o->expect_tokens <= 0 || total < 0) {
        report(g, 2, "token total", SKIP, 0, total < 0 ? "data unreadable" : "no --expect-tokens given");
        return;
    }
    double ratio = (double)total / (double)o->expect_tokens;
    snprintf(msg, sizeof msg, "%lld tokens vs expected %lld (%+.1f%%, limit +-10%%)", (long long)total,
             (long long)o->expect_tokens, 100 * (ratio - 1));
    report(g, 2, "token total", ratio >= 0.9 && ratio <= 1.1 ? PASS : FAIL, 0, msg);
}

// ---- check 3: devices ----
static void check_devices(gate *g, const zt_preflight_opts *o) {
    double t0 = zt_now();
    char msg[512];
    if (!o->device || strcmp(o->device, "cuda") != 0) {
        report(g, 3, "devices", SKIP, 0, "cpu backend: no GPU to check");
        return;
    }
    int verdict = PASS;
    zt_nvml_info info;
    memset(&info, 0, sizeof info);
    int n = 0;
    if (zt_nvml_open() != 0) {
        snprintf(msg, sizeof msg, "%s", zt_errmsg());
        verdict = FAIL;
    } else if ((n = zt_nvml_device_count()) <= g->local_rank) {
        snprintf(msg, sizeof msg, "local rank %d needs GPU %d but this node has %d GPU%s", g->local_rank,
                 g->local_rank, n, n == 1 ? "" : "s");
        verdict = FAIL;
    } else if (zt_nvml_device_info(g->local_rank, &info) != 0) {
        snprintf(msg, sizeof msg, "%s", zt_errmsg());
        verdict = FAIL;
    } else if (info.other_processes > 0) {
        snprintf(msg, sizeof msg, "GPU %d (%s) already runs %d compute process%s holding %.1f GiB (stale job?)",
                 g->local_rank, info.name, info.other_processes, info.other_processes == 1 ? "" : "es",
                 info.mem_used / 1073741824.0);
        verdict = FAIL;
    }
    // Same model and driver everywhere: compare a hash of "name|driver".
    uint64_t h = 1469598103934665603ULL;
    char key[160];
    snprintf(key, sizeof key, "%s|%s", info.name, info.driver);
    for (const char *p = key; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ULL;
    int64_t hv[2] = {(int64_t)(h >> 1), -(int64_t)(h >> 1)};
    zt_allreduce(g->comm, hv, hv, 2, ZT_DT_I64, ZT_RED_MAX, "preflight gpu model");
    if (verdict == PASS && hv[0] != -hv[1]) {
        snprintf(msg, sizeof msg, "GPU model or driver differs across ranks (this rank: %s, driver %s)", info.name,
                 info.driver);
        verdict = FAIL;
    }
    if (verdict == PASS)
        snprintf(msg, sizeof msg, "%d GPU%s on this node, rank %d -> GPU %d (%s, driver %s, %.0f GiB, no other "
                 "process), same model and driver on all ranks", n, n == 1 ? "" : "s", g->rank, g->local_rank,
                 info.name, info.driver, info.mem_total / 1073741824.0);
    report(g, 3, "devices", verdict, zt_now() - t0, msg);
}

// ---- check 4: rendezvous interface and port ----
static void check_rendezvous(gate *g, const zt_preflight_opts *o) {
    double t0 = zt_now();
    char msg[512] = "";
    const char *ifname = o->ifname && *o->ifname ? o->ifname : getenv("NCCL_SOCKET_IFNAME");
    int port = o->port;
    const char *mp = getenv("MASTER_PORT");
    if (port <= 0 && mp && *mp) {
        // a TCP port, whole: atoi and a cast to 16 bits made 70000 probe port 4464 and 65536 port 0
        const size_t nd = strspn(mp, "0123456789");
        const long v = nd >= 1 && nd <= 5 && !mp[nd] ? strtol(mp, NULL, 10) : -1;
        if (v < 1 || v > 65535) {
            snprintf(msg, sizeof msg, "MASTER_PORT=%.64s%s is not a TCP port: it must be a whole number in 1..65535",
                     mp, strlen(mp) > 64 ? "..." : "");
            report(g, 4, "rendezvous", FAIL, 0, msg);
            return;
        }
        port = (int)v;
    }
    if ((!ifname || !*ifname) && port <= 0) {
        report(g, 4, "rendezvous", SKIP, 0, "no interface (--ifname / NCCL_SOCKET_IFNAME) or port (--port / "
                                            "MASTER_PORT) to check");
        return;
    }
    int verdict = PASS;
    if (ifname && *ifname) {
        // NCCL accepts a comma list and ^-exclusions; a plain name (or prefix) must match an up interface.
        struct ifaddrs *ifa = NULL, *it;
        int found = 0, up = 0;
        char want[64];
        snprintf(want, sizeof want, "%s", ifname[0] == '=' ? ifname + 1 : ifname);
        char *comma = strchr(want, ',');
        if (comma) *comma = 0;
        if (want[0] == '^') {
            found = up = 1;  // exclusion list: nothing to require
        } else if (getifaddrs(&ifa) == 0) {
            for (it = ifa; it; it = it->ifa_next)
                if (it->ifa_name && !strncmp(it->ifa_name, want, strlen(want))) {
                    found = 1;
                    up |= (it->ifa_flags & IFF_UP) != 0;
                }
            freeifaddrs(ifa);
        }
        if (!found || !up) {
            snprintf(msg, sizeof msg, "interface '%s' %s on rank %d", want, found ? "is down" : "does not exist",
                     g->rank);
            verdict = FAIL;
        } else {
            snprintf(msg, sizeof msg, "interface '%s' up on every rank", want);
        }
    }
    if (verdict == PASS && port > 0 && g->local_rank == 0) {  // one probe per node
        int s = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                .sin_addr.s_addr = htonl(INADDR_ANY)};
        if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) != 0) {
            snprintf(msg, sizeof msg, "port %d is in use (or not bindable: %s) on the node of rank %d", port,
                     strerror(errno), g->rank);
            verdict = FAIL;
        }
        if (s >= 0) close(s);
    }
    if (verdict == PASS && port > 0) {
        size_t l = strlen(msg);
        snprintf(msg + l, sizeof msg - l, "%sport %d free on every node", l ? "; " : "", port);
    }
    report(g, 4, "rendezvous", verdict, zt_now() - t0, msg);
}

// ---- check 5: checkpoint disk space ----
static void check_disk(gate *g, const zt_preflight_opts *o, int64_t params) {
    char msg[512], h1[32], h2[32], h3[32];
    if (g->local_rank != 0) {  // one look per node
        report(g, 5, "checkpoint disk", SKIP, 0, "checked by the node's local rank 0");
        return;
    }
    if (!o->run_dir) {
        report(g, 5, "checkpoint disk", SKIP, 0, "no --run-dir given");
        return;
    }
    if (params <= 0) {
        report(g, 5, "checkpoint disk", SKIP, 0, "no --model given: checkpoint size unknown");
        return;
    }
    // A checkpoint holds fp32 master, Adam m and v for every parameter (+ small metadata).
    const double ckpt = 3.0 * 4.0 * (double)params * 1.001 + 1e6;
    const double need = ckpt * (o->keep_last + 1);
    double freeb;
    char where[4200];
    snprintf(where, sizeof where, "%s", o->run_dir);
    if (o->assume_free_bytes > 0) {
        freeb = (double)o->assume_free_bytes;
    } else {
        struct statvfs sv;
        while (statvfs(where, &sv) != 0) {  // the run dir may not exist yet: use its nearest ancestor
            char *slash = strrchr(where, '/');
            if (!slash || slash == where) {
                snprintf(where, sizeof where, "%s", slash == where ? "/" : ".");
                if (statvfs(where, &sv) != 0) {
                    report(g, 5, "checkpoint disk", FAIL, 0, "cannot statvfs the checkpoint filesystem");
                    return;
                }
                break;
            }
            *slash = 0;
        }
        freeb = (double)sv.f_bavail * (double)sv.f_frsize;
    }
    snprintf(msg, sizeof msg, "%s free at %.200s%s; need %s = (keep-last %d + 1) x %s per checkpoint",
             zt_human_bytes(freeb, 2, h1, sizeof h1), where, o->assume_free_bytes > 0 ? " (assumed)" : "",
             zt_human_bytes(need, 2, h2, sizeof h2), o->keep_last, zt_human_bytes(ckpt, 2, h3, sizeof h3));
    report(g, 5, "checkpoint disk", freeb >= need ? PASS : FAIL, 0, msg);
}

// ---- check 6: interconnect probe ----
static void check_bandwidth(gate *g, const zt_preflight_opts *o) {
    char msg[512];
    if (!o->probe_bandwidth) {
        report(g, 6, "interconnect probe", SKIP, 0, "not requested (--probe-bandwidth)");
        return;
    }
    if (g->world < 2) {
        report(g, 6, "interconnect probe", SKIP, 0, "a single rank has no interconnect to probe");
        return;
    }
    const size_t per_rank = (8u << 20) / sizeof(float);  // 8 MiB per rank
    float *send = zt_xcalloc(per_rank, sizeof(float)), *recv = zt_xcalloc(per_rank * (size_t)g->world, sizeof(float));
    double t0 = zt_now();
    int iters = 5;
    for (int i = 0; i < iters; i++) zt_allgather(g->comm, send, recv, per_rank, ZT_DT_F32, "preflight probe");
    double t_ag = (zt_now() - t0) / iters;
    t0 = zt_now();
    for (int i = 0; i < iters; i++) zt_allreduce(g->comm, send, send, per_rank, ZT_DT_F32, ZT_RED_SUM, "preflight probe");
    double t_ar = (zt_now() - t0) / iters;
    free(send);
    free(recv);
    // Bus bandwidth (nccl-tests convention): all-gather S*(W-1)/W / t, all-reduce 2*S*(W-1)/W / t.
    const double W = g->world, total = (double)per_rank * sizeof(float) * W;
    double bw_ag = total * (W - 1) / W / t_ag / 1e9, bw_ar = 2.0 * per_rank * sizeof(float) * (W - 1) / W / t_ar / 1e9;
    double worst = bw_ag < bw_ar ? bw_ag : bw_ar;
    snprintf(msg, sizeof msg, "bus bandwidth all-gather %.2f GB/s, all-reduce %.2f GB/s%s", bw_ag, bw_ar,
             o->min_bus_gbps > 0 ? (worst >= o->min_bus_gbps ? " (above threshold)" : " (BELOW threshold)") : "");
    report(g, 6, "interconnect probe", o->min_bus_gbps > 0 && worst < o->min_bus_gbps ? FAIL : PASS,
           t_ag * iters + t_ar * iters, msg);
}

// ---- keep-gathered memory ----
// Keep-gathered holds every unit's gathered parameters from its forward to its backward. The
// planner's formula (engine/rank_memory.h) per rank against the device: on cuda the GPU's memory
// (NVML), on cpu the host's MemAvailable shared by this node's ranks. 0, or -1 + zt_err on every rank.

// Bytes one rank needs to keep every unit gathered, its parts in `what`: fp32 gathers on the cpu
// backend, bf16 on cuda. 0 with "no estimate: why" when the formula has none.
static double keep_gathered_need(const zt_model_config *cfg, int shard_group, int micro_batch, int64_t seq_len,
                                 int cuda, char *what, size_t n) {
    const zt_rank_memory_job j = {.shard_group = shard_group, .micro_batch = micro_batch, .seq_len = seq_len,
                                  .reduce_bytes = 4, .param_bytes = cuda ? 2 : 4, .keep_gathered = 1};
    zt_rank_memory m;
    if (zt_rank_memory_predict(cfg, &j, &m) != 0) {
        snprintf(what, n, "no estimate: %s", zt_errmsg());
        zt_err_clear();
        return 0;
    }
    snprintf(what, n, "parameters %.3g MB, gradients %.3g MB, optimizer %.3g MB, gathered buffers %.3g MB "
             "(every unit kept), activations %.3g MB", m.params / 1e6, m.grads / 1e6, m.optimizer / 1e6,
             m.buffers / 1e6, m.activations / 1e6);
    return m.total;
}

static int read_mem_available(double *bytes) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return zt_err("cannot open /proc/meminfo: %s", strerror(errno));
    char line[256];
    long long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1) break;
    fclose(f);
    if (kb < 0) return zt_err("/proc/meminfo has no MemAvailable line");
    *bytes = (double)kb * 1024.0;
    return 0;
}

// DIR/dataset.json's seq_len, or 0 when it cannot be read (check 1 then names the problem).
static int check_keep_memory(gate *g, const zt_preflight_opts *o, const zt_model_config *cfg, int G,
                             int64_t seq_len) {
    char what[384] = "", msg[1024], h1[32], h2[32];
    const int cuda = o->device && !strcmp(o->device, "cuda");
    zt_comm_info ci;
    zt_comm_get_info(g->comm, &ci);
    const int sharers = cuda ? 1 : (ci.local_world > 0 ? ci.local_world : 1);  // ranks sharing the device
    const double need = keep_gathered_need(cfg, G, o->micro_batch, seq_len, cuda, what, sizeof what);
    double have = 0;
    int ok = 1;
    const char *src = o->assume_device_bytes > 0 ? " (assumed)" : "";
    if (o->assume_device_bytes > 0) {
        have = (double)o->assume_device_bytes;
    } else if (cuda) {
        zt_nvml_info info;
        memset(&info, 0, sizeof info);
        if (zt_nvml_open() != 0 || zt_nvml_device_info(g->local_rank, &info) != 0) {
            snprintf(msg, sizeof msg, "cannot read GPU %d's memory: %s", g->local_rank, zt_errmsg());
            ok = 0;
        }
        have = (double)info.mem_total;
    } else if (read_mem_available(&have) != 0) {
        snprintf(msg, sizeof msg, "%s", zt_errmsg());
        ok = 0;
    }
    if (ok) {
        ok = need * sharers <= have;
        char share[64] = "";
        if (sharers > 1) snprintf(share, sizeof share, " x %d ranks on this node", sharers);
        snprintf(msg, sizeof msg, "keep-gathered needs %s per rank by the planner's formula (%s)%s; %s %s%s%s",
                 zt_human_bytes(need, 2, h1, sizeof h1), what, share, cuda ? "the GPU holds" : "the host has",
                 zt_human_bytes(have, 2, h2, sizeof h2), cuda ? "" : " available", src);
    }
    int64_t bad = !ok;
    zt_allreduce(g->comm, &bad, &bad, 1, ZT_DT_I64, ZT_RED_MAX, "preflight keep-gathered memory");
    if (g->rank == 0)
        fprintf(g->out, "[%s] memory: %s%s\n", bad ? "FAIL" : "PASS",
                !ok || !bad ? msg : "another rank's device is too small; ", !ok || !bad ? "" : msg);
    if (bad)
        return zt_err("%s%s -- reshard after forward (drop --reshard-after-forward false), or use more ranks or a "
                      "smaller micro-batch", ok ? "another rank's device is too small; here: " : "", msg);
    return 0;
}

int zt_preflight_run(zt_comm *comm, const zt_preflight_opts *o, FILE *out) {
    const double t0 = zt_now();
    gate g = {.comm = comm, .out = out};
    zt_comm_info info;
    zt_comm_get_info(comm, &info);
    g.rank = info.rank;
    g.world = info.world;
    g.local_rank = info.local_rank;
    if (g.rank == 0)
        fprintf(out, "preflight: %d rank%s checking for a job of %d rank%s\n", g.world, g.world == 1 ? "" : "s",
                o->world > 0 ? o->world : g.world, (o->world > 0 ? o->world : g.world) == 1 ? "" : "s");
    zt_model_config cfg;
    int64_t vocab = 0, params = 0, max_pos = 0;
    int yarn = 0;
    if (o->cfg) {
        cfg = *o->cfg;
    } else if (o->model) {
        if (zt_model_config_load(&cfg, o->model) != 0) return zt_err_prefix("preflight");
        if (g.rank == 0 && cfg.note[0]) fprintf(out, "preflight: warning: %s\n", cfg.note);
    }
    if (o->cfg || o->model) {
        vocab = cfg.vocab_size;
        params = zt_model_param_count(&cfg);
        max_pos = zt_model_max_positions(&cfg);  // YaRN: the scaled range
        yarn = cfg.rope_yarn;
    }
    const int W = o->world > 0 ? o->world : g.world;
    int G = W;
    if (o->shard_group && *o->shard_group) {  // before the six checks: a strategy that cannot run
        if (zt_shard_group_resolve(comm, o->shard_group, W, &G) != 0) {
            if (g.rank == 0) fprintf(out, "[FAIL] sharding: %s\n", zt_errmsg());
            return zt_err_prefix("preflight gate");
        }
        if (g.rank == 0)
            fprintf(out, "[PASS] sharding: %s, groups of %d rank%s x %d replica%s\n",
                    G < W ? "hybrid shard" : "full shard", G, G == 1 ? "" : "s", W / G, W / G == 1 ? "" : "s");
    }
    if (o->context_parallel > 1) {  // before the six checks too: a split that cannot run
        const int C = o->context_parallel;
        const int64_t seq_len = zt_dataset_peek_seq_len(o->data);
        const zt_context_job cj = {.context = C, .shard_group = G, .world = W, .seq_len = seq_len,
                                   .family = o->model ? cfg.family : NULL, .config = o->model ? &cfg : NULL,
                                   .gpu = o->device && !strcmp(o->device, "cuda")};
        if (zt_context_check(&cj) != 0) {
            if (g.rank == 0) fprintf(out, "[FAIL] context parallelism: %s\n", zt_errmsg());
            return zt_err_prefix("preflight gate");
        }
        if (g.rank == 0)
            fprintf(out, "[PASS] context parallelism: groups of %d consecutive ranks share each block, %d data-parallel "
                    "group%s\n", C, zt_data_parallel_ranks(W, C), zt_data_parallel_ranks(W, C) == 1 ? "" : "s");
    }
    if (!o->reshard_after_forward && o->model) {
        const int64_t seq_len = zt_dataset_peek_seq_len(o->data);
        if (seq_len > 0 && check_keep_memory(&g, o, &cfg, G, seq_len) != 0) return zt_err_prefix("preflight gate");
    }
    int64_t total_tokens = 0;
    check_data(&g, o, &total_tokens, vocab, max_pos, yarn);
    check_tokens(&g, o, total_tokens);
    check_devices(&g, o);
    check_rendezvous(&g, o);
    check_disk(&g, o, params);
    check_bandwidth(&g, o);
    if (g.rank == 0)
        fprintf(out, "preflight: %s in %.2f s\n", g.failed ? "FAILED" : "all checks passed or skipped",
                zt_now() - t0);
    if (g.failed) return zt_err("preflight gate: %d check%s failed; %s", g.failed, g.failed == 1 ? "" : "s",
                                g.first_failure);
    return 0;
}
