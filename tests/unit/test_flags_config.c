// The YAML run configuration (cli/flags.c --config, --print-config), held to the flag tables:
// every flag of `train` and `preflight`, walked from the table itself, set from a file (both
// key spellings, at the top level and in a section) gives exactly what the same flag gives on
// the command line; the command line overrides the file; each bad file is refused naming
// FILE:LINE (with the flag's own message for a bad value, the nearest key for an unknown one);
// --print-config read back gives byte-identical output.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/common.h"
#include "cli/args.h"
#include "cli/flags.h"
#include "cli/tables.h"
#include "tests/support/test_util.h"
#include "train/preflight.h"
#include "train/train.h"

static char g_dir[256];

static const char *write_file(const char *name, const char *text) {
    static char path[8][512];
    static int k;
    char *p = path[k++ % 8];
    snprintf(p, 512, "%s/%s", g_dir, name);
    FILE *f = fopen(p, "w");
    if (!f) zt_fatal("cannot write %s", p);
    fputs(text, f);
    fclose(f);
    return p;
}

// A table's two opts structs: train's and preflight's, whichever the table is.
typedef union {
    zt_train_opts train;
    zt_preflight_opts preflight;
} any_opts;

// The flags' values as the resolved JSON (every flag of the table).
static char *values(const zt_flag *t, const any_opts *o) { return zt_flags_config_json(t, o); }

// argv parse; 0 on success
static int parse_argv(const char *cmd, const zt_flag *t, any_opts *o, int argc, const char **argv) {
    memset(o, 0, sizeof *o);
    return zt_flags_parse(cmd, t, o, argc, (char **)argv, NULL, NULL);
}

static int is_flag(const zt_flag *e) { return e->type != ZT_FLAG_SECTION && e->type != ZT_FLAG_END; }

// A value of flag e other than its default: the command-line word (NULL: the flag takes none)
// and the YAML text of the same value.
static void other_value(const zt_flag *e, char *arg, size_t an, char *yaml, size_t yn, int *has_arg) {
    *has_arg = 1;
    switch (e->type) {
    case ZT_FLAG_INT:
    case ZT_FLAG_I64:
    case ZT_FLAG_U64: {
        int64_t v = (int64_t)e->def + 1;
        if (v < e->imin || v > e->imax) v = e->imin;
        if (v == (int64_t)e->def) v = e->imin + 1;
        snprintf(arg, an, "%lld", (long long)v);
        snprintf(yaml, yn, "%lld", (long long)v);
        return;
    }
    case ZT_FLAG_F64: {
        const double c[3] = {e->fmin, e->fmax, 0.5 * (e->fmin + e->fmax)};
        double v = c[0];
        for (int i = 0; i < 3 && v == e->def; i++) v = c[i];
        snprintf(arg, an, "%.17g", v);
        snprintf(yaml, yn, "%.17g", v);
        return;
    }
    case ZT_FLAG_ENUM:
    case ZT_FLAG_KEYWORD:
        for (const zt_flag_choice *ch = e->choices; ch->name; ch++)
            if (e->type == ZT_FLAG_ENUM ? ch->value != (int)e->def : !e->sdef || strcmp(ch->name, e->sdef)) {
                snprintf(arg, an, "%s", ch->name);
                snprintf(yaml, yn, "%s", ch->name);
                return;
            }
        break;
    case ZT_FLAG_STR:
        snprintf(arg, an, "dir/%s-value", e->name);
        snprintf(yaml, yn, "dir/%s-value", e->name);
        return;
    case ZT_FLAG_OPTSTR:
        snprintf(arg, an, "some/%s", e->name);
        snprintf(yaml, yn, "some/%s", e->name);
        return;
    case ZT_FLAG_SET:
    case ZT_FLAG_CLEAR:
        *has_arg = 0;
        snprintf(yaml, yn, "true");
        return;
    default: break;
    }
    zt_fatal("flag --%s: no other value to test", e->name);
}

static void underscored(const char *name, char *out, size_t n) {
    snprintf(out, n, "%s", name);
    for (char *c = out; *c; c++)
        if (*c == '-') *c = '_';
}

