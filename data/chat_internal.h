// What the chat files of data/ share, not for callers: the role names the readers and the
// renderer spell, and Python's json.dumps (data/json_dumps.c) with its check of a string's bytes.
// defines: zt_chat_role_names, zt_pyjson_num_ref, zt_pyjson_numbers, zt_pyjson_dumps, zt_pyjson_str_view
#ifndef ZT_CHAT_INTERNAL_H
#define ZT_CHAT_INTERNAL_H
#include <cjson/cJSON.h>
#include <stddef.h>

#include "data/chat.h"

extern const char *const zt_chat_role_names[4];  // by zt_chat_msg.role: system, user, assistant, tool

// A string we will render: its bytes, which must be UTF-8. 0, or -1 + zt_err naming where and what.
int zt_pyjson_str_view(const cJSON *v, const char *where, const char *what, const char **s, size_t *n);

// The number literals of a conversation's JSON texts (zt_chat_conv.json), built on first use;
// zero it with .cv set, free .refs after.
typedef struct {
    const cJSON *node;
    const char *text;  // the text the literal is in (NULL: not known)
    size_t off, len;
} zt_pyjson_num_ref;

typedef struct {
    const zt_chat_conv *cv;
    int built;
    zt_pyjson_num_ref *refs;
    size_t n, cap;
} zt_pyjson_numbers;

// json.dumps(v, ensure_ascii=False) with the default separators ", " and ": ", appended to out.
// 0, or -1 + zt_err naming where.
int zt_pyjson_dumps(zt_pyjson_numbers *t, const cJSON *v, const char *where, zt_buf *out);
#endif
