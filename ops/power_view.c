// The field report's picture, as SVG: board power per GPU against time over the triage
// bands, and each snapshot's classified state as a coloured strip under it. Used by
// `zerotrain report` and `zerotrain triage --html` (ops/report.h).
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops/power_view.h"
#include "ops/svg.h"
#include "base/common.h"
#include "base/out_file.h"
#include "ops/fmt.h"

#define POWER_AREA_H 300
#define STRIP_GAP 8
#define STRIP_H 20
#define STRIP_BOTTOM (STRIP_GAP + STRIP_H + 6)

// GPUs: 16 distinct colours (ranks 16.. reuse them).
static const char *gpu_palette[16] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                                      "#e377c2", "#17becf", "#bcbd22", "#393b79", "#637939", "#8c6d31",
                                      "#843c39", "#7b4173", "#3182bd", "#636363"};

const char *zt_state_colour(zt_gpu_state s) {
    switch (s) {
    case ZT_GS_COMPUTE: return "#2ca02c";
    case ZT_GS_COMM: return "#1f77b4";
    case ZT_GS_STARVATION: return "#ff7f0e";
    case ZT_GS_CHECKPOINT: return "#9467bd";
    case ZT_GS_DEADLOCK: return "#d62728";
    case ZT_GS_IDLE: return "#7f7f7f";
    default: return "#c7c7c7";
    }
}

void zt_power_classify(const zt_samples *set, const zt_bands *b, double window, double max_gap, zt_power_class *out) {
    memset(out, 0, sizeof *out);
    zt_snapshots_build(set, b, window, &out->snaps, &out->ns);
    out->median_interval = zt_snapshots_median_interval(out->snaps, out->ns);
    out->max_gap = max_gap > 0 ? max_gap : fmax(5.0, 3.0 * out->median_interval);
    zt_stretches_build(out->snaps, out->ns, out->max_gap, &out->st, &out->nst);
}

void zt_power_class_free(zt_power_class *c) {
    free(c->snaps);
    free(c->st);
    memset(c, 0, sizeof *c);
}

// One legend entry per GPU present, named by its id (a rank, or a file's index + offset).
static void gpu_names(const int *ids, int ngpu, char (*names)[16], zt_svg_series *s) {
    for (int i = 0; i < ngpu; i++) {
        snprintf(names[i], sizeof names[i], "GPU %d", ids ? ids[i] : i);
        s[i] = (zt_svg_series){.name = names[i], .colour = gpu_palette[(ids ? ids[i] : i) % 16], .style = ZT_SVG_LINE};
    }
}

int zt_power_svg_height(const zt_samples *set, int width) {
    int *ids;
    int ngpu = zt_samples_gpu_ids(set, &ids);
    if (ngpu < 1) ngpu = 1, free(ids), ids = NULL;
    char (*names)[16] = zt_xmalloc((size_t)ngpu * sizeof *names);
    zt_svg_series *s = zt_xmalloc((size_t)ngpu * sizeof *s);
    gpu_names(ids, ngpu, names, s);
    free(ids);
    zt_svg_plot p = {.width = width};
    int lh = zt_svg_legend_h(&p, s, (size_t)ngpu);
    free(names);
    free(s);
    return 26 + lh + 6 + POWER_AREA_H + STRIP_BOTTOM + 42;
}

static const zt_gpu_state state_order[] = {ZT_GS_COMPUTE,  ZT_GS_COMM, ZT_GS_STARVATION, ZT_GS_CHECKPOINT,
                                           ZT_GS_DEADLOCK, ZT_GS_IDLE, ZT_GS_UNKNOWN};

