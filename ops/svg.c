// Inline-SVG line/point plots and the HTML page around them (ops/svg.h). The
// frame is laid out from fixed margins, so a plot's area is known from its size alone.
#define _GNU_SOURCE
#include "ops/svg.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"

// Fixed margins of every frame (px).
#define M_LEFT 66
#define M_RIGHT 16
#define M_TOP 26      // title line; the legend rows come below it
#define M_BOTTOM 42   // x tick labels and the x axis title
#define LEGEND_ROW 15

// ---- HTML ---------------------------------------------------------------------------
void zt_html_escape(FILE *f, const char *s) {
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        unsigned c = *p;
        if (c == '&') fputs("&amp;", f), p++;
        else if (c == '<') fputs("&lt;", f), p++;
        else if (c == '>') fputs("&gt;", f), p++;
        else if (c == '"') fputs("&quot;", f), p++;
        else if (c == '\'') fputs("&#39;", f), p++;
        else if (c < 0x80) {
            if (c < 0x20 && c != '\n' && c != '\t') fputs("\xef\xbf\xbd", f);
            else fputc((int)c, f);
            p++;
        } else {
            // A UTF-8 sequence passes only when well formed (no overlongs, no surrogates).
            int len = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c <= 0xdf ? 2 : 0;
            int ok = len > 0;
            uint32_t cp = len == 4 ? c & 7 : len == 3 ? c & 15 : c & 31;
            for (int i = 1; ok && i < len; i++) {
                if ((p[i] & 0xc0) != 0x80) ok = 0;
                else cp = cp << 6 | (p[i] & 0x3f);
            }
            if (ok && ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
                       (len == 4 && (cp < 0x10000 || cp > 0x10ffff))))
                ok = 0;
            if (ok) {
                fwrite(p, 1, (size_t)len, f);
                p += len;
            } else {
                fputs("\xef\xbf\xbd", f);
                p++;
            }
        }
    }
}

void zt_html_page_begin(FILE *f, const char *title, int width, int height) {
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>", f);
    zt_html_escape(f, title);
    fputs("</title>\n<style>\n", f);
    fprintf(f,
            "html{background:#f2f3f5}\n"
            "body{margin:0;position:relative;width:%dpx;height:%dpx;background:#f2f3f5;color:#1f2933;"
            "font:13px/1.45 'DejaVu Sans',Helvetica,Arial,sans-serif}\n",
            width, height);
    fputs("svg.plot{position:absolute;background:#fff;outline:1px solid #d3d8de}\n"
          "svg.plot text{font-family:'DejaVu Sans',Helvetica,Arial,sans-serif}\n"
          "svg .title{font-size:13px;font-weight:bold;fill:#1f2933}\n"
          "svg .tick{font-size:10.5px;fill:#52606d}\n"
          "svg .axis-title{font-size:11px;fill:#323f4b}\n"
          "svg .legend text{font-size:10.5px;fill:#323f4b}\n"
          "svg .note{font-size:12px;fill:#7b8794}\n"
          "svg .band-label{font-size:10px;fill:#52606d}\n"
          ".block{position:absolute;box-sizing:border-box;background:#fff;outline:1px solid #d3d8de;padding:8px 12px;"
          "overflow:auto}\n"
          "h1{font-size:17px;margin:0 0 6px 0}\nh2{font-size:14px;margin:12px 0 4px 0}\n"
          "table.facts{border-collapse:collapse}\n"
          "table.facts td{padding:1px 14px 1px 0;vertical-align:top}\n"
          "table.facts td.k{color:#616e7c;white-space:nowrap}\n"
          "table.list{border-collapse:collapse;font-size:12px}\n"
          "table.list th,table.list td{padding:2px 10px 2px 0;text-align:left;border-bottom:1px solid #e4e7eb}\n"
          "pre{white-space:pre-wrap;word-break:break-word;font:12px/1.4 'DejaVu Sans Mono',monospace;margin:4px 0;"
          "background:#f7f8f9;padding:6px}\n"
          ".badge{display:inline-block;padding:0 8px;border-radius:3px;color:#fff;font-weight:bold}\n"
          ".st-complete{background:#2f8a3b}.st-running{background:#1f6fb4}.st-hung{background:#c62828}"
          ".st-crashed{background:#c62828}.st-failed{background:#c62828}.st-stopped{background:#8a6d1f}"
          ".st-starting{background:#616e7c}.st-unknown{background:#616e7c}\n"
          ".verdict{color:#b71c1c;font-weight:bold}\n"
          ".missing li{color:#52606d}\n"
          "code{font:12px 'DejaVu Sans Mono',monospace;background:#f0f1f3;padding:0 3px}\n",
          f);
    fputs("</style>\n</head>\n", f);
    fprintf(f, "<body data-width=\"%d\" data-height=\"%d\">\n", width, height);
}

