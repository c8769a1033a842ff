// Tests of the operations tools: triage on synthetic traces built from the field
// report's table (with noise and per-rank clock phases) in all three log formats,
// checkpoint vs deadlock, malformed inputs, band files, calibration, and the watcher's
// rules on run directories written here (flight recorders through the real writer).
//   test_triage WORKDIR triage|errors|bands|calibrate|watch
#define _GNU_SOURCE
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "ops/triage.h"
#include "ops/watch.h"
#include "base/common.h"
#include "base/out_file.h"
#include "engine/flight.h"
#include "tests/support/test_util.h"

static const char *work;

// ---- synthetic traces ------------------------------------------------------------
typedef enum { G_COMPUTE, G_COMM, G_STARV, G_CKPT, G_DEADLOCK, G_SPIN, G_IDLE } gen_kind;
typedef struct {
    gen_kind kind;
    int seconds;
    int culprit;  // deadlock: the GPU at 0%
} segment;

static zt_gpu_state expected_state(gen_kind k) {
    switch (k) {
    case G_COMPUTE: return ZT_GS_COMPUTE;
    case G_COMM: return ZT_GS_COMM;
    case G_STARV: return ZT_GS_STARVATION;
    case G_CKPT: return ZT_GS_CHECKPOINT;
    case G_DEADLOCK:
    case G_SPIN: return ZT_GS_DEADLOCK;
    case G_IDLE: return ZT_GS_IDLE;
    }
    return ZT_GS_UNKNOWN;
}

static double unif(zt_rng *r, double a, double b) { return a + (b - a) * zt_rng_uniform(r); }

// One GPU's reading in a state; `scale` maps B300 watts to another GPU (idle I, compute C).
typedef struct {
    double idle, compute;  // this GPU model's idle and compute-centre watts
} gpu_model;

static double map_w(const gpu_model *m, double b300_w) { return m->idle + (b300_w - 135.0) / (990.0 - 135.0) * (m->compute - m->idle); }

static void reading(zt_rng *r, const gpu_model *m, const segment *s, int gpu, double *p, double *u) {
    double noise = zt_rng_normal(r);
    switch (s->kind) {
    case G_COMPUTE: *p = map_w(m, unif(r, 945, 1035)), *u = unif(r, 98, 100); break;
    case G_COMM: *p = map_w(m, 640 + 8 * noise), *u = unif(r, 97, 100); break;
    case G_STARV: *p = map_w(m, 575 + 12 * noise), *u = unif(r, 55, 100); break;
    case G_CKPT:  // rank 0 writes the checkpoint (0%), the rest spin in the save barrier
        *p = gpu == 0 ? map_w(m, unif(r, 150, 200)) : map_w(m, unif(r, 189, 196));
        *u = gpu == 0 ? unif(r, 0, 2) : 100;
        break;
    case G_DEADLOCK:
        *p = map_w(m, unif(r, 188, 197));
        *u = gpu == s->culprit ? 0 : 100;
        break;
    case G_SPIN: *p = map_w(m, unif(r, 188, 197)), *u = 100; break;
    case G_IDLE: *p = map_w(m, 135 + 2.5 * noise), *u = 0; break;
    }
    if (*u > 100) *u = 100;
    if (*u < 0) *u = 0;
}

typedef struct {
    double t0;
    int ngpu;
    const segment *seg;
    int nseg;
    double phase[64];  // per-GPU sampling phase (power.csv: each rank's own sampler)
    gpu_model model;
} trace;

static const segment field_day[] = {
    {G_COMPUTE, 30, 0}, {G_COMM, 12, 0},     {G_COMPUTE, 20, 0},  {G_STARV, 15, 0}, {G_COMPUTE, 8, 0},
    {G_CKPT, 12, 0},    {G_COMPUTE, 10, 0},  {G_DEADLOCK, 20, 3}, {G_IDLE, 10, 0},  {G_SPIN, 8, 0},
    {G_IDLE, 6, 0},
};
#define NSEG ((int)(sizeof field_day / sizeof field_day[0]))

static int trace_seconds(const trace *tr) {
    int s = 0;
    for (int i = 0; i < tr->nseg; i++) s += tr->seg[i].seconds;
    return s;
}

static const segment *seg_at(const trace *tr, int sec) {
    for (int i = 0; i < tr->nseg; i++) {
        if (sec < tr->seg[i].seconds) return &tr->seg[i];
        sec -= tr->seg[i].seconds;
    }
    return &tr->seg[tr->nseg - 1];
}

// Expected state at time t, or -1 within 1.5 s of a segment boundary (a snapshot may
// straddle it).
static int expected_at(const trace *tr, double t) {
    double x = t - tr->t0, acc = 0;
    for (int i = 0; i < tr->nseg; i++) {
        double end = acc + tr->seg[i].seconds;
        if (x < end) {
            if (x - acc < 1.5 && i > 0) return -1;
            if (end - x < 1.5 && i + 1 < tr->nseg) return -1;
            return (int)expected_state(tr->seg[i].kind);
        }
        acc = end;
    }
    return (int)expected_state(tr->seg[tr->nseg - 1].kind);
}

static FILE *xopen(const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(2);
    }
    return f;
}

// readings[sec][gpu] generated once so every format carries the same numbers
static double (*gen_readings(const trace *tr, uint64_t seed))[64][2] {
    int n = trace_seconds(tr);
    double(*rd)[64][2] = zt_xcalloc((size_t)n, sizeof *rd);
    zt_rng r;
    zt_rng_seed(&r, seed);
    for (int s = 0; s < n; s++)
        for (int g = 0; g < tr->ngpu; g++) reading(&r, &tr->model, seg_at(tr, s), g, &rd[s][g][0], &rd[s][g][1]);
    return rd;
}

static void write_power_csv(const trace *tr, double (*rd)[64][2], const char *dir) {
    if (strlen(dir) > 400) exit(2);
    int n = trace_seconds(tr);
    for (int g = 0; g < tr->ngpu; g++) {
        char path[512];
        snprintf(path, sizeof path, "%s/rank-%05d.power.csv", dir, g);
        FILE *f = xopen(path);
        fprintf(f, "time,gpu,power_w,util_pct,mem_used_mib\n");
        for (int s = 0; s < n; s++)
            fprintf(f, "%.3f,%d,%.1f,%.0f,%d\n", tr->t0 + s + tr->phase[g], g % 8, rd[s][g][0], rd[s][g][1], 81234);
        fclose(f);
    }
}

static void smi_time(double t, char *buf, size_t n) {
    time_t s = (time_t)floor(t);
    struct tm tm;
    localtime_r(&s, &tm);
    char tmp[32];
    strftime(tmp, sizeof tmp, "%Y/%m/%d %H:%M:%S", &tm);
    snprintf(buf, n, "%s.%03d", tmp, (int)((t - floor(t)) * 1000));
}

