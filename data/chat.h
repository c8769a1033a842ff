// The Qwen3 chat template in C: one conversation rendered exactly as Hugging Face
// transformers' apply_chat_template(messages, tools=tools) renders it with the chat_template of
// assets/qwen3-tokenizer/tokenizer_config.json (no generation prompt), the byte spans a
// --train-on rule trains, and the token ids with a per-token trained mask taken from token
// byte offsets. No general Jinja engine: that one template. A line is read first, in any of the
// three input formats, into a zt_chat_conv, the template's view of it. Four files, one job each:
// chat_read.c (the input formats), chat_template.c (the template and its rendering), json_dumps.c
// (Python's json.dumps for the template's tojson; chat_internal.h), chat.c (the masked tokens).
// defines: zt_chat_train, zt_chat_format, zt_chat_conv, zt_chat, zt_chat_read, zt_chat_detect,
//          zt_chat_render, zt_chat_render_as, zt_chat_render_conv, zt_chat_tokens, zt_chat_tokenize,
//          zt_chat_check_template, zt_chat_template_crc
#ifndef ZT_CHAT_H
#define ZT_CHAT_H
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "data/tokenizer.h"

// Which tokens are trained targets (their prediction counts in the loss).
typedef enum {
    ZT_CHAT_TRAIN_ASSISTANT = 0,  // every assistant turn after its "<|im_start|>assistant\n" header, up to and
                                  // including its <|im_end|> (not the '\n' after it)
    ZT_CHAT_TRAIN_LAST = 1,       // only the final assistant turn's part, as above
    ZT_CHAT_TRAIN_ALL = 2,        // every token
} zt_chat_train;
const char *zt_chat_train_name(zt_chat_train rule);      // "assistant", "last", "all"
int zt_chat_train_parse(const char *s, zt_chat_train *rule);  // 0, or -1 for an unknown name

// How a line holds its conversation (docs/formats.md, "The chat input"):
//   messages  {"messages": [{"role", "content", "reasoning_content"?, "tool_calls"?}], "tools"?}: what
//             transformers' apply_chat_template takes (tools OpenAI style or bare schemas; tool-call
//             arguments a JSON string, written as it is, or a JSON value, written through tojson)
//   openai    OpenAI's fine-tuning JSONL: the same members with OpenAI's rules (tool calls with "id" and
//             "type": "function", arguments a JSON string, tool messages with a "tool_call_id" of the
//             calls before them, null content beside tool_calls read as "", tools wrapped as
//             {"type": "function", "function": {...}})
//   sharegpt  {"conversations": [{"from": "system"|"human"|"gpt"|"function_call"|"observation",
//             "value"}], "system"?, "tools"?: a JSON string or an array}, read as LLaMA-Factory reads it
// Every format takes "weight": 0|1 on an assistant (gpt, function_call) turn: 0 trains nothing of it.
typedef enum {
    ZT_CHAT_FORMAT_AUTO = 0,  // decide from the file (zt_chat_detect on its first lines)
    ZT_CHAT_FORMAT_MESSAGES = 1,
    ZT_CHAT_FORMAT_OPENAI = 2,
    ZT_CHAT_FORMAT_SHAREGPT = 3,
} zt_chat_format;
const char *zt_chat_format_name(zt_chat_format f);          // "auto", "messages", "openai", "sharegpt"
int zt_chat_format_parse(const char *s, zt_chat_format *f);  // 0, or -1 for an unknown name
const char *zt_chat_format_field(zt_chat_format f);          // the default member: "conversations" for sharegpt

// What one line says about its format: SHAREGPT ("from"/"value" turns; decisive), or for "role"
// messages OPENAI when it has what only OpenAI's format has (a "tool_call_id", null or no content
// beside tool_calls; decisive), MESSAGES when it has what OpenAI's format refuses (a bare tool
// schema, a tool call without "function", arguments that are not a string; decisive) or neither
// (not decisive: both read it the same); AUTO when the line does not tell (not an object, no such
// array). *decisive and *why (a static phrase naming the evidence) may be NULL.
zt_chat_format zt_chat_detect(const cJSON *root, const char *field, int *decisive, const char **why);

enum { ZT_CHAT_SYSTEM, ZT_CHAT_USER, ZT_CHAT_ASSISTANT, ZT_CHAT_TOOL };

// One tool call as the template writes it: <tool_call>\n{"name": NAME, "arguments": ARGS}\n</tool_call>.
typedef struct {
    const char *name;
    size_t name_len;
    const cJSON *args;  // a string is written as it is, any other value through the template's tojson
    char where[112];    // names it in errors: "messages[2] (assistant): tool_calls[0].function"
} zt_chat_call;

// One message as the template reads it.
typedef struct {
    int role;  // ZT_CHAT_SYSTEM ... ZT_CHAT_TOOL
    const char *content;
    size_t content_len;
    const char *reasoning;  // reasoning_content (or the first non-null alias); NULL: none given
    size_t reasoning_len;
    int call0, ncalls;  // its tool calls: calls[call0 .. call0 + ncalls)
    int weight;         // 1, or 0: nothing of this assistant turn is trained
    int index;          // its position in the line's array
    char where[48];     // "messages[3] (assistant)", "conversations[2] (function_call)"
} zt_chat_msg;