void zt_html_page_end(FILE *f) { fputs("</body>\n</html>\n", f); }

// ---- numbers ------------------------------------------------------------------------
static int decimals_for(double step) {
    for (int d = 0; d <= 8; d++) {
        double s = step * pow(10, d);
        if (fabs(s - round(s)) < 1e-6 * fmax(1, fabs(s))) return d;
    }
    return 8;
}

const char *zt_svg_fmt_num(double v, double step, char *buf, size_t n) {
    double a = fabs(v);
    step = fabs(step) > 0 ? fabs(step) : fmax(a, 1);
    if (a < step * 1e-6) {
        snprintf(buf, n, "0");
        return buf;
    }
    static const struct { double div; const char *suffix; } si[] = {{1e9, "G"}, {1e6, "M"}, {1e4, "k"}};
    for (size_t i = 0; i < 3; i++)
        if (a >= si[i].div) {
            double div = si[i].div == 1e4 ? 1e3 : si[i].div;
            snprintf(buf, n, "%.*f%s", decimals_for(step / div), v / div, si[i].suffix);
            return buf;
        }
    int d = decimals_for(step);
    if (d > 5)
        snprintf(buf, n, "%.3g", v);
    else
        snprintf(buf, n, "%.*f", d, v);
    return buf;
}

double zt_svg_time_unit(double span, const char **unit) {
    if (span <= 1200) return *unit = "s", 1;
    if (span <= 72000) return *unit = "min", 60;
    return *unit = "h", 3600;
}

// Ticks at the multiples of step in [lo, hi], at most 64 (a step below the values'
// resolution cannot loop for ever).
static double tick_at(double lo, double step, int k) { return (ceil(lo / step - 1e-9) + k) * step; }

static int tick_count(double lo, double hi, double step) {
    if (!(step > 0) || !isfinite(lo) || !isfinite(hi)) return 0;
    double n = floor(hi / step + 1e-6) - ceil(lo / step - 1e-9) + 1;
    return n < 0 ? 0 : n > 64 ? 64 : (int)n;
}

static double nice_step(double range, int target) {
    if (!(range > 0)) return 1;
    double raw = range / target, mag = pow(10, floor(log10(raw))), norm = raw / mag;
    return (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
}

// ---- thinning -----------------------------------------------------------------------
// A point is drawn when both coordinates are finite and small enough that no range or
// pixel position computed from them overflows (a value from a damaged file must not put
// "nan" into the page).
static int drawable(double x, double y) { return fabs(x) <= 1e150 && fabs(y) <= 1e150; }

static double area_width(const zt_svg_plot *p) { return (double)(p->width - M_LEFT - M_RIGHT); }

// The points a series draws (finite ones, in order; a long series thinned to the min and
// max of each pixel column). *xs, *ys malloc'd.
static size_t series_points(const zt_svg_plot *p, const zt_svg_series *s, double **xs, double **ys) {
    size_t nf = 0;
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < s->n; i++)
        if (drawable(s->x[i], s->y[i])) nf++, lo = fmin(lo, s->x[i]), hi = fmax(hi, s->x[i]);
    *xs = zt_xmalloc((nf + 1) * sizeof **xs);
    *ys = zt_xmalloc((nf + 1) * sizeof **ys);
    size_t cols = (size_t)fmax(16, area_width(p)), k = 0;
    if (nf <= 2 * cols || !(hi > lo)) {
        for (size_t i = 0; i < s->n; i++)
            if (drawable(s->x[i], s->y[i])) (*xs)[k] = s->x[i], (*ys)[k] = s->y[i], k++;
        return k;
    }
    // One pass over columns: the input is in x order (steps, times).
    size_t i = 0;
    while (i < s->n) {
        if (!drawable(s->x[i], s->y[i])) {
            i++;
            continue;
        }
        size_t col = (size_t)fmin((double)cols - 1, (s->x[i] - lo) / (hi - lo) * (double)cols);
        size_t imin = i, imax = i, j = i;
        for (; j < s->n; j++) {
            if (!drawable(s->x[j], s->y[j])) continue;
            size_t c = (size_t)fmin((double)cols - 1, (s->x[j] - lo) / (hi - lo) * (double)cols);
            if (c != col) break;
            if (s->y[j] < s->y[imin]) imin = j;
            if (s->y[j] > s->y[imax]) imax = j;
        }
        size_t a = imin < imax ? imin : imax, b = imin < imax ? imax : imin;
        (*xs)[k] = s->x[a], (*ys)[k] = s->y[a], k++;
        if (b != a) (*xs)[k] = s->x[b], (*ys)[k] = s->y[b], k++;
        i = j;
    }
    return k;
}