// nvidia-smi --query-gpu CSV, GPUs [g0, g1) of the trace as indices 0..
static void write_smi_csv(const trace *tr, double (*rd)[64][2], const char *path, int g0, int g1) {
    int n = trace_seconds(tr);
    FILE *f = xopen(path);
    fprintf(f, "timestamp, index, power.draw [W], utilization.gpu [%%]\n");
    for (int s = 0; s < n; s++) {
        char ts[64];
        smi_time(tr->t0 + s + 0.123, ts, sizeof ts);
        for (int g = g0; g < g1; g++) fprintf(f, "%s, %d, %.2f W, %.0f %%\n", ts, g - g0, rd[s][g][0], rd[s][g][1]);
    }
    fclose(f);
}

// nvidia-smi dmon, with -o DT (dt=1) or without timestamps (dt=0)
static void write_dmon(const trace *tr, double (*rd)[64][2], const char *path, int dt) {
    int n = trace_seconds(tr);
    FILE *f = xopen(path);
    for (int s = 0; s < n; s++) {
        if (s % 20 == 0) {  // dmon repeats its header
            fprintf(f, "%s gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk\n",
                    dt ? "#Date       Time     " : "#");
            fprintf(f, "%s Idx      W      C      C      %%      %%      %%      %%      %%      %%    MHz    MHz\n",
                    dt ? "#YYYYMMDD   HH:MM:SS " : "#");
        }
        time_t ts = (time_t)(tr->t0 + s);
        struct tm tm;
        localtime_r(&ts, &tm);
        char d[16], h[16];
        strftime(d, sizeof d, "%Y%m%d", &tm);
        strftime(h, sizeof h, "%H:%M:%S", &tm);
        for (int g = 0; g < tr->ngpu; g++) {
            if (dt) fprintf(f, " %s   %s ", d, h);
            fprintf(f, "    %d    %3.0f     45      -    %3.0f     35      0      0      0      0   3996   1965\n", g,
                    rd[s][g][0], rd[s][g][1]);
        }
    }
    fclose(f);
}

// Triage the files and check every snapshot (away from boundaries) and the stretches.
static void check_trace(const char *what, const trace *tr, const char **files, int nfiles, double time_offset) {
    zt_bands b;
    zt_bands_b300(&b);
    zt_samples set;
    zt_samples_init(&set);
    for (int i = 0; i < nfiles; i++) {
        int rc = zt_samples_read(&set, files[i], ZT_SF_AUTO, 1.0);
        CHECK(rc == 0, "%s: reading %s: %s", what, files[i], zt_errmsg());
    }
    CHECK(set.ndev == tr->ngpu, "%s: %d GPUs, expected %d", what, set.ndev, tr->ngpu);
    zt_samples_sort(&set);
    zt_snapshot *s;
    size_t ns;
    zt_snapshots_build(&set, &b, 1.0, &s, &ns);
    int n = trace_seconds(tr);
    CHECK(labs((long)ns - n) <= 1, "%s: %zu snapshots for %d seconds", what, ns, n);
    int bad = 0, checked = 0, partial = 0;
    for (size_t i = 0; i < ns; i++) {
        partial += s[i].n != tr->ngpu;
        int e = expected_at(tr, s[i].t + time_offset);
        if (e < 0) continue;
        checked++;
        if ((int)s[i].state != e) {
            if (bad++ < 5)
                fprintf(stderr, "  %s: snapshot %zu at +%.1f s: %s, expected %s (p_med %.0f busy %.0f u %.0f-%.0f zero '%s')\n",
                        what, i, s[i].t + time_offset - tr->t0, zt_gpu_state_name(s[i].state),
                        zt_gpu_state_name((zt_gpu_state)e), s[i].p_med, s[i].p_busy_med, s[i].u_min, s[i].u_max,
                        s[i].zero);
        }
        if (s[i].state == ZT_GS_DEADLOCK && seg_at(tr, (int)(s[i].t + time_offset - tr->t0))->kind == G_DEADLOCK) {
            char want[8];
            snprintf(want, sizeof want, "%d", seg_at(tr, (int)(s[i].t + time_offset - tr->t0))->culprit);
            CHECK(!strcmp(s[i].zero, want), "%s: deadlock snapshot names GPU '%s' at 0%%, expected %s", what, s[i].zero,
                  want);
        }
    }
    CHECK(bad == 0 && checked > n * 3 / 4, "%s: %d of %d snapshots misclassified", what, bad, checked);
    CHECK(partial == 0, "%s: %d partial snapshots", what, partial);
    zt_stretch *st;
    size_t nst;
    zt_stretches_build(s, ns, 5.0, &st, &nst);
    int ok = (int)nst == tr->nseg;
    for (int i = 0; ok && i < tr->nseg; i++) {
        ok = st[i].state == expected_state(tr->seg[i].kind) && fabs(st[i].seconds - tr->seg[i].seconds) <= 1.5;
        if (!ok)
            fprintf(stderr, "  %s: stretch %d: %s %.1f s, expected %s %d s\n", what, i, zt_gpu_state_name(st[i].state),
                    st[i].seconds, zt_gpu_state_name(expected_state(tr->seg[i].kind)), tr->seg[i].seconds);
    }
    if (!ok)
        for (size_t i = 0; i < nst; i++)
            fprintf(stderr, "    got stretch %zu: %s %.1f s (%zu snapshots)\n", i, zt_gpu_state_name(st[i].state),
                    st[i].seconds, st[i].last - st[i].first + 1);
    CHECK(ok, "%s: %zu stretches, expected the %d segments with their lengths", what, nst, tr->nseg);
    printf("  %s: %zu snapshots, %d checked, %zu stretches\n", what, ns, checked, nst);
    free(st);
    free(s);
    zt_samples_free(&set);
}

static void mkdir_p(const char *p) {
    if (zt_mkdirs(p) != 0) {
        fprintf(stderr, "%s\n", zt_errmsg());
        exit(2);
    }
}

