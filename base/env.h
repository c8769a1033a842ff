// The ZT_* environment variables the product reads, in one table (base/env.c): a few user
// settings and the test and fault hooks. No other file calls getenv("ZT_..."); callers name a
// variable by its ZT_ENV_* constant and read it through the accessors below.
// defines: zt_env_var, zt_env_kind, zt_env_read, zt_env_entry, zt_env_info, zt_env_str, zt_env_on,
//          zt_env_i64, zt_env_f64
#ifndef ZT_ENV_H
#define ZT_ENV_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// One constant per variable (the variable's name with ENV_ after ZT_); docs/design.md, "Test and
// fault hooks", lists them with what each does.
typedef enum {
    // user settings
    ZT_ENV_CPU_GEMM,              // ZT_CPU_GEMM
    ZT_ENV_CUDA_MODULE,           // ZT_CUDA_MODULE
    ZT_ENV_CUDA_SYNC,             // ZT_CUDA_SYNC
    ZT_ENV_CUDA_DELTA_RECUR,      // ZT_CUDA_DELTA_RECUR
    ZT_ENV_CUDA_DELTA_TC,         // ZT_CUDA_DELTA_TC
    ZT_ENV_PROGRESS_INTERVAL,     // ZT_PROGRESS_INTERVAL
    ZT_ENV_TOKENIZER_CACHE,       // ZT_TOKENIZER_CACHE
    ZT_ENV_WATCHDOG_PERIOD_MS,    // ZT_WATCHDOG_PERIOD_MS
    // test and fault hooks: checkpoint save
    ZT_ENV_CKPT_FAIL_AFTER_BYTES, // ZT_CKPT_FAIL_AFTER_BYTES
    ZT_ENV_CKPT_DEBUG_FAIL_STEP,  // ZT_CKPT_DEBUG_FAIL_STEP
    ZT_ENV_CKPT_NO_SPACE_CHECK,   // ZT_CKPT_NO_SPACE_CHECK
    ZT_ENV_CKPT_NO_RESERVE,       // ZT_CKPT_NO_RESERVE
    ZT_ENV_CKPT_DEBUG_NO_ODIRECT, // ZT_CKPT_DEBUG_NO_ODIRECT
    ZT_ENV_CKPT_CRC_CHUNK,        // ZT_CKPT_CRC_CHUNK
    ZT_ENV_CKPT_DEBUG_STALL_RANK, // ZT_CKPT_DEBUG_STALL_RANK
    ZT_ENV_CKPT_DEBUG_STALL_S,    // ZT_CKPT_DEBUG_STALL_S
    ZT_ENV_CKPT_DEBUG_STALL_STEP, // ZT_CKPT_DEBUG_STALL_STEP
    ZT_ENV_CKPT_DEBUG_PAUSE_S,    // ZT_CKPT_DEBUG_PAUSE_S
    ZT_ENV_CKPT_DEBUG_PAUSE_STEP, // ZT_CKPT_DEBUG_PAUSE_STEP
    ZT_ENV_CKPT_DEBUG_COPY_DELAY_S, // ZT_CKPT_DEBUG_COPY_DELAY_S
    ZT_ENV_CKPT_DEBUG_IO,         // ZT_CKPT_DEBUG_IO
    ZT_ENV_CKPT_DEBUG_H5,         // ZT_CKPT_DEBUG_H5
    // test and fault hooks: trainer and engine
    ZT_ENV_DEBUG_MEM_AVAILABLE,   // ZT_DEBUG_MEM_AVAILABLE
    ZT_ENV_DEBUG_RUN_LOCK_FILE_ONLY, // ZT_DEBUG_RUN_LOCK_FILE_ONLY
    ZT_ENV_TEST_CORRUPT_REPLICA,  // ZT_TEST_CORRUPT_REPLICA
    ZT_ENV_COUNT
} zt_env_var;

typedef enum { ZT_ENV_SETTING, ZT_ENV_HOOK } zt_env_kind;
// When the value is taken from the environment. ONCE: on first use, then fixed for the process
// (thread-safe). EACH_USE: at every call, for variables that a unit test changes between two
// operations in one process (its saves, its comms); each operation reads them once, at its start.
typedef enum { ZT_ENV_ONCE, ZT_ENV_EACH_USE } zt_env_read;

typedef struct {
    const char *name;  // "ZT_CKPT_FAIL_AFTER_BYTES"
    zt_env_kind kind;
    zt_env_read read;
    const char *doc;   // one line: what it does, its values and default
} zt_env_entry;

// The table's entry for v (tests check it against docs/design.md).
const zt_env_entry *zt_env_info(zt_env_var v);

// The variable's text, NULL when it is unset ("" when set empty).
const char *zt_env_str(zt_env_var v);
// 1 when set, not empty and not "0" (a switch).
int zt_env_on(zt_env_var v);
// 1 and *out = strtoll(text, 10) when set and not empty; 0 (*out untouched) otherwise.
int zt_env_i64(zt_env_var v, int64_t *out);
// 1 and *out = atof(text) when set and not empty; 0 (*out untouched) otherwise.
int zt_env_f64(zt_env_var v, double *out);

#ifdef __cplusplus
}
#endif
#endif
