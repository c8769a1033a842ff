// A Jinja engine for Hugging Face chat templates, in C: the subset the templates use, rendered
// as transformers' apply_chat_template renders them (jinja2 3.1 with trim_blocks, lstrip_blocks,
// loopcontrols, the {% generation %} extension, HF's tojson, raise_exception and strftime_now).
// Four files: jinja_lex.c (source -> tokens, whitespace control), jinja_parse.c (tokens -> tree;
// a construct the engine lacks is refused here, naming file:line:col), jinja_eval.c (the tree
// rendered), jinja_builtin.c (filters, tests, methods, globals), jinja_value.c (values, Python's
// str/repr, json.dumps/loads).
// defines: zt_jinja, zt_jinja_parse, zt_jinja_free, zt_jinja_vars, zt_jinja_render, zt_jinja_result,
//          zt_jinja_messages_count, zt_jinja_message_role_is, zt_jinja_messages_prefix
#ifndef ZT_JINJA_H
#define ZT_JINJA_H
#include <stddef.h>
#include <stdint.h>

typedef struct zt_jinja zt_jinja;  // a parsed template

// Parse a template (file names it in errors). NULL + zt_err "FILE:LINE:COL: what" when the
// source is not valid Jinja or uses a statement, filter, test or method the engine lacks.
zt_jinja *zt_jinja_parse(const char *src, size_t n, const char *file);
void zt_jinja_free(zt_jinja *t);
// Whether the template has {% generation %} blocks.
int zt_jinja_has_generation(const zt_jinja *t);

// The variables of one render; values live in the vars' arena until zt_jinja_vars_reset.
typedef struct zt_jinja_vars zt_jinja_vars;
zt_jinja_vars *zt_jinja_vars_new(void);
void zt_jinja_vars_free(zt_jinja_vars *v);
void zt_jinja_vars_reset(zt_jinja_vars *v);
// name = json.loads(json). 0, or -1 + zt_err.
int zt_jinja_set_json(zt_jinja_vars *v, const char *name, const char *json, size_t n);
int zt_jinja_set_str(zt_jinja_vars *v, const char *name, const char *s, size_t n);
// messages = the JSON array as transformers hands it to the template: keys whose value is null
// dropped, reasoning_content filled from thinking/reasoning and thinking from it.
int zt_jinja_set_messages(zt_jinja_vars *v, const char *json, size_t n);
// One conversation line {"messages": [...], "tools"?: [...], "documents"?: [...]} (field: the
// messages member, NULL for "messages"): messages as zt_jinja_set_messages sets them, tools and
// documents as given or none, as apply_chat_template(messages, tools=..., documents=...) passes them.
int zt_jinja_set_line(zt_jinja_vars *v, const char *json, size_t n, const char *field);
// The messages set by zt_jinja_set_line / zt_jinja_set_messages: how many; whether message i has
// role `role`; and keeping only the first k of them (a conversation's prefix, for --train-on
// with a template that has no generation blocks; data/chat_jinja.c).
size_t zt_jinja_messages_count(zt_jinja_vars *v);
int zt_jinja_message_role_is(zt_jinja_vars *v, size_t i, const char *role);
void zt_jinja_messages_prefix(zt_jinja_vars *v, size_t k);
// NAME=VALUE: true/false/none (any case), an integer, a float, JSON ([...], {...}, "..."), or else
// the text as a string.
int zt_jinja_set_arg(zt_jinja_vars *v, const char *name_eq_value);

typedef struct {
    uint64_t max_steps;   // loop iterations + macro calls (0: 10,000,000)
    size_t max_output;    // bytes of output (0: 64 MiB)
    size_t max_memory;    // bytes of values (0: 1 GiB)
    int max_depth;        // macro recursion (0: 200)
    int64_t now;          // strftime_now's time, Unix seconds UTC (0: the clock's)
} zt_jinja_limits;

enum { ZT_JINJA_OK = 0, ZT_JINJA_RAISED = 1, ZT_JINJA_ERROR = 2, ZT_JINJA_LIMIT = 3 };
typedef struct {
    int status;           // ZT_JINJA_*
    char msg[1024];       // RAISED: raise_exception's message; ERROR/LIMIT: what, Python's words where it has them
    int line;             // template line of the failing node
    char *text;           // the rendered text (malloc'd, NUL-terminated), its length n
    size_t n, cap;
    size_t (*spans)[2];   // {% generation %} byte spans [begin, end), as transformers records them
    size_t nspans, spans_cap;
} zt_jinja_result;

// Render t with vars into res (reused across calls; free with zt_jinja_result_free).
// Returns res->status.
int zt_jinja_render(const zt_jinja *t, zt_jinja_vars *vars, const zt_jinja_limits *lim, zt_jinja_result *res);
void zt_jinja_result_free(zt_jinja_result *res);
#endif