// Every flag of table t: --flag V on the command line == `flag: V` in a file, with the
// dashed and the underscored key, at the top level and inside a section; the value differs
// from the default (so that a key the reader ignored could not pass).
static void test_every_flag(const char *cmd, const zt_flag *t) {
    any_opts def, a, b;
    const char *argv0[] = {cmd};
    CHECK(parse_argv(cmd, t, &def, 1, argv0) == 0, "%s: defaults", cmd);
    char *vdef = values(t, &def);
    int nflags = 0;
    for (const zt_flag *e = t; e->type != ZT_FLAG_END; e++) {
        if (!is_flag(e)) continue;
        nflags++;
        char arg[128], yv[128], flag[96], key[96], text[512];
        int has_arg;
        other_value(e, arg, sizeof arg, yv, sizeof yv, &has_arg);
        snprintf(flag, sizeof flag, "--%s", e->name);
        const char *argv[3] = {cmd, flag, arg};
        CHECK(parse_argv(cmd, t, &a, has_arg ? 3 : 2, argv) == 0, "%s %s %s", cmd, flag, has_arg ? arg : "");
        char *va = values(t, &a);
        CHECK(strcmp(va, vdef) != 0, "%s %s: the test value %s is the default", cmd, flag, arg);
        for (int form = 0; form < 4; form++) {
            if (form & 1) underscored(e->name, key, sizeof key);
            else snprintf(key, sizeof key, "%s", e->name);
            if (form & 2) snprintf(text, sizeof text, "# a section for reading\nsection_x:\n  %s: %s\n", key, yv);
            else snprintf(text, sizeof text, "%s: %s\n", key, yv);
            const char *path = write_file("every.yaml", text);
            const char *cargv[3] = {cmd, "--config", path};
            CHECK(parse_argv(cmd, t, &b, 3, cargv) == 0, "%s: file `%s` refused: %s", cmd, key, zt_errmsg());
            char *vb = values(t, &b);
            CHECK(!strcmp(va, vb), "%s: `%s: %s` (form %d) differs from %s %s:\n  file %s\n  flag %s", cmd, key, yv,
                  form, flag, has_arg ? arg : "", vb, va);
            free(vb);
            zt_flags_free(t, &b);
        }
        // a "no-X" flag: X: false is the same as --no-X
        if (e->type == ZT_FLAG_CLEAR && !strncmp(e->name, "no-", 3)) {
            snprintf(text, sizeof text, "%s: false\n", e->name + 3);
            const char *path = write_file("positive.yaml", text);
            const char *cargv[3] = {cmd, "--config", path};
            CHECK(parse_argv(cmd, t, &b, 3, cargv) == 0, "%s: %s", cmd, text);
            char *vb = values(t, &b);
            CHECK(!strcmp(va, vb), "%s: `%s` differs from --%s", cmd, text, e->name);
            free(vb);
        }
        // an optional-value flag given bare: `resume: true` is `--resume` alone
        if (e->type == ZT_FLAG_OPTSTR) {
            const char *bargv[2] = {cmd, flag};
            CHECK(parse_argv(cmd, t, &a, 2, bargv) == 0, "%s %s alone", cmd, flag);
            char *vbare = values(t, &a);
            snprintf(text, sizeof text, "%s: true\n", e->name);
            const char *path = write_file("bare.yaml", text);
            const char *cargv[3] = {cmd, "--config", path};
            CHECK(parse_argv(cmd, t, &b, 3, cargv) == 0, "%s: %s", cmd, text);
            char *vb = values(t, &b);
            CHECK(!strcmp(vbare, vb), "%s: `%s` differs from %s alone", cmd, text, flag);
            free(vb), free(vbare);
        }
        free(va);
    }
    free(vdef);
    printf("%s: %d flags, each from a file (4 spellings) equal to the command line\n", cmd, nflags);
}

