// Small cJSON helpers shared by the JSON readers of data/ (pack_text.c, chat.c).
// defines: zt_json_type_name
#ifndef ZT_JSON_UTIL_H
#define ZT_JSON_UTIL_H
#include <cjson/cJSON.h>

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
#endif
