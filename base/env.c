// The one reader of the ZT_* environment variables the product reads (base/env.h): the table of
// every variable with its kind, when it is read and a line of documentation, and the accessors.
// The hooks are plain environment variables, not gated: leave them unset in runs (docs/design.md).
// defines: zt_env_info, zt_env_str, zt_env_on, zt_env_i64, zt_env_f64
#define _GNU_SOURCE
#include "base/env.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define SETTING(var, when, text) [ZT_ENV_##var] = {"ZT_" #var, ZT_ENV_SETTING, ZT_ENV_##when, text}
#define HOOK(var, when, text) [ZT_ENV_##var] = {"ZT_" #var, ZT_ENV_HOOK, ZT_ENV_##when, text}

static const zt_env_entry g_table[ZT_ENV_COUNT] = {
    SETTING(CPU_GEMM, ONCE,
            "the CPU GEMM kernel: generic, avx2 or avx512 (default: the widest this CPU runs; one it does not run is "
            "refused)"),
    SETTING(CUDA_MODULE, ONCE,
            "the CUDA module's file, looked for alone when set (default: beside the executable, then "
            "../lib/zerotrain/)"),
    SETTING(CUDA_SYNC, ONCE,
            "1: synchronise after every CUDA op, so that an asynchronous fault names its op (tests/gpu/run.sh "
            "reruns a failed program with it)"),
    SETTING(CUDA_DELTA_RECUR, EACH_USE,
            "1: the gated delta rule (Gated DeltaNet layers) on the GPU runs the token recurrence instead of the chunked kernels "
            "(default 0; read at each call: the op test switches it)"),
    SETTING(CUDA_DELTA_TC, EACH_USE,
            "1: the gated delta rule (Gated DeltaNet layers) on the GPU runs the chunked kernels with tensor-core products "
            "(kernels/cuda/delta_chunk_tc.cu; default 0: the fp32 chunked kernels; ZT_CUDA_DELTA_RECUR wins)"),
    SETTING(PROGRESS_INTERVAL, ONCE, "seconds between pack's progress lines (default 1; the tests use 0)"),
    SETTING(TOKENIZER_CACHE, EACH_USE,
            "the directory of the tokenizer's binary cache, or off (default $XDG_CACHE_HOME/zerotrain/tokenizer, "
            "else $HOME/.cache/zerotrain/tokenizer); read at each tokenizer load"),
    SETTING(WATCHDOG_PERIOD_MS, EACH_USE,
            "the comm watchdog's wake-up period, whole milliseconds in [1, 60000] (default 100); read as each comm "
            "is created"),
    HOOK(CKPT_FAIL_AFTER_BYTES, EACH_USE,
         "N: this rank's checkpoint data writes fail like ENOSPC once it has written N bytes"),
    HOOK(CKPT_DEBUG_FAIL_STEP, EACH_USE, "N: ZT_CKPT_FAIL_AFTER_BYTES only in the save of step N"),
    HOOK(CKPT_NO_SPACE_CHECK, EACH_USE, "1: a save skips its free-space check"),
    HOOK(CKPT_NO_RESERVE, EACH_USE, "1: a save skips the block reservation (fallocate) of its ckpt.h5"),
    HOOK(CKPT_DEBUG_NO_ODIRECT, EACH_USE, "1: every O_DIRECT write fails with EINVAL (the pwrite fallback)"),
    HOOK(CKPT_CRC_CHUNK, EACH_USE, "E: the checksum chunk in elements (rank 0's value is used; default 1048576)"),
    HOOK(CKPT_DEBUG_STALL_RANK, EACH_USE,
         "R: rank R stalls inside the save, after its first barrier, as a rank stuck in I/O would"),
    HOOK(CKPT_DEBUG_STALL_S, EACH_USE, "S: how long ZT_CKPT_DEBUG_STALL_RANK stalls (default 3600 s)"),
    HOOK(CKPT_DEBUG_STALL_STEP, EACH_USE, "N: the stall only in the save of step N"),
    HOOK(CKPT_DEBUG_PAUSE_S, EACH_USE,
         "S: every rank pauses its write for S seconds after half of the units, saying so on stderr"),
    HOOK(CKPT_DEBUG_PAUSE_STEP, EACH_USE, "N: the pause only in the save of step N"),
    HOOK(CKPT_DEBUG_COPY_DELAY_S, EACH_USE,
         "S: the --async-save snapshot copy (the writer's, or the GPU engine's device-to-host) starts S seconds late"),
    HOOK(CKPT_DEBUG_IO, EACH_USE,
         "set (any value): after each save every rank prints its bytes written with O_DIRECT and with pwrite"),
    HOOK(CKPT_DEBUG_H5, EACH_USE, "set (any value): a failed --save-io mpiio data write prints HDF5's error stack"),
    HOOK(DEBUG_MEM_AVAILABLE, ONCE,
         "BYTES: the node's available memory for the --async-save memory check, instead of /proc/meminfo"),
    HOOK(DEBUG_RUN_LOCK_FILE_ONLY, ONCE,
         "1: the run directory's lock skips the directory's flock (the fallback of file systems that cannot lock "
         "one)"),
    HOOK(TEST_CORRUPT_REPLICA, ONCE,
         "R: rank R's first master weight gets one bit flipped before the replicas' checksum check (hybrid "
         "sharding)"),
};

const zt_env_entry *zt_env_info(zt_env_var v) { return &g_table[v]; }

// ONCE variables: copied on first use under the lock, then read without it.
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int g_taken[ZT_ENV_COUNT];
static const char *g_value[ZT_ENV_COUNT];

const char *zt_env_str(zt_env_var v) {
    if (g_table[v].read == ZT_ENV_EACH_USE) return getenv(g_table[v].name);
    if (!atomic_load_explicit(&g_taken[v], memory_order_acquire)) {
        pthread_mutex_lock(&g_mu);
        if (!atomic_load_explicit(&g_taken[v], memory_order_relaxed)) {
            const char *s = getenv(g_table[v].name);
            g_value[v] = s ? strdup(s) : NULL;
            atomic_store_explicit(&g_taken[v], 1, memory_order_release);
        }
        pthread_mutex_unlock(&g_mu);
    }
    return g_value[v];
}

int zt_env_on(zt_env_var v) {
    const char *s = zt_env_str(v);
    return s && *s && strcmp(s, "0") != 0;
}

int zt_env_i64(zt_env_var v, int64_t *out) {
    const char *s = zt_env_str(v);
    if (!s || !*s) return 0;
    *out = strtoll(s, NULL, 10);
    return 1;
}

int zt_env_f64(zt_env_var v, double *out) {
    const char *s = zt_env_str(v);
    if (!s || !*s) return 0;
    *out = atof(s);
    return 1;
}
