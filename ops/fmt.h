// Text the operations tools share: durations and rank lists (ops/fmt.c).
// defines: zt_fmt_dur, zt_rank_list
#ifndef ZT_OPS_FMT_H
#define ZT_OPS_FMT_H
#include <stddef.h>

// "1h02m", "45 s", "12m30s".
const char *zt_fmt_dur(double s, char *buf, size_t n);
// Rank list "0-2,4-15" of sorted ints into buf.
const char *zt_rank_list(const int *r, int n, char *buf, size_t len);
#endif
