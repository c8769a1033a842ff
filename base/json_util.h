// Small cJSON helpers shared by the project's readers of JSON from user files (data/,
// launch/, model/, checkpoint/).
// defines: zt_json_type_name, zt_json_too_deep_at, zt_json_depth_error, zt_json_error_col
#ifndef ZT_JSON_UTIL_H
#define ZT_JSON_UTIL_H
#include <cjson/cJSON.h>
#include <stdio.h>

// "a string", "an object", ...: what a value is, for error messages.
static inline const char *zt_json_type_name(const cJSON *v) {
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsObject(v)) return "an object";
    return "something else";
}

// cJSON refuses arrays and objects nested deeper than CJSON_NESTING_LIMIT (1000) and says
// only where it stopped, which read as "malformed JSON at column 1121". The 1-based column
// of the first '[' or '{' (outside strings) past that limit in s[0..n), or 0 when none is.
static inline size_t zt_json_too_deep_at(const char *s, size_t n) {
    size_t depth = 0;
    int in_str = 0;
    for (size_t i = 0; i < n; i++) {
        const char c = s[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = 0;
        } else if (c == '"') {
            in_str = 1;
        } else if (c == '[' || c == '{') {
            if (++depth > CJSON_NESTING_LIMIT) return i + 1;
        } else if ((c == ']' || c == '}') && depth) {
            depth--;
        }
    }
    return 0;
}

// After cJSON refused s[0..n): when its nesting is why (the first bracket past the limit
// comes at or before err_col, the 1-based column where cJSON stopped; 0: not known), writes
// "nested deeper than 1000 levels (cJSON's limit CJSON_NESTING_LIMIT) at column C" into buf
// and returns it; else NULL (the text is malformed: say so).
static inline const char *zt_json_depth_error(const char *s, size_t n, size_t err_col, char *buf, size_t len) {
    const size_t at = zt_json_too_deep_at(s, n);
    if (!at || (err_col && err_col < at)) return NULL;
    snprintf(buf, len, "nested deeper than %d levels (cJSON's limit CJSON_NESTING_LIMIT) at column %zu",
             (int)CJSON_NESTING_LIMIT, at);
    return buf;
}

// Where cJSON_Parse* stopped in s[0..n) (1-based; 0: unknown), from cJSON_GetErrorPtr: a
// process-wide pointer, so for readers that parse on one thread (threads pass
// return_parse_end instead).
static inline size_t zt_json_error_col(const char *s, size_t n) {
    const char *at = cJSON_GetErrorPtr();
    return at && at >= s && at <= s + n ? (size_t)(at - s) + 1 : 0;
}
#endif
