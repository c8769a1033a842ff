// Self-contained HTML pages with inline SVG plots drawn here, for `zerotrain report`
// and `zerotrain triage --html`: no JavaScript, nothing fetched. Every plot is an
// <svg class="plot" id=... data-points=N> at a fixed page position, so a test (or a
// screenshot) knows where each plot is and how many points it drew.
// defines: zt_html_escape, zt_html_page_begin, zt_html_page_end, zt_svg_series, zt_svg_plot,
//          zt_svg_frame, zt_svg_legend_h, zt_svg_begin, zt_svg_draw_series, zt_svg_end,
//          zt_svg_plot_write, zt_svg_empty, zt_svg_count, zt_svg_fmt_num, zt_svg_time_unit
#ifndef ZT_SVG_H
#define ZT_SVG_H

#include <stddef.h>
#include <stdio.h>

// Text into HTML, the one way a string from a file reaches a page: element content or a
// double-quoted attribute value (the pages put no other text in an attribute, a style or
// a class). & < > " ' escaped; invalid UTF-8 bytes and control characters other than \n
// and \t become U+FFFD.
void zt_html_escape(FILE *f, const char *s);
// <!DOCTYPE html> ... <body data-width data-height>: the page is `width` x `height`
// px, every block placed absolutely (a screenshot of that size shows all of it).
void zt_html_page_begin(FILE *f, const char *title, int width, int height);
void zt_html_page_end(FILE *f);

enum { ZT_SVG_LINE = 1, ZT_SVG_MARKERS = 2 };  // style bits

typedef struct {
    const char *name;     // legend text
    const char *colour;   // "#1f77b4"
    const double *x, *y;  // n points; non-finite ones (and beyond +-1e150) are skipped
    size_t n;
    int style;  // ZT_SVG_LINE | ZT_SVG_MARKERS
    int dashed;
    double gap;     // > 0: a step in x larger than this breaks the line
    double stroke;  // line width in px (0: 2)
} zt_svg_series;

typedef struct {
    const char *id, *title, *xlabel, *ylabel;
    int left, top, width, height;   // page position and size, px
    double xmin, xmax, ymin, ymax;  // NAN: from the data
    int y_zero;                     // keep 0 in the y range
    int extra_bottom;               // px reserved under the x axis (the power picture's strip)
} zt_svg_plot;

// Where the plot area lies once zt_svg_begin has laid the frame out.
typedef struct {
    const zt_svg_plot *p;
    double ax, ay, aw, ah;  // plot area in svg coordinates
    double xmin, xmax, ymin, ymax;
    int legend_h;
} zt_svg_frame;

// Height of the legend rows a frame of this plot reserves for these series.
int zt_svg_legend_h(const zt_svg_plot *p, const zt_svg_series *s, size_t ns);
// Points a series will draw: finite points (|v| <= 1e150), after thinning a series longer than
// 2 x the plot width to the min and max of each pixel column.
size_t zt_svg_count(const zt_svg_plot *p, const zt_svg_series *s);
// Open the <svg>: title, legend (when a series has a name), grid, axes, ticks, axis
// titles, a clip path for the area. `points` is written as data-points.
void zt_svg_begin(FILE *f, zt_svg_plot *p, const zt_svg_series *s, size_t ns, size_t points, zt_svg_frame *fr);
double zt_svg_px(const zt_svg_frame *fr, double x);
double zt_svg_py(const zt_svg_frame *fr, double y);
// One <g class="series" data-name data-points> with a polyline (or several, broken at
// gaps) and/or circles.
void zt_svg_draw_series(FILE *f, const zt_svg_frame *fr, const zt_svg_series *s);
void zt_svg_end(FILE *f);
// The whole plot: begin, every series, end.
void zt_svg_plot_write(FILE *f, zt_svg_plot *p, const zt_svg_series *s, size_t ns);
// A plot with nothing to draw: the frame, data-points="0", and why (escaped).
void zt_svg_empty(FILE *f, const zt_svg_plot *p, const char *why);

// Tick-label text: "0", "0.25", "1.5k", "12M", "3e-05".
const char *zt_svg_fmt_num(double v, double step, char *buf, size_t n);
// Seconds spanning `span`: the divisor and unit name that read best (1 "s", 60 "min", 3600 "h").
double zt_svg_time_unit(double span, const char **unit);
#endif
