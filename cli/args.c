// Strict numeric option parsing shared by the subcommands.
#include "cli/args.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/common.h"
#include "model/family.h"

int zt_arg_i64(const char *flag, const char *s, int64_t min, int64_t max, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end)
        return zt_err("%s: '%s' is not an integer", flag, s);
    if (v < min || v > max) return zt_err("%s: %lld is out of range [%lld, %lld]", flag, v, (long long)min, (long long)max);
    *out = v;
    return 0;
}

int zt_arg_f64(const char *flag, const char *s, double min, double max, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v)) return zt_err("%s: '%s' is not a number", flag, s);
    if (v < min || v > max) return zt_err("%s: %g is out of range [%g, %g]", flag, v, min, max);
    *out = v;
    return 0;
}

const char *zt_family_titles(char *buf, size_t n, const char *last) {
    const zt_family *const *f = zt_family_list();
    int count = 0;
    while (f[count]) count++;
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < count && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, "%s%s", i == 0 ? "" : i == count - 1 ? last : ", ",
                               f[i]->title ? f[i]->title : f[i]->name);
    return buf;
}