// All of a table's flags at once, in one file and on one command line.
static void test_all_at_once(const char *cmd, const zt_flag *t) {
    const char *argv[256];
    static char args[128][128];
    int argc = 0, na = 0;
    argv[argc++] = cmd;
    char *text = zt_xcalloc(1, 65536);
    size_t len = 0;
    for (const zt_flag *e = t; e->type != ZT_FLAG_END; e++) {
        if (!is_flag(e)) continue;
        char yv[128], key[96];
        int has_arg;
        other_value(e, args[na + 1], sizeof args[0], yv, sizeof yv, &has_arg);
        snprintf(args[na], sizeof args[0], "--%s", e->name);
        argv[argc++] = args[na];
        if (has_arg) argv[argc++] = args[na + 1];
        na += 2;
        underscored(e->name, key, sizeof key);
        len += (size_t)snprintf(text + len, 65536 - len, "%s: %s\n", key, yv);
    }
    any_opts a, b;
    CHECK(parse_argv(cmd, t, &a, argc, argv) == 0, "%s: every flag on the command line", cmd);
    const char *cargv[3] = {cmd, "--config", write_file("all.yaml", text)};
    CHECK(parse_argv(cmd, t, &b, 3, cargv) == 0, "%s: every flag in a file: %s", cmd, zt_errmsg());
    char *va = values(t, &a), *vb = values(t, &b);
    CHECK(!strcmp(va, vb), "%s: all flags: file %s\nflags %s", cmd, vb, va);
    free(va), free(vb), free(text);
}

// defaults < file < command line, wherever --config stands; a list flag on the command line
// replaces the file's list.
typedef struct {
    zt_flag_list files;
    const char *resume;
    double lr;
    int n;
} small_opts;
static const zt_flag small_flags[] = {
    {"files", ZT_FLAG_LIST, ZT_AT_LIST(small_opts, files), "F...", .help = "files"},
    {"resume", ZT_FLAG_OPTSTR, ZT_AT_STR(small_opts, resume), .bare = "latest", .help = "from"},
    {"lr", ZT_FLAG_F64, ZT_AT_F64(small_opts, lr), .fmin = 0, .fmax = 10, .def = 1},
    {"n", ZT_FLAG_INT, ZT_AT_INT(small_opts, n), .imin = 0, .imax = 100, .def = 7},
    {0}};

static void test_override(void) {
    const char *path = write_file("over.yaml", "optimizer:\n  lr: 0.5\n  warmup: 4\nmicro-batch: 3\nschedule: constant\n");
    for (int before = 0; before < 2; before++) {
        const char *argv_a[] = {"train", "--config", path, "--lr", "0.25"};
        const char *argv_b[] = {"train", "--lr", "0.25", "--config", path};
        any_opts o;
        CHECK(parse_argv("train", zt_train_flags, &o, 5, before ? argv_b : argv_a) == 0, "override parse");
        CHECK(o.train.hp.lr == 0.25, "the command line's --lr wins (%s --config): %g", before ? "before" : "after",
              o.train.hp.lr);
        CHECK(o.train.micro_batch == 3 && o.train.hp.warmup == 4 && o.train.hp.schedule == ZT_SCHED_CONSTANT,
              "the file's values where the command line says nothing: micro-batch %d warmup %lld schedule %d",
              o.train.micro_batch, (long long)o.train.hp.warmup, o.train.hp.schedule);
        CHECK(o.train.grad_accum == ZT_DEF_GRAD_ACCUM && o.train.hp.beta2 == ZT_DEF_BETA2, "defaults elsewhere");
        const char *p = NULL;
        CHECK(zt_flags_config_file(&o, &p, NULL) == 1 && p && !strcmp(p, path), "the file is recorded");
        zt_flags_free(zt_train_flags, &o);
    }
    // null in the file is the default
    const char *np = write_file("null.yaml", "lr: null\nmicro_batch: ~\nsteps:\n");
    const char *argv_n[] = {"train", "--config", np};
    any_opts o;
    CHECK(parse_argv("train", zt_train_flags, &o, 3, argv_n) == 0, "nulls: %s", zt_errmsg());
    CHECK(o.train.hp.lr == ZT_DEF_LR && o.train.micro_batch == ZT_DEF_MICRO_BATCH && o.train.steps == ZT_DEF_STEPS,
          "null means the default");
    // lists: the file's, replaced (not extended) by the command line's
    const char *lp = write_file("list.yaml", "files: [a.csv, b.csv]\nresume: auto\nn: 9\n");
    small_opts s;
    const char *la[] = {"small", "--config", lp};
    CHECK(zt_flags_parse("small", small_flags, &s, 3, (char **)la, NULL, NULL) == 0, "list file");
    CHECK(s.files.n == 2 && !strcmp(s.files.v[0], "a.csv") && !strcmp(s.files.v[1], "b.csv"), "the file's list");
    CHECK(s.resume && !strcmp(s.resume, "auto") && s.n == 9, "optional string and int from the file");
    zt_flags_free(small_flags, &s);
    const char *lb[] = {"small", "--files", "c.csv", "--config", lp, "--resume"};
    CHECK(zt_flags_parse("small", small_flags, &s, 6, (char **)lb, NULL, NULL) == 0, "list override");
    CHECK(s.files.n == 1 && !strcmp(s.files.v[0], "c.csv"), "the command line's list replaces the file's (n %d)",
          s.files.n);
    CHECK(s.resume && !strcmp(s.resume, "latest"), "--resume alone over the file's auto: %s", s.resume);
    zt_flags_free(small_flags, &s);
    const char *two[] = {"small", "--config", lp, "--config", lp};
    CHECK(zt_flags_parse("small", small_flags, &s, 5, (char **)two, NULL, NULL) == 2, "--config twice is refused");
}