size_t zt_svg_count(const zt_svg_plot *p, const zt_svg_series *s) {
    double *xs, *ys;
    size_t k = series_points(p, s, &xs, &ys);
    free(xs);
    free(ys);
    return k;
}

// ---- frame --------------------------------------------------------------------------
static int legend_item_w(const char *name) { return 26 + (int)(6.4 * (double)strlen(name)) + 14; }

static int legend_rows(const zt_svg_plot *p, const zt_svg_series *s, size_t ns) {
    int rows = 0, x = 0, maxw = p->width - M_LEFT - M_RIGHT;
    for (size_t i = 0; i < ns; i++) {
        if (!s[i].name || !s[i].name[0]) continue;
        int w = legend_item_w(s[i].name);
        if (rows == 0 || x + w > maxw) rows++, x = 0;
        x += w;
    }
    return rows;
}

int zt_svg_legend_h(const zt_svg_plot *p, const zt_svg_series *s, size_t ns) {
    int rows = legend_rows(p, s, ns);
    return rows * LEGEND_ROW + (rows ? 4 : 0);
}

double zt_svg_px(const zt_svg_frame *fr, double x) {
    return fr->ax + (x - fr->xmin) / (fr->xmax - fr->xmin) * fr->aw;
}

double zt_svg_py(const zt_svg_frame *fr, double y) {
    return fr->ay + fr->ah - (y - fr->ymin) / (fr->ymax - fr->ymin) * fr->ah;
}

static void legend_write(FILE *f, const zt_svg_frame *fr, const zt_svg_series *s, size_t ns) {
    const zt_svg_plot *p = fr->p;
    int x = 0, row = 0, maxw = p->width - M_LEFT - M_RIGHT, any = 0;
    for (size_t i = 0; i < ns; i++) {
        if (!s[i].name || !s[i].name[0]) continue;
        if (!any) fputs("<g class=\"legend\">\n", f), any = 1;
        int w = legend_item_w(s[i].name);
        if (x > 0 && x + w > maxw) row++, x = 0;
        double lx = M_LEFT + x, ly = M_TOP + 4 + row * LEGEND_ROW;
        fprintf(f, "<g class=\"legend-item\" data-name=\"");
        zt_html_escape(f, s[i].name);
        fprintf(f, "\">");
        if (s[i].style & ZT_SVG_LINE)
            fprintf(f,
                    "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2.5\"%s/>",
                    lx, ly + 4, lx + 20, ly + 4, s[i].colour, s[i].dashed ? " stroke-dasharray=\"5 3\"" : "");
        if (s[i].style & ZT_SVG_MARKERS)
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>", lx + 10, ly + 4, s[i].colour);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", lx + 25, ly + 8);
        zt_html_escape(f, s[i].name);
        fputs("</text></g>\n", f);
        x += w;
    }
    if (any) fputs("</g>\n", f);
}