// A conversation as the template sees it, read from a line of any format. Strings point into
// the cJSON trees (the line's, and trees parsed here from JSON held in strings: ShareGPT's
// tools and function_call values), which json[] lists with the texts they were parsed from.
typedef struct {
    zt_chat_msg *msgs;
    int nmsgs, msgs_cap;
    zt_chat_call *calls;
    int ncalls, calls_cap;
    const cJSON **tools;  // each rendered through tojson, in order (none: no "# Tools" block)
    int ntools, tools_cap;
    struct zt_chat_json {
        const cJSON *root;
        const char *text;  // NULL: unknown (numbers in it are refused rather than guessed)
        size_t len;
    } *json;
    int njson, json_cap;
    cJSON **owned;  // trees parsed here, freed by zt_chat_conv_reset/free
    int nowned, owned_cap;
    zt_chat_format format;
    int weight0;  // assistant turns with weight 0
} zt_chat_conv;

// Read root (one line, parsed from json/json_len) in format fmt (AUTO: as zt_chat_detect says,
// MESSAGES when it cannot tell) into cv (reset first); field NULL or "": the format's default
// member. 0, or -1 + zt_err naming the member and the rule (the caller adds FILE:LINE). The
// text must hold no \u0000 escape (cJSON strings end at NUL).
int zt_chat_read(const cJSON *root, const char *field, zt_chat_format fmt, const char *json, size_t json_len,
                 zt_chat_conv *cv);
void zt_chat_conv_reset(zt_chat_conv *cv);
void zt_chat_conv_free(zt_chat_conv *cv);

typedef struct {
    size_t begin, end;  // bytes [begin, end) of the rendered text
} zt_chat_span;

typedef struct {
    zt_buf text;           // the rendered conversation, UTF-8 (not NUL-terminated)
    zt_chat_span *spans;   // trained byte spans under the rule, in order, disjoint (empty only from a Jinja template: data/chat_jinja.h)
    size_t nspans, spans_cap;
    int nmessages;
    int ntools;          // tool schemas in the "# Tools" block
    int weight0;         // assistant turns left untrained by "weight": 0
    zt_chat_conv conv;   // scratch of zt_chat_render / zt_chat_render_as
} zt_chat;

// Render a conversation: the tools block when it has tools (merged with a leading system
// message, as the template does), every turn, and the spans the rule trains: under assistant
// each assistant turn of weight 1, under last the final assistant turn unless its weight is 0,
// under all everything but the weight-0 turns. Tool schemas and tool-call arguments given as
// JSON values go through Python's json.dumps (the template's tojson), which writes 1 and 1.0
// differently while cJSON keeps only the double: the literal is read back from the text the
// value was parsed from (none known: such numbers are refused). 0, or -1 + zt_err; out is
// reset first; zt_chat_free releases it.
int zt_chat_render_conv(const zt_chat_conv *cv, zt_chat_train rule, zt_chat *out);
// zt_chat_read + zt_chat_render_conv, with out->conv as the scratch.
int zt_chat_render_as(const cJSON *root, const char *field, zt_chat_format fmt, const char *json, size_t json_len,
                      zt_chat_train rule, zt_chat *out);
// The messages format (field NULL: "messages").
int zt_chat_render(const cJSON *root, const char *field, const char *json, size_t json_len, zt_chat_train rule,
                   zt_chat *out);
void zt_chat_free(zt_chat *c);

// Token ids of a rendered conversation and which of them are trained.
typedef struct {
    zt_ids ids;            // zt_encode of the whole text: apply_chat_template(..., tokenize=True)
    uint8_t *trained;      // trained[i] = 1 iff token i's bytes overlap a trained span
    size_t trained_cap;
    int64_t ntrained;
    zt_buf norm, dec, tmp; // scratch
    size_t *cuts;
    size_t cuts_cap;
} zt_chat_tokens;

// Encode c->text with enc (a zt_encoder of tk) and compute the mask. Token offsets are
// in the normalised text (each id's zt_decode length); spans are mapped there by
// normalising the text piece by piece, cut at span boundaries, as the tokenizer does
// (added tokens on the raw text, NFC between them); that the pieces' normalisation
// equals the whole's is checked every time (-1 + zt_err if not: it would move a span).
// -1 + zt_err also for text that is not UTF-8.
int zt_chat_tokenize(zt_encoder *enc, const zt_tokenizer *tk, const zt_chat *c, zt_chat_tokens *out);
void zt_chat_tokens_free(zt_chat_tokens *t);

// Read tokenizer_config.json at path and check that its chat_template is byte for byte
// the Qwen3 template implemented here. 0 (and *crc = its CRC-32C), or -1 + zt_err naming
// the file: unreadable, not JSON, no chat_template string, or a different template
// (both CRC-32Cs given).
int zt_chat_check_template(const char *path, uint32_t *crc);
uint32_t zt_chat_template_crc(void);  // CRC-32C of the implemented template
const char *zt_chat_template_text(size_t *len);

#endif