// A bad file: zt_flags_read_config fails with `want` (FILE:LINE: ...) in its message, and the
// command refuses it with exit status 2.
static void bad_file(const char *name, const char *text, const char *want_fmt, const char *detail) {
    const char *path = text ? write_file(name, text) : name;
    any_opts o;
    zt_train_defaults(&o.train);
    char want[1024];
    snprintf(want, sizeof want, want_fmt, path, detail ? detail : "");
    const int rc = zt_flags_read_config(zt_train_flags, &o, path);
    CHECK(rc != 0 && strstr(zt_errmsg(), want), "%s: expected an error with\n  '%s'\n  got '%s'", name, want,
          rc ? zt_errmsg() : "(no error)");
    const char *argv[] = {"train", "--config", path};
    CHECK(parse_argv("train", zt_train_flags, &o, 3, argv) == 2, "%s: train --config exits 2", name);
    printf("refused as expected: %s\n", zt_errmsg());
}

static void test_bad_files(void) {
    char flagmsg[512];
    bad_file("unknown.yaml", "lr: 0.1\nlearning_rate: 1\n", "%s:2: unknown key 'learning_rate' (nearest valid key: lr)",
             NULL);
    bad_file("unknown2.yaml", "optimizer:\n  micro_batches: 2\n",
             "%s:2: unknown key 'micro_batches' in section 'optimizer' (nearest valid key: micro_batch)", NULL);
    // a bad value: the flag's own message, after FILE:LINE
    zt_arg_i64("--micro-batch", "two", 1, 1 << 20, &(int64_t){0});
    snprintf(flagmsg, sizeof flagmsg, "%s", zt_errmsg());
    bad_file("type.yaml", "# comment\nmicro_batch: two\n", "%s:2: %s", flagmsg);
    zt_arg_f64("--lr", "11", 0, 10, &(double){0});
    snprintf(flagmsg, sizeof flagmsg, "%s", zt_errmsg());
    bad_file("range.yaml", "seed: 3\nlr: 11\n", "%s:2: %s", flagmsg);
    bad_file("enum.yaml", "device: gpu\n", "%s:1: --device gpu: expected auto, cuda or cpu", NULL);
    bad_file("bool.yaml", "overwrite: 3\n", "%s:1: --overwrite: expected true or false, not '3'", NULL);
    bad_file("list.yaml", "lr: [1, 2]\n", "%s:1: --lr: expected a number, not a list", NULL);
    bad_file("dup.yaml", "lr: 1\noptimizer:\n  lr: 2\n", "%s:3: duplicate key 'lr': --lr is set at line 1 already",
             NULL);
    bad_file("dup2.yaml", "micro-batch: 1\nmicro_batch: 2\n",
             "%s:2: duplicate key 'micro_batch': --micro-batch is set at line 1 already", NULL);
    bad_file("dup3.yaml", "evenfix: false\nno_evenfix: true\n",
             "%s:2: duplicate key 'no_evenfix': --no-evenfix is set at line 1 already", NULL);
    bad_file("seq.yaml", "- lr: 1\n- seed: 2\n", "%s:1: the file is a list, not a mapping of flag names", NULL);
    bad_file("scalar.yaml", "just text\n", "%s:1: the file is a value, not a mapping of flag names", NULL);
    bad_file("syntax.yaml", "lr: 1\n  seed: [\n", "%s:2:", NULL);
    bad_file("docs.yaml", "lr: 1\n---\nlr: 2\n", "%s:2: a second YAML document", NULL);
    bad_file("ctl.yaml", "lr: 1\nseed: 2\nrun_dir: \"x\x1b\"\n",
             "%s:3:12: not YAML: control characters are not allowed (U+001B", NULL);
    bad_file("deep.yaml", "lr: [[[[[[[[1]]]]]]]]\n", "%s:1:12: collections nested more than 8 deep", NULL);
    bad_file("alias.yaml", "lr: &a [[[[[[1]]]]]]\noptimizer:\n  seed: [*a]\n",
             "%s:3:10: the alias *a nests collections 9 deep here", NULL);
    bad_file("cycle.yaml", "lr: &a [1, *a]\n", "%s:1:12: the alias *a stands inside the collection it names", NULL);
    bad_file("nested.yaml", "optimizer:\n  adam:\n    beta1: 0.8\n",
             "%s:2: 'adam' in section 'optimizer': sections hold flags, not other sections", NULL);
    char missing[600];
    snprintf(missing, sizeof missing, "%s/no-such.yaml", g_dir);
    bad_file(missing, NULL, "%s: cannot read the config file: No such file or directory", NULL);
    bad_file(g_dir, NULL, "%s: cannot read the config file: not a regular file", NULL);
}