void zt_svg_begin(FILE *f, zt_svg_plot *p, const zt_svg_series *s, size_t ns, size_t points, zt_svg_frame *fr) {
    memset(fr, 0, sizeof *fr);
    fr->p = p;
    fr->legend_h = zt_svg_legend_h(p, s, ns);
    fr->ax = M_LEFT;
    fr->ay = M_TOP + fr->legend_h + 6;
    fr->aw = area_width(p);
    fr->ah = p->height - fr->ay - M_BOTTOM - p->extra_bottom;
    // ranges from the data where not given
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    for (size_t k = 0; k < ns; k++)
        for (size_t i = 0; i < s[k].n; i++)
            if (drawable(s[k].x[i], s[k].y[i])) {
                xlo = fmin(xlo, s[k].x[i]), xhi = fmax(xhi, s[k].x[i]);
                ylo = fmin(ylo, s[k].y[i]), yhi = fmax(yhi, s[k].y[i]);
            }
    if (!isfinite(xlo)) xlo = 0, xhi = 1, ylo = 0, yhi = 1;
    if (isfinite(p->xmin)) xlo = p->xmin;
    if (isfinite(p->xmax)) xhi = p->xmax;
    if (!(xhi > xlo)) xlo -= 0.5, xhi += 0.5;
    int ygiven_lo = isfinite(p->ymin), ygiven_hi = isfinite(p->ymax);
    if (ygiven_lo) ylo = p->ymin;
    if (ygiven_hi) yhi = p->ymax;
    if (p->y_zero) ylo = fmin(ylo, 0), yhi = fmax(yhi, 0);
    if (!(yhi > ylo)) {
        double d = fabs(ylo) > 0 ? 0.1 * fabs(ylo) : 1;
        ylo -= d, yhi += d;
        if (p->y_zero && ylo < 0 && yhi - d >= 0) ylo = 0;
    }
    double ystep = nice_step(yhi - ylo, 5);
    if (!ygiven_lo) ylo = floor(ylo / ystep + 1e-9) * ystep;
    if (!ygiven_hi) yhi = ceil(yhi / ystep - 1e-9) * ystep;
    if (!(yhi > ylo)) yhi = ylo + ystep;
    fr->xmin = xlo, fr->xmax = xhi, fr->ymin = ylo, fr->ymax = yhi;
    double xstep = nice_step(xhi - xlo, (int)fmax(3, fr->aw / 90));

    fprintf(f, "<svg class=\"plot\" id=\"%s\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" style=\"left:%dpx;top:%dpx\" data-x=\"%d\" data-y=\"%d\" data-points=\"%zu\" "
               "data-area=\"%.0f %.0f %.0f %.0f\">\n",
            p->id, p->width, p->height, p->width, p->height, p->left, p->top, p->left, p->top, points, fr->ax, fr->ay,
            fr->aw, fr->ah);
    fprintf(f, "<text class=\"title\" x=\"10\" y=\"18\">");
    zt_html_escape(f, p->title);
    fputs("</text>\n", f);
    legend_write(f, fr, s, ns);
    fprintf(f, "<defs><clipPath id=\"%s-clip\"><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/></clipPath>"
               "</defs>\n",
            p->id, fr->ax - 4, fr->ay - 4, fr->aw + 8, fr->ah + 8);
    fprintf(f, "<rect class=\"area\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#ffffff\"/>\n", fr->ax,
            fr->ay, fr->aw, fr->ah);
    // grid and ticks
    char b[48];
    fputs("<g class=\"axes\">\n<g class=\"grid\" stroke=\"#e8ebee\" stroke-width=\"1\">\n", f);
    const int nyt = tick_count(ylo, yhi, ystep), nxt = tick_count(xlo, xhi, xstep);
    for (int k = 0; k < nyt; k++) {
        double y = zt_svg_py(fr, tick_at(ylo, ystep, k));
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", fr->ax, y, fr->ax + fr->aw, y);
    }
    for (int k = 0; k < nxt; k++) {
        double x = zt_svg_px(fr, tick_at(xlo, xstep, k));
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", x, fr->ay, x, fr->ay + fr->ah);
    }
    fputs("</g>\n", f);
    double axis_y = fr->ay + fr->ah;
    fprintf(f, "<line class=\"axis x-axis\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#52606d\"/>\n",
            fr->ax, axis_y, fr->ax + fr->aw, axis_y);
    fprintf(f, "<line class=\"axis y-axis\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#52606d\"/>\n",
            fr->ax, fr->ay, fr->ax, axis_y);
    fputs("<g class=\"ticks y-ticks\">\n", f);
    for (int k = 0; k < nyt; k++) {
        double v = tick_at(ylo, ystep, k);
        fprintf(f, "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", fr->ax - 5,
                zt_svg_py(fr, v) + 3.5, zt_svg_fmt_num(v, ystep, b, sizeof b));
    }
    fputs("</g>\n<g class=\"ticks x-ticks\">\n", f);
    double ty = axis_y + p->extra_bottom + 14;
    for (int k = 0; k < nxt; k++) {
        double v = tick_at(xlo, xstep, k);
        fprintf(f, "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", zt_svg_px(fr, v),
                ty, zt_svg_fmt_num(v, xstep, b, sizeof b));
    }
    fputs("</g>\n", f);
    fprintf(f, "<text class=\"axis-title x-title\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">", fr->ax + fr->aw / 2,
            p->height - 8);
    zt_html_escape(f, p->xlabel);
    fprintf(f, "</text>\n<text class=\"axis-title y-title\" x=\"0\" y=\"0\" text-anchor=\"middle\" "
               "transform=\"translate(14 %.1f) rotate(-90)\">",
            fr->ay + fr->ah / 2);
    zt_html_escape(f, p->ylabel);
    fputs("</text>\n</g>\n", f);
}