// The bands: what a snapshot's power means (the classifier also looks at utilization).
static void draw_bands(FILE *f, const zt_svg_frame *fr, const zt_bands *b, double ytop) {
    const struct { double lo, hi; zt_gpu_state st; const char *label; } bands[] = {
        {0, b->idle_max_w, ZT_GS_IDLE, "idle"},
        {b->idle_max_w, b->hang_max_w, ZT_GS_DEADLOCK, "deadlock / checkpoint (busy GPUs at low power)"},
        {b->hang_max_w, b->compute_min_w, ZT_GS_COMM, "communication / starvation (even / uneven util)"},
        {b->compute_min_w, ytop, ZT_GS_COMPUTE, "compute"},
    };
    fprintf(f, "<g class=\"bands\" data-idle-max=\"%g\" data-hang-max=\"%g\" data-compute-min=\"%g\">\n", b->idle_max_w,
            b->hang_max_w, b->compute_min_w);
    for (size_t i = 0; i < sizeof bands / sizeof bands[0]; i++) {
        double y0 = zt_svg_py(fr, fmin(bands[i].hi, ytop)), y1 = zt_svg_py(fr, bands[i].lo);
        fprintf(f, "<rect class=\"band\" data-state=\"%s\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                   "fill=\"%s\" fill-opacity=\"0.10\"/>\n",
                zt_gpu_state_name(bands[i].st), fr->ax, y0, fr->aw, y1 - y0, zt_state_colour(bands[i].st));
        if (i > 0)
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-opacity=\"0.5\" "
                       "stroke-dasharray=\"4 3\"/>\n",
                    fr->ax, y1, fr->ax + fr->aw, y1, zt_state_colour(bands[i].st));
        char lab[160];
        if (i == 0)
            snprintf(lab, sizeof lab, "%s \xe2\x89\xa4 %g W", bands[i].label, bands[i].hi);
        else if (i == 3)
            snprintf(lab, sizeof lab, "%s \xe2\x89\xa5 %g W", bands[i].label, bands[i].lo);
        else
            snprintf(lab, sizeof lab, "%s %g\xe2\x80\x93%g W", bands[i].label, bands[i].lo, bands[i].hi);
        if (y1 - y0 >= 11) {
            fprintf(f, "<text class=\"band-label\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">", fr->ax + fr->aw - 6,
                    y0 + 11);
            zt_html_escape(f, lab);
            fputs("</text>\n", f);
        }
    }
    fputs("</g>\n", f);
}

// The checkpoint saves: a dashed line each, where the time axis shows them.
static void draw_marks(FILE *f, const zt_svg_frame *fr, const zt_power_view *v, double div) {
    if (v->nmarks) {
        fprintf(f, "<g class=\"ckpt-marks\" data-marks=\"%zu\">\n", v->nmarks);
        for (size_t i = 0; i < v->nmarks; i++) {
            double x = (v->marks[i] - v->t0) / div;
            if (x < fr->xmin || x > fr->xmax) continue;
            fprintf(f, "<line class=\"ckpt-mark\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#9467bd\" "
                       "stroke-width=\"1.5\" stroke-dasharray=\"2 3\"/><text class=\"band-label\" x=\"%.1f\" "
                       "y=\"%.1f\">save</text>\n",
                    zt_svg_px(fr, x), fr->ay, zt_svg_px(fr, x), fr->ay + fr->ah, zt_svg_px(fr, x) + 3, fr->ay + 22);
        }
        fputs("</g>\n", f);
    }
}

