// Strict parsing of numeric command-line values: the whole string must be a
// number in range, otherwise the error names the flag and the value.
#ifndef ZT_ARGS_H
#define ZT_ARGS_H
#include <stdint.h>
int zt_arg_i64(const char *flag, const char *s, int64_t min, int64_t max, int64_t *out);
int zt_arg_f64(const char *flag, const char *s, double min, double max, double *out);
#include <stddef.h>
// The model families this build trains, by title from their tables (model/family.h), for the help
// texts: "Qwen3 and Qwen3.5" (joined by `last` before the final one). Returns buf.
const char *zt_family_titles(char *buf, size_t n, const char *last);
#endif