static void test_triage(void) {
    char dir[256];
    snprintf(dir, sizeof dir, "%s/triage", work);
    mkdir_p(dir);
    trace tr = {.t0 = 1764423900.0, .ngpu = 8, .seg = field_day, .nseg = NSEG, .model = {135, 990}};
    zt_rng r;
    zt_rng_seed(&r, 7);
    for (int g = 0; g < tr.ngpu; g++) tr.phase[g] = unif(&r, 0, 0.9);  // ranks sample out of phase
    double(*rd)[64][2] = gen_readings(&tr, 42);

    write_power_csv(&tr, rd, dir);
    const char *pc[8];
    char pcs[8][512];
    for (int g = 0; g < 8; g++) snprintf(pcs[g], sizeof pcs[g], "%s/rank-%05d.power.csv", dir, g), pc[g] = pcs[g];
    check_trace("power.csv x 8 ranks", &tr, pc, 8, 0);

    char smi[512], smi0[512], smi1[512], dmon[512], dmondt[512];
    snprintf(smi, sizeof smi, "%s/node.smi.csv", dir);
    write_smi_csv(&tr, rd, smi, 0, 8);
    const char *f1[] = {smi};
    check_trace("nvidia-smi query CSV", &tr, f1, 1, 0);

    // Two nodes of 4 GPUs: node 1's GPU 0 is GPU 4 of the job; the deadlock culprit
    // (GPU 3) is node 0's index 3.
    snprintf(smi0, sizeof smi0, "%s/node0.smi.csv", dir);
    snprintf(smi1, sizeof smi1, "%s/node1.smi.csv", dir);
    write_smi_csv(&tr, rd, smi0, 0, 4);
    write_smi_csv(&tr, rd, smi1, 4, 8);
    const char *f2[] = {smi0, smi1};
    check_trace("nvidia-smi CSV, 2 node files", &tr, f2, 2, 0);

    snprintf(dmondt, sizeof dmondt, "%s/node.dmon-dt.log", dir);
    write_dmon(&tr, rd, dmondt, 1);
    const char *f3[] = {dmondt};
    check_trace("nvidia-smi dmon -o DT", &tr, f3, 1, 0);

    snprintf(dmon, sizeof dmon, "%s/node.dmon.log", dir);
    write_dmon(&tr, rd, dmon, 0);
    const char *f4[] = {dmon};
    check_trace("nvidia-smi dmon (no time)", &tr, f4, 1, tr.t0);  // its times start at 0

    // The same trace with GPU 0 as the one at 0% in the "deadlock": that is the
    // checkpoint signature, and the two must not be confused.
    segment alt[NSEG];
    memcpy(alt, field_day, sizeof alt);
    alt[7].culprit = 0;
    alt[7].kind = G_CKPT;
    trace tr2 = tr;
    tr2.seg = alt;
    double(*rd2)[64][2] = gen_readings(&tr2, 43);
    snprintf(smi, sizeof smi, "%s/ckpt.smi.csv", dir);
    write_smi_csv(&tr2, rd2, smi, 0, 8);
    const char *f5[] = {smi};
    check_trace("checkpoint instead of deadlock", &tr2, f5, 1, 0);

    // Classifier corner cases, by hand
    zt_bands b;
    zt_bands_b300(&b);
    zt_snapshot o;
    int dev[4] = {0, 1, 2, 3};
    double p1[4] = {192, 193, 191, 194}, u1[4] = {100, 100, 0, 100};
    zt_classify(&b, p1, u1, dev, 4, &o);
    CHECK(o.state == ZT_GS_DEADLOCK && !strcmp(o.zero, "2"), "one rank 0%%, others 100%% at 192 W: %s '%s'",
          zt_gpu_state_name(o.state), o.zero);
    double u2[4] = {0, 100, 100, 100};
    zt_classify(&b, p1, u2, dev, 4, &o);
    CHECK(o.state == ZT_GS_CHECKPOINT, "only rank 0 at 0%%: %s", zt_gpu_state_name(o.state));
    double u3[4] = {0, 0, 100, 100};
    zt_classify(&b, p1, u3, dev, 4, &o);
    CHECK(o.state == ZT_GS_DEADLOCK && !strcmp(o.zero, "0-1"), "ranks 0 and 1 at 0%%: %s '%s'",
          zt_gpu_state_name(o.state), o.zero);
    double p4[4] = {300, 300, 300, 300}, u4[4] = {0, 0, 0, 0};
    zt_classify(&b, p4, u4, dev, 4, &o);
    CHECK(o.state == ZT_GS_UNKNOWN, "all 0%% at 300 W: %s", zt_gpu_state_name(o.state));
    double p5[4] = {640, 640, 640, 640}, u5[4] = {100, 100, 100, 100};
    zt_classify(&b, p5, u5, dev, 4, &o);
    CHECK(o.state == ZT_GS_COMM, "640 W even 100%%: %s", zt_gpu_state_name(o.state));
    double u6[4] = {100, 60, 100, 100};
    zt_classify(&b, p5, u6, dev, 4, &o);
    CHECK(o.state == ZT_GS_STARVATION, "640 W with one GPU at 60%%: %s", zt_gpu_state_name(o.state));
    free(rd);
    free(rd2);
}

// ---- malformed inputs --------------------------------------------------------------
static void write_text(const char *path, const char *text) {
    FILE *f = xopen(path);
    fputs(text, f);
    fclose(f);
}

static void expect_error(const char *name, const char *text, const char *want1, const char *want2) {
    char path[512];
    snprintf(path, sizeof path, "%s/errors/%s", work, name);
    write_text(path, text);
    zt_samples set;
    zt_samples_init(&set);
    int rc = zt_samples_read(&set, path, ZT_SF_AUTO, 1.0);
    const char *m = zt_errmsg();
    CHECK(rc < 0 && strstr(m, want1) && (!want2 || strstr(m, want2)), "%s: rc %d, message '%s' should contain '%s'%s%s",
          name, rc, m, want1, want2 ? " and " : "", want2 ? want2 : "");
    if (rc < 0) printf("  %s -> %s\n", name, m);
    zt_samples_free(&set);
}

static void test_errors(void) {
    char dir[256];
    snprintf(dir, sizeof dir, "%s/errors", work);
    mkdir_p(dir);
    const char *ph = "time,gpu,power_w,util_pct,mem_used_mib\n";
    char buf[1024];
    snprintf(buf, sizeof buf, "%s1.0,0,900.1,100,1\n2.0,0,901.0,150,1\n", ph);
    expect_error("rank-00000.power.csv", buf, "rank-00000.power.csv:3: util_pct 150 outside [0, 100]", NULL);
    snprintf(buf, sizeof buf, "%s1.0,0,900.1,100\n", ph);
    expect_error("short.power.csv", buf, "short.power.csv:2: 4 fields, the header has 5", NULL);
    snprintf(buf, sizeof buf, "%s1.0,0,abc,100,1\n", ph);
    expect_error("nan.power.csv", buf, "nan.power.csv:2: power_w is 'abc', not a number", NULL);
    expect_error("nocol.csv", "time,gpu,util_pct,power_w_x\n1,0,1,1\n", "nocol.csv:1: power.csv header lacks column 'power_w'", NULL);
    expect_error("other.csv", "foo,bar\n1,2\n", "other.csv:1: unknown sample format", NULL);
    expect_error("nopower.power.csv", "time,gpu,util_pct,mem,power_w2\n", "lacks column 'power_w'", NULL);
    expect_error("na.smi.csv",
                 "timestamp, index, power.draw [W], utilization.gpu [%]\n"
                 "2025/11/29 13:45:01.000, 0, 612.34 W, 100 %\n"
                 "2025/11/29 13:45:01.000, 1, [N/A], 100 %\n",
                 "na.smi.csv:3: power.draw is '[N/A]'", "does not report it");
    expect_error("unit.smi.csv",
                 "timestamp, index, power.draw [W], utilization.gpu [%]\n2025/11/29 13:45:01.000, 0, 612.34 kW, 100 %\n",
                 "unit.smi.csv:2: power.draw is '612.34 kW'", "only 'W' may follow");
    expect_error("time.smi.csv",
                 "timestamp, index, power.draw [W], utilization.gpu [%]\n13:45:01, 0, 612.34 W, 100 %\n",
                 "time.smi.csv:2: timestamp '13:45:01' is not YYYY/MM/DD HH:MM:SS", NULL);
    expect_error("noidx.smi.csv", "timestamp, power.draw [W], utilization.gpu [%]\n", "noidx.smi.csv:1:",
                 "lacks 'index'");
    expect_error("early.dmon", "    0    71     34      -      0\n", "early.dmon:1: unknown sample format", NULL);
    expect_error("nosm.dmon", "# gpu pwr gtemp\n# Idx W C\n 0 71 34\n", "nosm.dmon:1: dmon header lacks the 'sm'",
                 NULL);
    expect_error("fields.dmon", "# gpu pwr gtemp sm\n# Idx W C %\n 0 71 34 0\n 1 72 34\n",
                 "fields.dmon:4: 3 fields, the dmon header has 4", NULL);
    expect_error("dash.dmon", "# gpu pwr gtemp sm\n# Idx W C %\n 0 - 34 0\n", "dash.dmon:3: pwr is '-'",
                 "does not report it");
    expect_error("empty.csv", "\n\n", "empty.csv: empty file", NULL);
    expect_error("headonly.power.csv", ph, "headonly.power.csv: no samples after the header", NULL);
    // Files whose clocks differ cannot be grouped into snapshots.
    char a[512], bpath[512];
    snprintf(a, sizeof a, "%s/t.dmon", dir);
    snprintf(bpath, sizeof bpath, "%s/abs.power.csv", dir);
    write_text(a, "#Time gpu pwr sm\n#HH:MM:SS Idx W %\n 13:45:01 0 900 100\n");
    snprintf(buf, sizeof buf, "%s1.0,0,900.1,100,1\n", ph);
    write_text(bpath, buf);
    zt_samples set;
    zt_samples_init(&set);
    CHECK(zt_samples_read(&set, bpath, ZT_SF_AUTO, 1) == 0, "abs.power.csv: %s", zt_errmsg());
    int rc = zt_samples_read(&set, a, ZT_SF_AUTO, 1);
    CHECK(rc < 0 && strstr(zt_errmsg(), "time of day only") && strstr(zt_errmsg(), "abs.power.csv"),
          "mixing clocks: '%s'", zt_errmsg());
    printf("  mixing clocks -> %s\n", zt_errmsg());
    zt_samples_free(&set);
}

