// One table per command: each flag declared once (name, field, type, range, default,
// help); the parser derives from it the getopt_long table, the usage text, the
// defaults, the range checks, the run.json "settings" object, and the YAML run
// configuration: every table gets --config FILE (a YAML mapping of flag names to values,
// read with libyaml before the command line, which overrides it) and --print-config (the
// resolved values as YAML, which --config reads back to the same values).
// defines: zt_flag, zt_flags_parse, zt_flags_usage, zt_flags_settings_json, zt_flags_free,
//          zt_flags_read_config, zt_flags_print_config, zt_flags_config_json, zt_flags_config_file
#ifndef ZT_FLAGS_H
#define ZT_FLAGS_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "train/train_defaults.h"

typedef enum {
    ZT_FLAG_END = 0,   // ends a table
    ZT_FLAG_SECTION,   // a heading in the usage text (help), no flag
    ZT_FLAG_STR,       // const char *
    ZT_FLAG_OPTSTR,    // const char *, optional value: --x=V, --x V (V not starting with '-'), or bare --x (.bare)
    ZT_FLAG_INT,       // int in [imin, imax]
    ZT_FLAG_I64,       // int64_t in [imin, imax]
    ZT_FLAG_U64,       // uint64_t in [imin, imax]
    ZT_FLAG_F64,       // double in [fmin, fmax]
    ZT_FLAG_SET,       // int: --name sets 1
    ZT_FLAG_CLEAR,     // int: --name (a "no-..." flag) sets 0; the field's default is 1
    ZT_FLAG_ENUM,      // int: one of .choices, stored as the choice's value
    ZT_FLAG_KEYWORD,   // const char *: one of .choices, stored as the choice's name
    ZT_FLAG_LIST,      // zt_flag_list: --name A B ... takes the operands that follow it, up to the
                       // next list flag (other flags may come between); a table with one is parsed
                       // in order, and an operand before any list flag is a usage error
} zt_flag_type;

// A LIST flag's operands: pointers into argv, v malloc'd by the parser (zt_flags_free).
typedef struct {
    const char **v;
    int n;
} zt_flag_list;

typedef struct {
    const char *name;
    int value;
} zt_flag_choice;

typedef struct zt_flag {
    const char *name;        // without the leading "--"
    zt_flag_type type;
    size_t offset;           // of the field in the command's options struct
    const char *metavar;     // shown after the name in the usage text ("N", "DIR")
    int64_t imin, imax;      // INT, I64, U64 range
    double fmin, fmax;       // F64 range
    double def;              // default of numeric, bool and enum flags (enum: the choice's value)
    const char *sdef;        // default of STR, OPTSTR and KEYWORD flags (NULL: none)
    const char *bare;        // OPTSTR: the value of the flag without one
    const zt_flag_choice *choices;  // ENUM, KEYWORD: NULL-name-terminated
    const char *help;        // usage text; "{default}" is replaced by the default, '\n' starts an indented line
    const char *alias;       // another accepted name (documented in the usage text)
    const char *setting;     // key of the run.json "settings" object (NULL: not a setting)
    char letter;             // a one-letter form (-o), or 0
    // END entry only: another command's table whose keys a --config file may also hold; they
    // are left to that command (train and preflight read one file: launch/zerotrain.sbatch)
    const struct zt_flag *config_also;
} zt_flag;

// offsetof(T, f), refused at compile time when the field's size does not fit the type
#define ZT_FLAG_AT(T, f, size) (offsetof(T, f) + 0 * sizeof(char[sizeof(((T *)0)->f) == (size) ? 1 : -1]))
#define ZT_AT_INT(T, f) ZT_FLAG_AT(T, f, sizeof(int))        // INT, SET, CLEAR, ENUM
#define ZT_AT_I64(T, f) ZT_FLAG_AT(T, f, sizeof(int64_t))    // I64, U64
#define ZT_AT_F64(T, f) ZT_FLAG_AT(T, f, sizeof(double))     // F64
#define ZT_AT_STR(T, f) ZT_FLAG_AT(T, f, sizeof(const char *))  // STR, OPTSTR, KEYWORD
#define ZT_AT_LIST(T, f) ZT_FLAG_AT(T, f, sizeof(zt_flag_list))  // LIST