void zt_svg_draw_series(FILE *f, const zt_svg_frame *fr, const zt_svg_series *s) {
    double *xs, *ys;
    size_t k = series_points(fr->p, s, &xs, &ys);
    fprintf(f, "<g class=\"series\" data-name=\"");
    zt_html_escape(f, s->name ? s->name : "");
    fprintf(f, "\" data-points=\"%zu\" data-colour=\"%s\" clip-path=\"url(#%s-clip)\">\n", k, s->colour, fr->p->id);
    if ((s->style & ZT_SVG_LINE) && k) {
        for (size_t i = 0; i < k;) {
            size_t j = i + 1;
            while (j < k && !(s->gap > 0 && xs[j] - xs[j - 1] > s->gap)) j++;
            fprintf(f,
                    "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%.2g\" stroke-linejoin=\"round\"%s "
                    "points=\"",
                    s->colour, s->stroke > 0 ? s->stroke : 2.0, s->dashed ? " stroke-dasharray=\"6 4\"" : "");
            for (size_t q = i; q < j; q++)
                fprintf(f, "%s%.1f,%.1f", q > i ? " " : "", zt_svg_px(fr, xs[q]), zt_svg_py(fr, ys[q]));
            fputs("\"/>\n", f);
            i = j;
        }
    }
    if (s->style & ZT_SVG_MARKERS) {
        double r = k > 400 ? 2 : 3.5;
        for (size_t i = 0; i < k; i++)
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"%s\"/>\n", zt_svg_px(fr, xs[i]),
                    zt_svg_py(fr, ys[i]), r, s->colour);
    }
    fputs("</g>\n", f);
    free(xs);
    free(ys);
}

void zt_svg_end(FILE *f) { fputs("</svg>\n", f); }

void zt_svg_plot_write(FILE *f, zt_svg_plot *p, const zt_svg_series *s, size_t ns) {
    size_t total = 0;
    for (size_t i = 0; i < ns; i++) total += zt_svg_count(p, &s[i]);
    zt_svg_frame fr;
    zt_svg_begin(f, p, s, ns, total, &fr);
    for (size_t i = 0; i < ns; i++) zt_svg_draw_series(f, &fr, &s[i]);
    zt_svg_end(f);
}

void zt_svg_empty(FILE *f, const zt_svg_plot *p, const char *why) {
    // Title, an empty area and the reason: no axes to suggest a scale that has no data.
    double ax = M_LEFT, ay = M_TOP + 6, aw = area_width(p), ah = p->height - ay - M_BOTTOM - p->extra_bottom;
    fprintf(f, "<svg class=\"plot\" id=\"%s\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" style=\"left:%dpx;top:%dpx\" data-x=\"%d\" data-y=\"%d\" data-points=\"0\" "
               "data-empty=\"1\" data-area=\"%.0f %.0f %.0f %.0f\">\n",
            p->id, p->width, p->height, p->width, p->height, p->left, p->top, p->left, p->top, ax, ay, aw, ah);
    fprintf(f, "<text class=\"title\" x=\"10\" y=\"18\">");
    zt_html_escape(f, p->title);
    fprintf(f, "</text>\n<rect class=\"area\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#fafbfc\" "
               "stroke=\"#e4e7eb\"/>\n<text class=\"note\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">",
            ax, ay, aw, ah, ax + aw / 2, ay + ah / 2 + 4);
    zt_html_escape(f, why);
    fputs("</text>\n", f);
    zt_svg_end(f);
}