// ---- band files --------------------------------------------------------------------
static int bands_equal(const zt_bands *a, const zt_bands *b) {
    int eq = a->idle_max_w == b->idle_max_w && a->hang_max_w == b->hang_max_w &&
             a->compute_min_w == b->compute_min_w && a->zero_util_max == b->zero_util_max &&
             a->busy_util_min == b->busy_util_min && a->uneven_spread == b->uneven_spread && !strcmp(a->gpu, b->gpu);
    for (int s = 0; s < ZT_GS_COUNT_; s++) eq = eq && a->level_lo[s] == b->level_lo[s] && a->level_hi[s] == b->level_hi[s];
    return eq;
}

static void expect_bands_error(const char *text, const char *want) {
    zt_bands b;
    int rc = zt_bands_parse(&b, text, "x.json");
    CHECK(rc < 0 && strstr(zt_errmsg(), want), "band file error '%s' should contain '%s'", zt_errmsg(), want);
    if (rc < 0) printf("  -> %s\n", zt_errmsg());
}

static void test_bands(void) {
    zt_bands built, file, back;
    zt_bands_b300(&built);
    char path[512];
    snprintf(path, sizeof path, "%s/../ops/bands-b300.json", ZT_TEST_DIR);
    CHECK(zt_bands_load(&file, path) == 0, "%s", zt_errmsg());
    CHECK(bands_equal(&built, &file), "ops/bands-b300.json differs from the built-in B300 bands");
    char *j = zt_bands_to_json(&built);
    CHECK(zt_bands_parse(&back, j, "round trip") == 0 && bands_equal(&built, &back), "JSON round trip: %s",
          zt_errmsg());
    free(j);
    expect_bands_error("{\"format\": \"zerotrain-bands\", \"version\": 1,\n \"edges_w\": {\"idle_max\": 162.5,,}}",
                       "x.json:2: not valid JSON");
    expect_bands_error("{\"format\": \"zerotrain-bands\", \"version\": 2}", "\"version\" must be 1");
    expect_bands_error("{\"format\": \"other\", \"version\": 1}", "\"format\" must be \"zerotrain-bands\"");
    expect_bands_error("{\"format\": \"zerotrain-bands\", \"version\": 1, \"edges_w\": {\"idle_max\": 200, \"hang_max\": "
                       "150, \"compute_min\": 790}, \"util_pct\": {\"zero_max\": 5, \"busy_min\": 90, \"uneven_spread\": 20}}",
                       "edges_w.hang_max (150) must be above edges_w.idle_max (200)");
    expect_bands_error("{\"format\": \"zerotrain-bands\", \"version\": 1, \"edges_w\": {\"idle_max\": 100, \"hang_max\": "
                       "150, \"compute_min\": 790}, \"util_pct\": {\"zero_max\": 5, \"busy_min\": 90}}",
                       "util_pct.uneven_spread is missing");
    expect_bands_error("{\"format\": \"zerotrain-bands\", \"version\": 1, \"edges_w\": {\"idle_max\": 100, \"hang_max\": "
                       "150, \"compute_min\": 790}, \"util_pct\": {\"zero_max\": 95, \"busy_min\": 90, \"uneven_spread\": 20}}",
                       "zero_max (95) < busy_min (90)");
}

// ---- calibration -------------------------------------------------------------------
static void samples_of(zt_samples *set, const trace *tr, uint64_t seed) {
    double(*rd)[64][2] = gen_readings(tr, seed);
    int n = trace_seconds(tr);
    for (int s = 0; s < n; s++)
        for (int g = 0; g < tr->ngpu; g++) {
            if (set->n == set->cap) {
                set->cap = set->cap ? 2 * set->cap : 1024;
                zt_gpu_sample *x = zt_xmalloc(set->cap * sizeof *x);
                if (set->n) memcpy(x, set->s, set->n * sizeof *x);
                free(set->s);
                set->s = x;
            }
            set->s[set->n++] = (zt_gpu_sample){tr->t0 + s, g, rd[s][g][0], rd[s][g][1]};
        }
    set->ndev = tr->ngpu;
    set->nfiles = 1;
    free(rd);
}