// Writes every flag's default into opts (the table's defaults are the only ones applied).
void zt_flags_defaults(const zt_flag *t, void *opts);
// Parses argv (argv[0] is the command name): the defaults, then the --config FILE (if given),
// then the command line. Returns 0, 1 after --help (usage printed to stdout) or --print-config
// (the resolved configuration printed to stdout), or 2 after a usage error (message
// "zerotrain CMD: error: ..." on stderr; a config file's errors name FILE:LINE).
int zt_flags_parse(const char *cmd, const zt_flag *t, void *opts, int argc, char **argv, const char *synopsis,
                   const char *epilog);
// The same for commands that take operands (files, a run directory): they are left in
// argv[*first .. argc-1] instead of being refused.
int zt_flags_parse_operands(const char *cmd, const zt_flag *t, void *opts, int argc, char **argv,
                            const char *synopsis, const char *epilog, int *first);
// The usage text: synopsis, then every section and flag with its help and default, then epilog.
void zt_flags_usage(FILE *f, const zt_flag *t, const char *synopsis, const char *epilog);
// Frees what the parser allocated in opts (the LIST flags' arrays).
void zt_flags_free(const zt_flag *t, void *opts);
// The flags with a .setting key as one JSON object (table order), malloc'd text.
char *zt_flags_settings_json(const zt_flag *t, const void *opts);

// ---- the YAML run configuration ----
// Keys are the long flag names, '-' or '_' alike (micro_batch, micro-batch); a "no-X" flag is
// also X with the opposite boolean (evenfix: false = no_evenfix: true). A top-level key whose
// value is a mapping and that is no flag is a section (optimizer:, checkpoint:, ...), read
// for its flags. null (or ~) is the flag's default. Numbers, choices and ranges are checked
// as on the command line; an error reads "FILE:LINE: <the flag's message>", and an unknown
// key names the nearest valid one. The file is read to its end (a /proc file's st_size of 0 is
// not trusted); one with no document (empty, or comments only) sets nothing. Bounded: at most
// 1 MiB, collections nested 8 deep (aliases expanded), 1000 anchors, and aliases that add at
// most 10000 nodes and 1 MiB of text; past a bound, or on bytes that are not YAML text, the
// error gives FILE:LINE:COL and the bound.
// Reads FILE into opts over what opts holds (no defaults first). 0, or -1 + zt_err.
int zt_flags_read_config(const zt_flag *t, void *opts, const char *path);
// Every flag's value as YAML (what --print-config prints): `key: value` in table order, the
// sections as comments; a default that is no value of the flag ("not given": --steps, --threads)
// as null. Read back with --config it gives the same values: a string is plain or double-quoted
// with escapes (\x85, \u2028, ...) for what YAML would not read back as itself. 0, or -1 +
// zt_err with nothing printed when a string is not UTF-8 (YAML holds Unicode text only).
int zt_flags_print_config(FILE *f, const char *cmd, const zt_flag *t, const void *opts);
// The same values as one JSON object keyed like the YAML (malloc'd text): run.json "config".
char *zt_flags_config_json(const zt_flag *t, const void *opts);
// The --config file zt_flags_parse read into opts: its path and the CRC-32C of its bytes.
// 1 when there was one, 0 when none.
int zt_flags_config_file(const void *opts, const char **path, uint32_t *crc32c);

