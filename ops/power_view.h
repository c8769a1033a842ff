// The field report's power picture (ops/power_view.c): board power per GPU over the triage
// bands, the state strip under it; drawn by `zerotrain report` and `zerotrain triage --html`.
// defines: zt_power_class, zt_power_classify, zt_power_class_free, zt_power_view, zt_power_svg,
//          zt_power_svg_height, zt_state_colour, zt_triage_html
#ifndef ZT_POWER_VIEW_H
#define ZT_POWER_VIEW_H

#include <stddef.h>
#include <stdio.h>

#include "ops/triage.h"

// Snapshots and stretches of a sample set, built exactly as `zerotrain triage` builds
// them (same window, same gap rule).
typedef struct {
    zt_snapshot *snaps;
    size_t ns;
    zt_stretch *st;
    size_t nst;
    double median_interval, max_gap;
} zt_power_class;

// window: snapshot window (s); max_gap <= 0: max(5, 3 x median interval). Samples sorted.
void zt_power_classify(const zt_samples *set, const zt_bands *b, double window, double max_gap, zt_power_class *out);
void zt_power_class_free(zt_power_class *c);

typedef struct {
    const char *id;        // the <svg> id ("power")
    int left, top, width;  // page position and width; the height is zt_power_svg_height
    double t0;             // time origin on the samples' clock (x = t - t0)
    const char *t0_what;   // for the axis title: "run start", "first sample"
    const double *marks;   // checkpoint save times on the samples' clock (may be NULL)
    size_t nmarks;
    int min_deadlock;  // deadlock stretches of at least this many snapshots are labelled
} zt_power_view;

int zt_power_svg_height(const zt_samples *set, int width);
// The field report's picture: <svg class="plot" data-points = samples drawn>, one
// polyline per GPU (series "GPU N"), the bands shaded (<rect class="band">), and a
// <g class="strip"> of <rect class="state" data-state data-snapshots data-seconds>
// per stretch, coloured by state.
void zt_power_svg(FILE *f, const zt_power_view *v, const zt_samples *set, const zt_bands *b, const zt_power_class *c);
const char *zt_state_colour(zt_gpu_state s);

// `zerotrain triage --html PATH`: the power picture and the stretches of these files.
int zt_triage_html(const char *path, const zt_samples *set, const zt_bands *b, const char *bands_name,
                   const zt_power_class *c, char *const *files, int nfiles, int min_deadlock);
#endif