static void test_calibrate(void) {
    // A healthy run (compute with some communication and a checkpoint) and an idle period.
    static const segment healthy[] = {{G_COMPUTE, 200, 0}, {G_COMM, 20, 0}, {G_COMPUTE, 60, 0}, {G_CKPT, 10, 0}};
    static const segment idle[] = {{G_IDLE, 60, 0}};
    trace th = {.t0 = 1e9, .ngpu = 8, .seg = healthy, .nseg = 4, .model = {135, 990}};
    trace ti = {.t0 = 1e9, .ngpu = 8, .seg = idle, .nseg = 1, .model = {135, 990}};
    zt_samples hs, is;
    zt_samples_init(&hs);
    zt_samples_init(&is);
    samples_of(&hs, &th, 11);
    samples_of(&is, &ti, 12);
    zt_bands b;
    zt_calib_info info;
    zt_calib_opts o = {.k = 2, .gpu = "B300 again"};
    CHECK(zt_calibrate(&hs, &is, &o, &b, &info) == 0, "calibrate: %s", zt_errmsg());
    printf("  B300-like: idle_max %.1f (162.5), hang_max %.1f (385), compute_min %.1f (790); healthy %.0f W, idle %.0f W\n",
           b.idle_max_w, b.hang_max_w, b.compute_min_w, info.healthy_med, info.idle_med);
    CHECK(fabs(b.idle_max_w - 162.5) <= 8, "idle_max %.1f vs 162.5", b.idle_max_w);
    CHECK(fabs(b.hang_max_w - 385) <= 10, "hang_max %.1f vs 385", b.hang_max_w);
    CHECK(fabs(b.compute_min_w - 790) <= 25, "compute_min %.1f vs 790", b.compute_min_w);
    CHECK(fabs(b.level_lo[ZT_GS_DEADLOCK] - 190) <= 8 && fabs(b.level_hi[ZT_GS_DEADLOCK] - 195) <= 8,
          "deadlock level %.1f-%.1f vs 190-195", b.level_lo[ZT_GS_DEADLOCK], b.level_hi[ZT_GS_DEADLOCK]);
    CHECK(fabs(b.level_lo[ZT_GS_COMM] - 640) <= 12 && fabs(b.level_lo[ZT_GS_STARVATION] - 575) <= 12,
          "communication %.1f (640), starvation %.1f (575)", b.level_lo[ZT_GS_COMM], b.level_lo[ZT_GS_STARVATION]);
    CHECK(!strcmp(b.gpu, "B300 again") && info.clamped == 0, "gpu name / clamped %d", info.clamped);

    // Another GPU model (idle 70 W, compute 650 W): calibrated bands classify its own
    // field day correctly, the B300 defaults do not.
    gpu_model other = {70, 650};
    th.model = ti.model = other;
    zt_samples h2, i2;
    zt_samples_init(&h2);
    zt_samples_init(&i2);
    samples_of(&h2, &th, 21);
    samples_of(&i2, &ti, 22);
    zt_bands bo;
    CHECK(zt_calibrate(&h2, &i2, &o, &bo, &info) == 0, "calibrate other: %s", zt_errmsg());
    printf("  other GPU: idle_max %.1f, hang_max %.1f, compute_min %.1f\n", bo.idle_max_w, bo.hang_max_w,
           bo.compute_min_w);
    trace tf = {.t0 = 1e9, .ngpu = 8, .seg = field_day, .nseg = NSEG, .model = other};
    zt_samples fs;
    zt_samples_init(&fs);
    samples_of(&fs, &tf, 23);
    zt_samples_sort(&fs);
    zt_snapshot *s;
    size_t ns;
    int bad_cal = 0, bad_def = 0;
    zt_bands def;
    zt_bands_b300(&def);
    zt_snapshots_build(&fs, &bo, 1.0, &s, &ns);
    for (size_t i = 0; i < ns; i++) bad_cal += expected_at(&tf, s[i].t) >= 0 && (int)s[i].state != expected_at(&tf, s[i].t);
    free(s);
    zt_snapshots_build(&fs, &def, 1.0, &s, &ns);
    for (size_t i = 0; i < ns; i++) bad_def += expected_at(&tf, s[i].t) >= 0 && (int)s[i].state != expected_at(&tf, s[i].t);
    free(s);
    printf("  other GPU's field day: %d misclassified with its calibration, %d with the B300 bands\n", bad_cal, bad_def);
    CHECK(bad_cal == 0, "%d snapshots misclassified with calibrated bands", bad_cal);
    CHECK(bad_def > 20, "the B300 bands should not fit another GPU (%d misclassified)", bad_def);

    // Swapped inputs are refused with a hint.
    CHECK(zt_calibrate(&is, &hs, &o, &b, &info) < 0 && strstr(zt_errmsg(), "swapped"), "swapped: '%s'", zt_errmsg());
    printf("  swapped -> %s\n", zt_errmsg());
    zt_samples_free(&hs);
    zt_samples_free(&is);
    zt_samples_free(&h2);
    zt_samples_free(&i2);
    zt_samples_free(&fs);
}

// ---- watcher -----------------------------------------------------------------------
static double wall(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return tv.tv_sec + 1e-6 * tv.tv_usec;
}

static void run_dir(char *out, size_t n, const char *name) {
    snprintf(out, n, "%s/watch/%s", work, name);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", out);
    if (system(cmd) != 0) exit(2);
    char ranks[600];
    snprintf(ranks, sizeof ranks, "%s/ranks", out);
    mkdir_p(ranks);
}

