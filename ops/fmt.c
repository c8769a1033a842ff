// Small formatters the operations tools share (ops/fmt.h).
#include <math.h>
#include <stdio.h>

#include "ops/fmt.h"

const char *zt_fmt_dur(double s, char *buf, size_t n) {
    long v = lround(s);
    if (v < 60)
        snprintf(buf, n, "%ld s", v);
    else if (v < 3600)
        snprintf(buf, n, "%ldm%02lds", v / 60, v % 60);
    else
        snprintf(buf, n, "%ldh%02ldm", v / 3600, (v / 60) % 60);
    return buf;
}

const char *zt_rank_list(const int *r, int n, char *buf, size_t len) {
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < n && at < len;) {
        int j = i;
        while (j + 1 < n && r[j + 1] == r[j] + 1) j++;
        int w = j > i ? snprintf(buf + at, len - at, "%s%d-%d", i ? "," : "", r[i], r[j])
                      : snprintf(buf + at, len - at, "%s%d", i ? "," : "", r[i]);
        if (w < 0 || (size_t)w >= len - at) {  // out of room: end with "..."
            if (len >= 4) snprintf(buf + len - 4, 4, "...");
            break;
        }
        at += (size_t)w;
        i = j + 1;
    }
    return buf;
}