// --print-config, read back with --config, prints the same bytes and gives the same values;
// strings that YAML would read as something else are quoted.
static void test_print_roundtrip(void) {
    const char *argv[] = {"train",  "--data",  "my data: \"quoted\" #1", "--run-dir", "true",   "--model", "123",
                          "--init", "-x/ä",    "--lr",                   "3e-4",      "--seed", "18446744",
                          "--no-evenfix", "--steps", "40", "--resume", "auto", "--eval-data", "e\tv\\al",
                          "--peak-tflops", "0.1", "--clip", "0.30000000000000004"};
    const int argc = (int)(sizeof argv / sizeof argv[0]);
    any_opts a, b;
    CHECK(parse_argv("train", zt_train_flags, &a, argc, argv) == 0, "roundtrip argv");
    char *p1 = NULL, *p2 = NULL;
    size_t n1 = 0, n2 = 0;
    FILE *f = open_memstream(&p1, &n1);
    zt_flags_print_config(f, "train", zt_train_flags, &a);
    fclose(f);
    const char *path = write_file("printed.yaml", p1);
    const char *cargv[] = {"train", "--config", path};
    const int back = parse_argv("train", zt_train_flags, &b, 3, cargv);
    CHECK(back == 0, "printed config reads back: %s", zt_errmsg());
    if (back != 0) {
        free(p1);
        return;
    }
    f = open_memstream(&p2, &n2);
    zt_flags_print_config(f, "train", zt_train_flags, &b);
    fclose(f);
    CHECK(n1 == n2 && !memcmp(p1, p2, n1), "--print-config of the read-back file differs:\n%s\n---\n%s", p1, p2);
    char *va = values(zt_train_flags, &a), *vb = values(zt_train_flags, &b);
    CHECK(!strcmp(va, vb), "values differ after the round trip:\n%s\n%s", va, vb);
    CHECK(b.train.data && !strcmp(b.train.data, "my data: \"quoted\" #1") && !strcmp(b.train.run_dir, "true") &&
              !strcmp(b.train.model, "123") && !strcmp(b.train.eval_data, "e\tv\\al"),
          "strings survive quoting");
    CHECK(b.train.hp.clip == 0.30000000000000004, "a double survives exactly");
    printf("print-config round trip: %zu bytes identical\n", n1);
    free(p1), free(p2), free(va), free(vb);
}