static void put(const char *dir, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void put(const char *dir, const char *name, const char *fmt, ...) {
    char path[700], text[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (zt_write_file_atomic(path, text, strlen(text)) != 0) {
        fprintf(stderr, "%s\n", zt_errmsg());
        exit(2);
    }
}

static void heartbeat(const char *dir, const char *state, long step, long total, double t, int world) {
    put(dir, "heartbeat.json",
        "{\"run_id\": \"r1\", \"state\": \"%s\", \"step\": %ld, \"total_steps\": %ld, \"epoch\": 0, \"tokens\": %ld, "
        "\"time\": %.3f, \"elapsed_s\": 100, \"step_time_s\": 2.0, \"tok_per_s\": 53100, \"loss\": 2.25, "
        "\"world_size\": %d}\n",
        state, step, total, step * 262144, t, world);
}

static void alive(const char *dir, int rank, double t, long step, const char *state) {
    char name[64];
    snprintf(name, sizeof name, "ranks/rank-%05d.alive", rank);
    put(dir, name, "{\"rank\": %d, \"pid\": %d, \"host\": \"node%d\", \"time\": %.3f, \"step\": %ld, \"state\": \"%s\"}\n",
        rank, 1000 + rank, rank / 8, t, step, state);
}

static void metrics(const char *dir, int steps, double step_time) {
    char path[700];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    FILE *f = xopen(path);
    for (int s = 1; s <= steps; s++)
        fprintf(f, "{\"step\":%d,\"loss\":2.5,\"tok_per_s\":53000,\"step_time_s\":%.3f}\n", s, step_time);
    fclose(f);
}

static zt_watch_opts test_opts(void) {
    zt_watch_opts o;
    zt_watch_opts_default(&o);
    o.min_stall = 30;
    o.stall_factor = 10;
    o.startup_grace = 120;
    return o;
}

static zt_watch_state poll_once(const char *dir, const zt_watch_opts *o, double now, zt_watch *keep) {
    zt_watch w;
    zt_watch_init(&w, dir, o);
    zt_watch_state s = zt_watch_poll(&w, now);
    if (keep)
        *keep = w;
    else
        zt_watch_free(&w);
    return s;
}

// Flight records: ranks in `coll` are blocked in op/label at seq (after seq-1 done ones).
static void flight(const char *dir, int rank, int world, zt_coll_op op, const char *label, int seq, int aborted) {
    zt_flight *f;
    if (zt_flight_open(&f, dir, rank, world, rank / 8, 64) != 0) {
        fprintf(stderr, "%s\n", zt_errmsg());
        exit(2);
    }
    int64_t t = zt_flight_wall_ns() - 60 * 1000000000LL;
    for (int s = 1; s <= seq; s++) {
        zt_flight_rec r = {.op = s % 2 ? ZT_OP_ALLGATHER : ZT_OP_REDUCE_SCATTER, .dtype = ZT_DT_F32,
                           .state = ZT_FL_DONE, .t_start_ns = t, .t_end_ns = t + 1000, .root = -1, .step = 3850};
        snprintf(r.label, sizeof r.label, "unit %d", s % 64);
        if (s == seq) {
            r.op = op, r.state = ZT_FL_WAITING, r.t_end_ns = 0;
            r.chan = op == ZT_OP_BARRIER || op == ZT_OP_ALLREDUCE ? ZT_CHAN_CTRL : ZT_CHAN_DATA;
            snprintf(r.label, sizeof r.label, "%s", label);
        }
        zt_flight_begin(f, &r);
    }
    zt_flight_close(f, aborted ? ZT_FL_ABORTED : ZT_FL_RUNNING);
}

static cJSON *read_watch_json(const char *dir) {
    char path[700];
    snprintf(path, sizeof path, "%s/watch.json", dir);
    char *t = zt_read_file(path, NULL);
    cJSON *j = t ? cJSON_Parse(t) : NULL;
    free(t);
    return j;
}

static void test_watch(void) {
    zt_watch_opts o = test_opts();
    double now = wall();
    char d[600], line[1024];
    zt_watch w;

    // STARTING, then CRASHED when nothing appears within the startup grace
    run_dir(d, sizeof d, "starting");
    zt_watch_init(&w, d, &o);
    CHECK(zt_watch_poll(&w, now) == ZT_WS_STARTING, "empty run dir: %s", zt_watch_state_name(w.state));
    CHECK(zt_watch_poll(&w, now + 60) == ZT_WS_STARTING, "60 s: %s", zt_watch_state_name(w.state));
    CHECK(zt_watch_poll(&w, now + 121) == ZT_WS_CRASHED && strstr(w.reason, "startup grace"), "121 s: %s: %s",
          zt_watch_state_name(w.state), w.reason);
    zt_watch_free(&w);

    // RUNNING: fresh heartbeat and ticks; status line
    run_dir(d, sizeof d, "running");
    heartbeat(d, "running", 120, 3854, now - 1, 4);
    metrics(d, 120, 4.9);
    for (int r = 0; r < 4; r++) alive(d, r, now - 2, 120, "running");
    CHECK(poll_once(d, &o, now, &w) == ZT_WS_RUNNING, "running: %s: %s", zt_watch_state_name(w.state), w.reason);
    zt_watch_status_line(&w, now, line, sizeof line);
    printf("  status: %s\n", line);
    CHECK(strstr(line, "RUNNING step 120/3854 (3.1%)") && strstr(line, "53.1k tok/s") && strstr(line, "ETA 5h04m") &&
              strstr(line, "loss 2.2500") && strstr(line, "ticks 4/4 fresh"),
          "status line: %s", line);
    zt_watch_free(&w);

    // COMPLETE wins over everything
    put(d, "complete.json", "{\"run_id\": \"r1\", \"step\": 3854, \"time\": %.0f, \"final\": \"%s/final\"}\n", now, d);
    CHECK(poll_once(d, &o, now + 1000, &w) == ZT_WS_COMPLETE && strstr(w.reason, "step 3854"), "complete: %s: %s",
          zt_watch_state_name(w.state), w.reason);
    CHECK(zt_watch_write_json(&w, now) == 0, "watch.json: %s", zt_errmsg());
    cJSON *j = read_watch_json(d);
    CHECK(j && !strcmp(cJSON_GetObjectItem(j, "state")->valuestring, "COMPLETE") &&
              cJSON_GetObjectItem(j, "exit_code")->valuedouble == 0,
          "watch.json state");
    cJSON_Delete(j);
    zt_watch_free(&w);

    // CRASHED (--once semantics): rank 2's tick is 60 s old by its own timestamp
    run_dir(d, sizeof d, "crashed");
    heartbeat(d, "running", 50, 100, now - 5, 4);
    for (int r = 0; r < 4; r++) alive(d, r, r == 2 ? now - 60 : now - 1, 50, "running");
    flight(d, 0, 4, ZT_OP_ALLGATHER, "unit 5 params", 300, 0);
    flight(d, 1, 4, ZT_OP_ALLGATHER, "unit 5 params", 300, 0);
    flight(d, 3, 4, ZT_OP_ALLGATHER, "unit 5 params", 300, 0);
    flight(d, 2, 4, ZT_OP_REDUCE_SCATTER, "unit 4 grads", 299, 0);
    CHECK(poll_once(d, &o, now, &w) == ZT_WS_CRASHED && strstr(w.reason, "rank 2 (1 of 4)") &&
              strstr(w.reason, "host node0, pid 1002"),
          "crashed: %s: %s", zt_watch_state_name(w.state), w.reason);
    zt_watch_diagnose(&w, now);
    printf("  crashed: %s\n  diagnosis: %s\n", w.reason, w.diagnosis);
    // The rank whose tick stopped explains the others' waits: not a collective mismatch.
    const char *crash_diag = "rank 2: reduce_scatter(\"unit 4 grads\") seq 299; ranks 0-1,3: allgather(\"unit 5 "
                             "params\") seq 300 \xe2\x80\x94 rank 2 stopped answering (pid 1002 on host node0; the "
                             "watcher runs on ";
    CHECK(!strncmp(w.diagnosis, crash_diag, strlen(crash_diag)) &&
              strstr(w.diagnosis, "its liveness tick is 60 s old: the positions are where each rank was") &&
              !strstr(w.diagnosis, "mismatch"),
          "diagnosis: %s", w.diagnosis);
    CHECK(w.details && strstr(w.details, "rank 2: tick 60 s ago (host node0, pid 1002"), "details: %s", w.details);
    zt_watch_free(&w);

    // CRASHED (loop semantics): ticks seen fresh, then one stops changing for > 15 s
    run_dir(d, sizeof d, "crashed-loop");
    heartbeat(d, "running", 50, 100, now, 4);
    for (int r = 0; r < 4; r++) alive(d, r, now, 50, "running");
    zt_watch_init(&w, d, &o);
    CHECK(zt_watch_poll(&w, now) == ZT_WS_RUNNING, "loop t0: %s %s", zt_watch_state_name(w.state), w.reason);
    for (int k = 1; k <= 4; k++) {  // every 4 s the others tick, rank 1 does not: stale after 15 s
        for (int r = 0; r < 4; r++)
            if (r != 1) alive(d, r, now + 4 * k, 50, "running");
        heartbeat(d, "running", 50 + k, 100, now + 4 * k, 4);
        zt_watch_state s = zt_watch_poll(&w, now + 4 * k);
        CHECK(k < 4 ? s == ZT_WS_RUNNING : s == ZT_WS_CRASHED, "loop t+%d: %s (%s)", 4 * k, zt_watch_state_name(s),
              w.reason);
    }
    CHECK(strstr(w.reason, "rank 1 (1 of 4)"), "loop crash reason: %s", w.reason);
    zt_watch_free(&w);

    // FAILED: the trainer said so
    run_dir(d, sizeof d, "failed");
    heartbeat(d, "failed", 7, 0, now, 2);
    for (int r = 0; r < 2; r++) alive(d, r, now, 7, "failed");
    CHECK(poll_once(d, &o, now, NULL) == ZT_WS_FAILED, "failed heartbeat");
    heartbeat(d, "running", 7, 10, now, 2);
    CHECK(poll_once(d, &o, now, &w) == ZT_WS_FAILED && strstr(w.reason, "ranks 0-1 reported failure"),
          "failed tick: %s", w.reason);
    zt_watch_free(&w);

    // Ranks that finished without complete.json, once their ticks are stale
    run_dir(d, sizeof d, "done-no-complete");
    heartbeat(d, "complete", 10, 10, now - 40, 2);
    for (int r = 0; r < 2; r++) alive(d, r, now - 40, 10, "done");
    CHECK(poll_once(d, &o, now, &w) == ZT_WS_CRASHED && strstr(w.reason, "ranks 0-1 finished (\"done\")") &&
              strstr(w.reason, "no complete.json"),
          "done without complete.json: %s", w.reason);
    zt_watch_free(&w);

    // HUNG by step stall: median step 2 s -> bound max(30, 20) = 30 s; 100 s since step 10
    run_dir(d, sizeof d, "hung-stall");
    metrics(d, 10, 2.0);
    heartbeat(d, "running", 10, 100, now - 100, 16);
    for (int r = 0; r < 16; r++) alive(d, r, now - 1, 10, "running");
    for (int r = 0; r < 16; r++)
        if (r == 3)
            flight(d, r, 16, ZT_OP_BARRIER, "epoch-end save", 81234, 0);
        else
            flight(d, r, 16, ZT_OP_REDUCE_SCATTER, "unit 17 grads", 81234, 0);
    CHECK(poll_once(d, &o, now, &w) == ZT_WS_HUNG && strstr(w.reason, "step 10 has not advanced for 100 s") &&
              strstr(w.reason, "bound 30 s"),
          "hung: %s: %s", zt_watch_state_name(w.state), w.reason);
    zt_watch_diagnose(&w, now);
    printf("  hung: %s\n  diagnosis: %s\n", w.reason, w.diagnosis);
    CHECK(!strcmp(w.diagnosis, "rank 3: barrier(\"epoch-end save\") seq 81234; ranks 0-2,4-15: reduce_scatter(\"unit "
                               "17 grads\") seq 81234 \xe2\x80\x94 collective mismatch"),
          "field deadlock diagnosis: %s", w.diagnosis);
    CHECK(zt_watch_write_json(&w, now) == 0, "watch.json");
    j = read_watch_json(d);
    CHECK(j && !strcmp(cJSON_GetObjectItem(j, "state")->valuestring, "HUNG") &&
              !strcmp(cJSON_GetObjectItem(j, "diagnosis")->valuestring, w.diagnosis) &&
              cJSON_GetArraySize(cJSON_GetObjectItem(j, "ranks")) == 16 &&
              cJSON_GetObjectItem(j, "exit_code")->valuedouble == 4,
          "watch.json for HUNG");
    cJSON_Delete(j);
    zt_watch_free(&w);
    // the same stall seen live: RUNNING until the bound passes on the watcher's clock
    heartbeat(d, "running", 10, 100, now, 16);
    zt_watch_init(&w, d, &o);
    for (int k = 0; k <= 8; k++) {  // bound 30 s
        for (int r = 0; r < 16; r++) alive(d, r, now + 4 * k, 10, "running");
        zt_watch_state s = zt_watch_poll(&w, now + 4 * k);
        CHECK(4 * k < 30 ? s == ZT_WS_RUNNING : s == ZT_WS_HUNG, "stall at +%d s: %s", 4 * k, zt_watch_state_name(s));
    }
    zt_watch_free(&w);
    // no step yet: the startup grace bounds the first step
    run_dir(d, sizeof d, "first-step");
    for (int r = 0; r < 2; r++) alive(d, r, now, 0, "running");
    CHECK(poll_once(d, &o, now, NULL) == ZT_WS_RUNNING, "first step running");
    zt_watch_init(&w, d, &o);
    zt_watch_poll(&w, now);
    for (int r = 0; r < 2; r++) alive(d, r, now + 130, 0, "running");
    CHECK(zt_watch_poll(&w, now + 130) == ZT_WS_HUNG && strstr(w.reason, "no step completed in 130 s"),
          "first step stalled: %s", w.reason);
    zt_watch_free(&w);

    // HUNG by the deadlock power signature (step still fresh), not by a checkpoint
    for (int ck = 0; ck < 2; ck++) {
        run_dir(d, sizeof d, ck ? "power-ckpt" : "power-deadlock");
        heartbeat(d, "running", 20, 100, now - 3, 4);
        metrics(d, 20, 2.0);
        for (int r = 0; r < 4; r++) {
            alive(d, r, now - 1, 20, "running");
            char path[700];
            snprintf(path, sizeof path, "%s/ranks/rank-%05d.power.csv", d, r);
            FILE *f = xopen(path);
            fprintf(f, "time,gpu,power_w,util_pct,mem_used_mib\n");
            for (int s = 0; s < 200; s++) {  // 200 s of compute, then 3 s of the signature
                double t = now - 203 + s + 0.1 * r;
                fprintf(f, "%.3f,%d,%.1f,%.0f,80000\n", t, r, 980.0 + r, 100.0);
            }
            int idle_rank = ck ? 0 : 2;
            for (int s = 200; s < 203; s++)
                fprintf(f, "%.3f,%d,%.1f,%.0f,80000\n", now - 203 + s + 0.1 * r, r, 192.0, r == idle_rank ? 0.0 : 100.0);
            fclose(f);
        }
        zt_watch_state s = poll_once(d, &o, now, &w);
        if (ck)
            CHECK(s == ZT_WS_RUNNING && w.power_state == ZT_GS_CHECKPOINT, "checkpoint signature: %s power %s (%s)",
                  zt_watch_state_name(s), zt_gpu_state_name(w.power_state), w.reason);
        else
            CHECK(s == ZT_WS_HUNG && strstr(w.reason, "deadlock power signature") && strstr(w.reason, "at 0% util: 2"),
                  "power signature: %s: %s", zt_watch_state_name(s), w.reason);
        printf("  %s: %s %s\n", ck ? "checkpoint power" : "deadlock power", zt_watch_state_name(s), w.reason);
        zt_watch_free(&w);
    }

    // Other diagnoses: all in one collective; some outside any; aborted at the deadline
    run_dir(d, sizeof d, "diag-same");
    for (int r = 0; r < 4; r++) flight(d, r, 4, ZT_OP_ALLREDUCE, "grad norm", 77, 0);
    zt_watch_init(&w, d, &o);
    w.world = 4;
    zt_watch_diagnose(&w, now);
    CHECK(strstr(w.diagnosis, "ranks 0-3: allreduce(\"grad norm\") seq 77 \xe2\x80\x94 every rank is in the same "
                              "collective"),
          "same: %s", w.diagnosis);
    zt_watch_free(&w);
    run_dir(d, sizeof d, "diag-outside");
    for (int r = 0; r < 3; r++) flight(d, r, 4, ZT_OP_ALLGATHER, "unit 9 params", 40, r == 0);
    zt_flight *f;
    zt_flight_open(&f, d, 3, 4, 0, 16);
    zt_flight_rec rec = {.op = ZT_OP_ALLGATHER, .state = ZT_FL_DONE, .root = -1, .t_start_ns = zt_flight_wall_ns()};
    snprintf(rec.label, sizeof rec.label, "unit 8 params");
    zt_flight_begin(f, &rec);
    zt_flight_close(f, ZT_FL_RUNNING);
    zt_watch_init(&w, d, &o);
    w.world = 5;  // rank 4 has no recorder
    zt_watch_diagnose(&w, now);
    printf("  outside: %s\n", w.diagnosis);
    CHECK(strstr(w.diagnosis, "rank 3: in no collective; rank 4: no flight recorder; ranks 0-2: allgather(\"unit 9 "
                              "params\") seq 40 \xe2\x80\x94 the ranks in no collective are stuck outside") &&
              strstr(w.diagnosis, "(rank 0 aborted at the collective deadline)"),
          "outside: %s", w.diagnosis);
    zt_watch_free(&w);

    // A cleanly stopped run and a reported failure are not hangs.
    run_dir(d, sizeof d, "diag-stopped");
    heartbeat(d, "stopped", 42, 100, now, 2);
    for (int r = 0; r < 2; r++) alive(d, r, now, 42, "stopped");
    for (int r = 0; r < 2; r++) flight(d, r, 2, ZT_OP_ALLGATHER, "unit 1 params", 9, 0);
    for (int r = 0; r < 2; r++) {  // the last collective finished
        zt_flight_open(&f, d, r, 2, 0, 64);
        zt_flight_rec done = {.op = ZT_OP_BARRIER, .state = ZT_FL_DONE, .root = -1, .t_start_ns = zt_flight_wall_ns()};
        snprintf(done.label, sizeof done.label, "stop save");
        zt_flight_begin(f, &done);
        zt_flight_close(f, ZT_FL_RUNNING);
    }
    CHECK(poll_once(d, &o, now, &w) == ZT_WS_STOPPED, "stopped: %s", zt_watch_state_name(w.state));
    zt_watch_diagnose(&w, now);
    printf("  stopped: %s\n", w.diagnosis);
    CHECK(strstr(w.diagnosis, "stopped cleanly on a signal at step 42") && !strstr(w.diagnosis, "stuck in compute"),
          "stopped diagnosis: %s", w.diagnosis);
    zt_watch_free(&w);
    run_dir(d, sizeof d, "diag-failed");
    heartbeat(d, "failed", 7, 10, now, 2);
    CHECK(poll_once(d, &o, now, &w) == ZT_WS_FAILED, "failed: %s", zt_watch_state_name(w.state));
    zt_watch_diagnose(&w, now);
    CHECK(strstr(w.diagnosis, "the trainer reported the failure itself") && !strstr(w.diagnosis, "stuck in compute"),
          "failed diagnosis: %s", w.diagnosis);
    zt_watch_free(&w);

    // A rank on this host: its process is looked at. Gone (exited and reaped), stopped
    // (SIGSTOP: HUNG, not CRASHED), alive but not ticking.
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    for (int kind = 0; kind < 3; kind++) {
        pid_t child = fork();
        if (child == 0) {
            prctl(PR_SET_NAME, "zerotrain-rank");
            for (;;) pause();
        }
        usleep(50000);  // the child has set its name
        if (kind == 0) {
            kill(child, SIGKILL);
            waitpid(child, NULL, 0);
        } else if (kind == 1) {
            kill(child, SIGSTOP);
            waitpid(child, NULL, WUNTRACED);
        }
        run_dir(d, sizeof d, kind == 0 ? "local-gone" : kind == 1 ? "local-stopped" : "local-alive");
        heartbeat(d, "running", 50, 100, now - 5, 2);
        put(d, "ranks/rank-00000.alive",
            "{\"rank\": 0, \"pid\": 1, \"host\": \"elsewhere\", \"time\": %.3f, \"step\": 50, \"state\": \"running\"}\n",
            now - 1);
        put(d, "ranks/rank-00001.alive",
            "{\"rank\": 1, \"pid\": %d, \"host\": \"%s\", \"time\": %.3f, \"step\": 50, \"state\": \"running\"}\n",
            (int)child, host, now - 40);
        flight(d, 0, 2, ZT_OP_ALLGATHER, "unit 5 params", 300, 0);
        flight(d, 1, 2, ZT_OP_REDUCE_SCATTER, "unit 4 grads", 299, 0);
        zt_watch_state want = kind == 1 ? ZT_WS_HUNG : ZT_WS_CRASHED;
        const char *says = kind == 0 ? "rank 1 is gone (process" : kind == 1 ? "rank 1 is stopped (process" : "rank 1 is alive but not ticking";
        zt_watch_state got = poll_once(d, &o, now, &w);
        printf("  %s: %s %s\n", kind == 0 ? "gone" : kind == 1 ? "stopped" : "alive", zt_watch_state_name(got), w.reason);
        CHECK(got == want && strstr(w.reason, says), "local probe %d: %s: %s", kind, zt_watch_state_name(got), w.reason);
        if (kind == 1) CHECK(strstr(w.reason, "state T: SIGSTOP"), "stopped reason: %s", w.reason);
        zt_watch_diagnose(&w, now);
        CHECK(strstr(w.diagnosis, says) && !strstr(w.diagnosis, "mismatch") && !strstr(w.diagnosis, "transport"),
              "local probe %d diagnosis: %s", kind, w.diagnosis);
        zt_watch_free(&w);
        if (kind) {
            kill(child, SIGKILL);
            waitpid(child, NULL, 0);
        }
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: test_triage WORKDIR triage|errors|bands|calibrate|watch\n");
        return 2;
    }
    work = argv[1];
    mkdir_p(work);
    const char *what = argv[2];
    if (!strcmp(what, "triage"))
        test_triage();
    else if (!strcmp(what, "errors"))
        test_errors();
    else if (!strcmp(what, "bands"))
        test_bands();
    else if (!strcmp(what, "calibrate"))
        test_calibrate();
    else if (!strcmp(what, "watch"))
        test_watch();
    else {
        fprintf(stderr, "unknown test '%s'\n", what);
        return 2;
    }
    TEST_END();
}