// Flags shared by `train` and `preflight`, declared once: T is the command's options
// struct, whose fields of these names they set. Used as a section of both tables.
static const zt_flag_choice zt_bool_choices[] = {{"true", 1}, {"false", 0}, {0}};
#define ZT_FLAGS_DATA_AND_BATCH(T)                                                                                   \
    {"data", ZT_FLAG_STR, ZT_AT_STR(T, data), "DIR",                                                                 \
     .help = "dataset directory (dataset.json + uint32 block files, made by `zerotrain pack`; required)"},          \
    {"model", ZT_FLAG_STR, ZT_AT_STR(T, model), "PATH",                                                             \
     .help = "config.json or a Hugging Face model directory (train: default --init's config;\n"                      \
             "preflight: the vocab for the id check, the parameter count for check 5)"},                             \
    {"run-dir", ZT_FLAG_STR, ZT_AT_STR(T, run_dir), "RUN",                                                          \
     .help = "the run's directory: run.json, metrics.jsonl, checkpoints/, final/ (created);\n"                       \
             "preflight check 5 measures the filesystem holding it"},                                                \
    {"micro-batch", ZT_FLAG_INT, ZT_AT_INT(T, micro_batch), "B", 1, 1 << 20, .def = ZT_DEF_MICRO_BATCH,             \
     .help = "blocks per forward/backward (default {default}); the block balance counts whole steps"},              \
    {"grad-accum", ZT_FLAG_INT, ZT_AT_INT(T, grad_accum), "G", 1, 1 << 20, .def = ZT_DEF_GRAD_ACCUM,                \
     .help = "micro-batches per optimizer step (default {default})"},                                               \
    {"no-evenfix", ZT_FLAG_CLEAR, ZT_AT_INT(T, evenfix), .def = ZT_DEF_EVENFIX, .setting = "evenfix",               \
     .help = "let each rank run its own block count (train: REPRODUCES the epoch-end deadlock;\n"                   \
             "preflight: fail if the per-rank step counts differ); default: every rank stops\n"                     \
             "at the global minimum block count"},                                                                   \
    {"keep-last", ZT_FLAG_INT, ZT_AT_INT(T, keep_last), "K", 0, 1 << 20, .def = ZT_DEF_KEEP_LAST,                   \
     .help = "complete checkpoints to keep, older ones removed after a newer one commits\n"                         \
             "(default {default}; 0 keeps all); preflight check 5 needs room for K + 1"},                             \
    {"no-verify-crc", ZT_FLAG_CLEAR, ZT_AT_INT(T, verify_crc), .def = ZT_DEF_VERIFY_CRC, .alias = "no-verify-data", \
     .help = "skip the crc32c check of the data files (sizes and token ids are always checked)"},                   \
    {"allow-long-seq", ZT_FLAG_SET, ZT_AT_INT(T, allow_long_seq), .def = ZT_DEF_ALLOW_LONG_SEQ,                     \
     .help = "pass blocks longer than the model's max_position_embeddings (the gate refuses\n"                      \
             "them otherwise: RoPE beyond the trained range)"},                                                      \
    {"shard-group", ZT_FLAG_STR, ZT_AT_STR(T, shard_group), "G|node",                                               \
     .help = "hybrid sharding: parameters, gradients and AdamW state sharded over groups of G\n"                     \
             "consecutive ranks and replicated across the W/G groups; gathers and reduce-scatters\n"                \
             "stay inside a group, one all-reduce per step crosses the replicas. `node`: the\n"                      \
             "ranks of one node (every node must hold the same count). G must divide W\n"                           \
             "(default: W, full shard; 0 also means full shard)"},                                                                           \
    {"context-parallel", ZT_FLAG_INT, ZT_AT_INT(T, context_parallel), "C", 1, 1 << 16, .def = 1,                    \
     .help = "context parallelism: C consecutive ranks share each block, each holding an early\n"                 \
             "and a late chunk of it (K/V all-gathered over the C ranks in every layer); data\n"                    \
             "parallelism is over W/C groups. C must divide the shard group (and W); blocks need\n"              \
             "at least 2C tokens. cuda: tiled or GEMM attention (default {default}: none)"},                        \
    {"reshard-after-forward", ZT_FLAG_ENUM, ZT_AT_INT(T, reshard_after_forward), "true|false", .def = 1,           \
     .choices = zt_bool_choices,                                                                                      \
     .help = "false: keep each unit's gathered parameters from its forward to its backward\n"                       \
             "(no backward re-gather: ~half the gathered bytes, every unit's full parameters\n"                     \
             "resident at once) (default {default})"}
#endif