// Strings YAML cannot hold as they are (line breaks U+0085, U+2028, U+2029, the BOM, C1 and
// C0 controls) round-trip escaped; a string that is not UTF-8 is refused with nothing printed.
static void test_print_hostile(void) {
    const char *argv[] = {"train", "--data", "a\xc2\x85" "b\xe2\x80\xa8" "c", "--run-dir", "\xe2\x80\xa9",
                          "--init", "\xef\xbb\xbfx\xc2\x9f\x01", "--model", "ok \xe2\x82\xac \xf0\x9f\x98\x80"};
    any_opts a, b;
    CHECK(parse_argv("train", zt_train_flags, &a, 9, argv) == 0, "hostile argv");
    char *p1 = NULL, *p2 = NULL;
    size_t n1 = 0, n2 = 0;
    FILE *f = open_memstream(&p1, &n1);
    CHECK(zt_flags_print_config(f, "train", zt_train_flags, &a) == 0, "print hostile strings: %s", zt_errmsg());
    fclose(f);
    CHECK(strstr(p1, "data: \"a\\x85b\\u2028c\"\n") && strstr(p1, "run_dir: \"\\u2029\"\n") &&
              strstr(p1, "init: \"\\ufeffx\\x9f\\x01\"\n") && strstr(p1, "model: ok \xe2\x82\xac \xf0\x9f\x98\x80\n"),
          "escaped as expected:\n%s", p1);
    const char *path = write_file("hostile.yaml", p1);
    const char *cargv[] = {"train", "--config", path};
    CHECK(parse_argv("train", zt_train_flags, &b, 3, cargv) == 0, "hostile file reads back: %s", zt_errmsg());
    f = open_memstream(&p2, &n2);
    zt_flags_print_config(f, "train", zt_train_flags, &b);
    fclose(f);
    CHECK(n1 == n2 && !memcmp(p1, p2, n1), "hostile --print-config differs after the round trip");
    for (int i = 2; i < 9; i += 2) {
        const char *const *got = i == 2 ? &b.train.data : i == 4 ? &b.train.run_dir : i == 6 ? &b.train.init
                                                                                               : &b.train.model;
        CHECK(*got && !strcmp(*got, argv[i]), "%s survives the round trip", argv[i - 1]);
    }
    free(p1), free(p2);
    const char *bad[] = {"train", "--run-dir", "r\xffun"};
    CHECK(parse_argv("train", zt_train_flags, &a, 3, bad) == 0, "argv with a byte that is not UTF-8");
    p1 = NULL, n1 = 0;
    f = open_memstream(&p1, &n1);
    const int rc = zt_flags_print_config(f, "train", zt_train_flags, &a);
    fclose(f);
    CHECK(rc != 0 && n1 == 0 && strstr(zt_errmsg(), "--run-dir: the value is not UTF-8 text (byte 0xff at byte 1"),
          "not UTF-8: refused, nothing printed (rc %d, %zu bytes): %s", rc, n1, rc ? zt_errmsg() : "");
    free(p1);
}

// One file for train and preflight: each reads its own keys and leaves the other's.
static void test_companions(void) {
    const char *path = write_file("both.yaml", "data: d\nmicro_batch: 2\nlr: 0.5\nworld: 16\nexpect_tokens: 1000\n"
                                               "device: cuda\n");
    any_opts o;
    const char *targv[] = {"train", "--config", path};
    CHECK(parse_argv("train", zt_train_flags, &o, 3, targv) == 0, "train reads preflight's keys: %s", zt_errmsg());
    CHECK(o.train.micro_batch == 2 && o.train.hp.lr == 0.5 && o.train.device == ZT_DEVICE_CUDA, "train's values");
    const char *pargv[] = {"preflight", "--config", path};
    CHECK(parse_argv("preflight", zt_preflight_flags, &o, 3, pargv) == 0, "preflight reads train's keys: %s",
          zt_errmsg());
    CHECK(o.preflight.micro_batch == 2 && o.preflight.world == 16 && o.preflight.expect_tokens == 1000 &&
              !strcmp(o.preflight.device, "cuda"),
          "preflight's values");
    bad_file("worlds.yaml", "worlds: 3\n", "%s:1: unknown key 'worlds' (nearest valid key: world)", NULL);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/zt_test_flags_config_%d", (int)getpid());
    if (zt_mkdirs(g_dir) != 0) zt_die_on_err();
    test_every_flag("train", zt_train_flags);
    test_every_flag("preflight", zt_preflight_flags);
    test_all_at_once("train", zt_train_flags);
    test_all_at_once("preflight", zt_preflight_flags);
    test_override();
    test_bad_files();
    test_print_roundtrip();
    test_print_hostile();
    test_companions();
    zt_remove_tree(g_dir);
    printf("%d checks, %d failures\n", zt_test_checks, zt_test_failures);
    return zt_test_failures ? 1 : 0;
}
