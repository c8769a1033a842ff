// `zerotrain export CKPT OUT`: a training checkpoint's fp32 master weights as a
// Hugging Face model directory (config.json + safetensors, sharded with an index
// when larger than --max-shard-size), loadable by transformers, vLLM and --init.
// The flags are one table (cli/flags.h): a usage error exits 2, a failed export 1.
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint/ckpt.h"
#include "checkpoint/safetensors.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "base/common.h"

static const char synopsis[] =
    "usage: zerotrain export [options] CKPT OUT_DIR\n"
    "\n"
    "Writes the fp32 master weights of a checkpoint as a Hugging Face model directory:\n"
    "config.json and model.safetensors, or model-0000i-of-0000n.safetensors plus\n"
    "model.safetensors.index.json when the tensors exceed --max-shard-size. Every crc32c of\n"
    "the master weights is verified first; a corrupt checkpoint is not exported.\n"
    "\n"
    "CKPT is a run directory (uses RUN/checkpoints/latest), a checkpoints directory, or a\n"
    "step directory (RUN/checkpoints/step-NNNNNNNN). OUT_DIR must not exist or be empty.\n";
static const char epilog[] =
    "\n"
    "example:\n"
    "  zerotrain export runs/r1 runs/r1/hf --dtype bf16\n";

typedef struct {
    int dtype;              // zt_st_dtype: ZT_ST_BF16 or ZT_ST_F32
    const char *max_shard;  // a size, checked by parse_size after the table
} export_flags;

#define T export_flags
// bfloat16, float32 and f32 are accepted spellings of the two
static const zt_flag_choice dtype_choices[] = {{"bf16", ZT_ST_BF16},   {"bfloat16", ZT_ST_BF16}, {"fp32", ZT_ST_F32},
                                               {"float32", ZT_ST_F32}, {"f32", ZT_ST_F32},       {0}};
static const zt_flag flags[] = {
    {.type = ZT_FLAG_SECTION, .help = "options:"},
    {"dtype", ZT_FLAG_ENUM, ZT_AT_INT(T, dtype), "bf16|fp32", .def = ZT_ST_BF16, .choices = dtype_choices,
     .letter = 'd', .help = "tensor dtype in the safetensors files (default {default},\nround to nearest even)"},
    {"max-shard-size", ZT_FLAG_STR, ZT_AT_STR(T, max_shard), "SIZE", .sdef = "5GB", .letter = 's',
     .help = "largest safetensors file, e.g. {default} (default), 500MB,\n"
             "2GiB, 20KB or plain bytes; a tensor larger than SIZE\n"
             "gets a file of its own"},
    {0}};
#undef T

// "5GB" -> 5e9, "2GiB" -> 2^31, "1000" -> 1000 (units as in transformers' save_pretrained).
static int parse_size(const char *s, int64_t *out) {
    char *end;
    double v = strtod(s, &end);
    static const struct { const char *u; double m; } units[] = {
        {"", 1}, {"B", 1}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
        {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
    };
    if (end == s || !(v > 0)) return -1;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcasecmp(end, units[i].u) && (units[i].u[0] || !strcmp(end, ""))) {
            double b = v * units[i].m;
            if (b < 1 || b > 9e18) return -1;
            *out = (int64_t)b;
            return 0;
        }
    return -1;
}

int zt_cmd_export(int argc, char **argv) {
    export_flags f;
    int first;
    const int prc = zt_flags_parse_operands("export", flags, &f, argc, argv, synopsis, epilog, &first);
    if (prc) return prc == 1 ? 0 : 2;
    const int dtype = f.dtype;
    int64_t max_shard;
    if (parse_size(f.max_shard, &max_shard) != 0) {
        fprintf(stderr,
                "zerotrain: error: --max-shard-size: '%s' is not a size (a positive number with an optional "
                "unit B, KB, MB, GB, KiB, MiB, GiB)\n",
                f.max_shard);
        return 2;
    }
    if (argc - first != 2) {
        fprintf(stderr, "zerotrain: error: export needs CKPT and OUT_DIR (got %d argument%s)\n\n", argc - first,
                argc - first == 1 ? "" : "s");
        zt_flags_usage(stderr, flags, synopsis, epilog);
        return 2;
    }
    const char *ckpt = argv[first], *out = argv[first + 1];
    char dir[4096];
    if (zt_ckpt_resolve(ckpt, dir, sizeof dir) != 0) {
        fprintf(stderr, "zerotrain: error: %s\n", zt_errmsg());
        return 1;
    }
    double t0 = zt_now();
    if (zt_ckpt_export_hf(dir, out, dtype, max_shard) != 0) {
        fprintf(stderr, "zerotrain: error: %s\n", zt_errmsg());
        return 1;
    }
    zt_ckpt_meta m;
    if (zt_ckpt_open_meta(dir, &m, NULL, NULL) != 0) m.step = -1;
    int nfiles = 0;
    long long bytes = 0;
    DIR *d = opendir(out);
    struct dirent *e;
    char p[8192];
    struct stat st;
    while (d && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 12 || strcmp(e->d_name + n - 12, ".safetensors")) continue;
        snprintf(p, sizeof p, "%s/%s", out, e->d_name);
        if (stat(p, &st) == 0) nfiles++, bytes += st.st_size;
    }
    if (d) closedir(d);
    printf("exported %s (step %lld) to %s: %s, %d safetensors file%s%s, %.1f MB, %.2f s\n", dir, (long long)m.step, out,
           dtype == ZT_ST_BF16 ? "bf16" : "fp32", nfiles, nfiles == 1 ? "" : "s",
           nfiles > 1 ? " + model.safetensors.index.json" : "", bytes / 1e6, zt_now() - t0);
    return 0;
}