// The strip below the plot: one rect per stretch; each state's seconds into secs, their sum into *total.
static void draw_strip(FILE *f, const zt_svg_frame *fr, const zt_power_view *v, const zt_samples *set,
                       const zt_power_class *c, double div, double *secs, double *total) {
    double tot = 0;
    double sy = fr->ay + fr->ah + STRIP_GAP;
    fprintf(f, "<g class=\"strip\" data-stretches=\"%zu\" data-area=\"%.0f %.0f %.0f %d\">\n", c->nst, fr->ax, sy, fr->aw,
            STRIP_H);
    fprintf(f, "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">state</text>\n", fr->ax - 5, sy + 14);
    for (size_t i = 0; i < c->nst; i++) {
        const zt_stretch *st = &c->st[i];
        double x0 = zt_svg_px(fr, (st->t0 - v->t0) / div), x1 = zt_svg_px(fr, (st->t0 + st->seconds - v->t0) / div);
        x0 = fmax(fr->ax, x0), x1 = fmin(fr->ax + fr->aw, x1);
        if (x1 - x0 < 1) x1 = x0 + 1;
        secs[st->state] += st->seconds, tot += st->seconds;
        size_t nsnap = st->last - st->first + 1;
        char t1[40], d1[32];
        fprintf(f, "<rect class=\"state\" data-state=\"%s\" data-snapshots=\"%zu\" data-seconds=\"%.1f\" data-zero=\"",
                zt_gpu_state_name(st->state), nsnap, st->seconds);
        zt_html_escape(f, st->zero);
        fprintf(f, "\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"%s\"><title>%s, %s from %s (%zu "
                   "snapshot%s)",
                x0, sy, x1 - x0, STRIP_H, zt_state_colour(st->state), zt_gpu_state_name(st->state),
                zt_fmt_dur(st->seconds, d1, sizeof d1), zt_triage_fmt_time(set->kind, st->t0, t1, sizeof t1),
                nsnap, nsnap == 1 ? "" : "s");
        if ((st->state == ZT_GS_DEADLOCK || st->state == ZT_GS_CHECKPOINT) && st->zero[0]) {
            fputs(", at 0%: GPU ", f);
            zt_html_escape(f, st->zero);
        }
        fputs("</title></rect>\n", f);
    }
    fputs("</g>\n", f);
    *total = tot;
}

// Deadlock stretches long enough to trust get a label above the strip.
static void draw_deadlock_labels(FILE *f, const zt_svg_frame *fr, const zt_power_view *v, const zt_power_class *c,
                                 double div) {
    for (size_t i = 0; i < c->nst; i++) {
        const zt_stretch *st = &c->st[i];
        size_t min = (size_t)(v->min_deadlock > 0 ? v->min_deadlock : 2);
        if (st->state != ZT_GS_DEADLOCK || st->last - st->first + 1 < min) continue;
        char d1[32];
        double xm = zt_svg_px(fr, (st->t0 + 0.5 * st->seconds - v->t0) / div);
        xm = fmin(fmax(xm, fr->ax + 90), fr->ax + fr->aw - 90);
        fprintf(f, "<text class=\"deadlock-label\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"11\" "
                   "font-weight=\"bold\" fill=\"#b71c1c\">deadlock %s",
                xm, fr->ay + fr->ah - 6, zt_fmt_dur(st->seconds, d1, sizeof d1));
        if (st->zero[0]) {
            fputs(", GPU ", f);
            zt_html_escape(f, st->zero);
            fputs(" at 0%", f);
        }
        fputs("</text>\n", f);
    }
}

// State legend on the title line, right-aligned: colour, name, share of the time.
static void draw_state_legend(FILE *f, int width, const double *secs, double tot) {
    fputs("<g class=\"state-legend\">\n", f);
    double x = width - 10;
    for (size_t k = sizeof state_order / sizeof state_order[0]; k-- > 0;) {
        zt_gpu_state s = state_order[k];
        if (secs[s] <= 0 && s == ZT_GS_UNKNOWN) continue;
        char lab[64];
        snprintf(lab, sizeof lab, "%s %.0f%%", zt_gpu_state_name(s), tot > 0 ? 100 * secs[s] / tot : 0.0);
        double w = 6.2 * (double)strlen(lab);
        x -= w;
        fprintf(f, "<text x=\"%.1f\" y=\"18\" font-size=\"10.5\" fill=\"#323f4b\">%s</text>", x, lab);
        x -= 15;
        fprintf(f, "<rect x=\"%.1f\" y=\"9\" width=\"11\" height=\"11\" fill=\"%s\"/>\n", x, zt_state_colour(s));
        x -= 10;
    }
    fputs("</g>\n", f);
}

void zt_power_svg(FILE *f, const zt_power_view *v, const zt_samples *set, const zt_bands *b, const zt_power_class *c) {
    // Per GPU arrays (by slot in the ascending ids, not by id) in time order (the set is sorted).
    int *ids;
    int ngpu = zt_samples_gpu_ids(set, &ids);
    if (ngpu < 1) ngpu = 1, free(ids), ids = NULL;
    int *slot = zt_xmalloc((set->n + 1) * sizeof *slot);
    for (size_t i = 0; i < set->n; i++) slot[i] = zt_gpu_slot(ids, ngpu, set->s[i].dev);
    char (*names)[16] = zt_xmalloc((size_t)ngpu * sizeof *names);
    zt_svg_series *all = zt_xmalloc((size_t)ngpu * sizeof *all);
    gpu_names(ids, ngpu, names, all);
    size_t *cnt = zt_xcalloc((size_t)ngpu, sizeof *cnt);
    for (size_t i = 0; i < set->n; i++) cnt[slot[i]]++;
    double **xs = zt_xcalloc((size_t)ngpu, sizeof *xs), **ys = zt_xcalloc((size_t)ngpu, sizeof *ys);
    for (int d = 0; d < ngpu; d++) {
        xs[d] = zt_xmalloc((cnt[d] + 1) * sizeof **xs);
        ys[d] = zt_xmalloc((cnt[d] + 1) * sizeof **ys);
        cnt[d] = 0;
    }
    double tfirst = set->n ? set->s[0].t : 0, tlast = set->n ? set->s[set->n - 1].t : 1, pmax = 0;
    if (c->nst) tlast = fmax(tlast, c->st[c->nst - 1].t0 + c->st[c->nst - 1].seconds);
    const char *unit;
    double div = zt_svg_time_unit(fmax(tlast - v->t0, tlast - tfirst), &unit);
    for (size_t i = 0; i < set->n; i++) {
        const zt_gpu_sample *s = &set->s[i];
        const int k = slot[i];
        xs[k][cnt[k]] = (s->t - v->t0) / div;
        ys[k][cnt[k]++] = s->power_w;
        pmax = fmax(pmax, s->power_w);
    }
    zt_svg_series *ser = zt_xmalloc((size_t)ngpu * sizeof *ser);
    size_t nser = 0;
    for (int d = 0; d < ngpu; d++) {
        if (!cnt[d]) continue;
        ser[nser] = all[d];
        ser[nser].x = xs[d], ser[nser].y = ys[d], ser[nser].n = cnt[d];
        ser[nser].gap = c->max_gap / div;
        ser[nser].stroke = ngpu > 8 ? 1.1 : 1.6;  // many GPUs overlap at the same power
        nser++;
    }
    double ytop = fmax(pmax * 1.05, b->compute_min_w * 1.25);
    ytop = ceil(ytop / 100) * 100;
    char xlabel[160];
    snprintf(xlabel, sizeof xlabel, "time since %s (%s)", v->t0_what, unit);
    zt_svg_plot p = {.id = v->id, .title = "Board power per GPU over the triage bands; classified state below",
                     .xlabel = xlabel, .ylabel = "board power (W)", .left = v->left, .top = v->top,
                     .width = v->width, .height = zt_power_svg_height(set, v->width),
                     .xmin = fmin(0, (tfirst - v->t0) / div), .xmax = (tlast - v->t0) / div,
                     .ymin = 0, .ymax = ytop, .extra_bottom = STRIP_BOTTOM};
    size_t total = 0;
    for (size_t i = 0; i < nser; i++) total += zt_svg_count(&p, &ser[i]);
    zt_svg_frame fr;
    zt_svg_begin(f, &p, ser, nser, total, &fr);

    draw_bands(f, &fr, b, ytop);
    draw_marks(f, &fr, v, div);
    for (size_t i = 0; i < nser; i++) zt_svg_draw_series(f, &fr, &ser[i]);
    double secs[ZT_GS_COUNT_] = {0}, tot = 0;
    draw_strip(f, &fr, v, set, c, div, secs, &tot);
    draw_deadlock_labels(f, &fr, v, c, div);
    draw_state_legend(f, p.width, secs, tot);
    zt_svg_end(f);
    for (int d = 0; d < ngpu; d++) free(xs[d]), free(ys[d]);
    free(xs);
    free(ys);
    free(cnt);
    free(ser);
    free(all);
    free(names);
    free(slot);
    free(ids);
}

// ---- triage --html ---------------------------------------------------------------
#define PAGE_W 1320

int zt_triage_html(const char *path, const zt_samples *set, const zt_bands *b, const char *bands_name,
                   const zt_power_class *c, char *const *files, int nfiles, int min_deadlock) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    const int head_h = 150, top = 10 + head_h + 10;
    const int ph = zt_power_svg_height(set, PAGE_W - 20), table_top = top + ph + 10, table_h = 360;
    zt_html_page_begin(f, "zerotrain triage", PAGE_W, table_top + table_h + 10);
    char t1[40], t2[40], d1[32];
    int *ids;
    const int ngpu = zt_samples_gpu_ids(set, &ids);
    free(ids);
    size_t partial = 0;
    for (size_t i = 0; i < c->ns; i++) partial += c->snaps[i].n < ngpu;
    fprintf(f, "<div class=\"block\" id=\"summary\" style=\"left:10px;top:10px;width:%dpx;height:%dpx\">\n",
            PAGE_W - 20, head_h);
    fprintf(f, "<h1>zerotrain triage: %d GPU%s in %d file%s</h1>\n<table class=\"facts\">\n", ngpu,
            ngpu == 1 ? "" : "s", nfiles, nfiles == 1 ? "" : "s");
    fprintf(f, "<tr><td class=\"k\">snapshots</td><td>%zu (%zu partial), every %.2g s</td>", c->ns, partial,
            c->median_interval);
    fprintf(f, "<td class=\"k\">span</td><td>%s .. %s</td></tr>\n",
            c->ns ? zt_triage_fmt_time(set->kind, c->snaps[0].t, t1, sizeof t1) : "-",
            c->ns ? zt_triage_fmt_time(set->kind, c->snaps[c->ns - 1].t, t2, sizeof t2) : "-");
    fputs("<tr><td class=\"k\">bands</td><td>", f);
    zt_html_escape(f, b->gpu);
    fputs(" (", f);
    zt_html_escape(f, bands_name);
    fprintf(f, "): idle &le; %g W, hang &le; %g W, compute &ge; %g W</td><td class=\"k\">files</td><td>", b->idle_max_w,
            b->hang_max_w, b->compute_min_w);
    for (int i = 0; i < nfiles; i++) {
        if (i) fputs(", ", f);
        if (i == 6) {
            fprintf(f, "and %d more", nfiles - 6);
            break;
        }
        zt_html_escape(f, files[i]);
    }
    fputs("</td></tr>\n</table>\n", f);
    size_t ndl = 0, longest = 0;
    for (size_t i = 0; i < c->nst; i++)
        if (c->st[i].state == ZT_GS_DEADLOCK && c->st[i].last - c->st[i].first + 1 >= (size_t)min_deadlock) {
            if (ndl == 0 || c->st[i].seconds > c->st[longest].seconds) longest = i;
            ndl++;
        }
    if (ndl) {
        fprintf(f,
                "<p class=\"verdict\" id=\"verdict\">verdict: DEADLOCK: %zu stretch%s of &ge; %d snapshots; longest "
                "%s from %s, GPU at 0%%: ",
                ndl, ndl == 1 ? "" : "es", min_deadlock, zt_fmt_dur(c->st[longest].seconds, d1, sizeof d1),
                zt_triage_fmt_time(set->kind, c->st[longest].t0, t1, sizeof t1));
        zt_html_escape(f, c->st[longest].zero[0] ? c->st[longest].zero : "none (all busy at low power)");
        fputs("</p>\n", f);
    } else {
        fputs("<p id=\"verdict\">verdict: no deadlock stretch</p>\n", f);
    }
    fputs("</div>\n", f);
    // Time from the first sample; the axis title says when that was.
    char what[80];
    snprintf(what, sizeof what, "the first sample, %s",
             set->n ? zt_triage_fmt_time(set->kind, set->s[0].t, t1, sizeof t1) : "-");
    zt_power_view v = {.id = "power", .left = 10, .top = top, .width = PAGE_W - 20, .t0 = set->n ? set->s[0].t : 0,
                       .t0_what = what, .min_deadlock = min_deadlock};
    zt_power_svg(f, &v, set, b, c);
    fprintf(f, "<div class=\"block\" id=\"stretches\" style=\"left:10px;top:%dpx;width:%dpx;height:%dpx\">\n",
            table_top, PAGE_W - 20, table_h);
    fputs("<h2>Stretches</h2>\n<table class=\"list\"><tr><th>start</th><th>duration</th><th>state</th>"
          "<th>snapshots</th><th>GPUs at 0%</th></tr>\n",
          f);
    for (size_t i = 0; i < c->nst; i++) {
        const zt_stretch *st = &c->st[i];
        fprintf(f, "<tr class=\"stretch\" data-state=\"%s\"><td>%s</td><td>%s</td><td><span style=\"color:%s\">"
                   "&#9632;</span> %s</td><td>%zu</td><td>",
                zt_gpu_state_name(st->state), zt_triage_fmt_time(set->kind, st->t0, t1, sizeof t1),
                zt_fmt_dur(st->seconds, d1, sizeof d1), zt_state_colour(st->state),
                zt_gpu_state_name(st->state), st->last - st->first + 1);
        zt_html_escape(f, st->zero);
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n</div>\n", f);
    zt_html_page_end(f);
    fclose(f);
    int rc = zt_write_file_atomic(path, buf, len);
    free(buf);
    return rc;
}
