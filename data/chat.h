// The Qwen3 chat template in C: one conversation (a cJSON "messages" array) rendered
// exactly as Hugging Face transformers' apply_chat_template renders it with the
// chat_template of assets/qwen3-tokenizer/tokenizer_config.json (no tools, no generation
// prompt), the byte spans a --train-on rule trains, and the token ids with a per-token
// trained mask taken from token byte offsets. No general Jinja engine: that one template.
// defines: zt_chat_train, zt_chat, zt_chat_render, zt_chat_tokens, zt_chat_tokenize,
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

typedef struct {
    size_t begin, end;  // bytes [begin, end) of the rendered text
} zt_chat_span;

typedef struct {
    zt_buf text;           // the rendered conversation, UTF-8 (not NUL-terminated)
    zt_chat_span *spans;   // trained byte spans under the rule, in order, disjoint, non-empty
    size_t nspans, spans_cap;
    int nmessages;
} zt_chat;

// Render root[field] (field NULL: "messages"). json/json_len: the JSON text root was
// parsed from; tool-call arguments given as JSON values go through Python's json.dumps
// (the template's tojson), which writes 1 and 1.0 differently, and cJSON keeps only the
// double: the literal is read back from the text (json NULL: such numbers are refused).
// The text must hold no \u0000 escape (cJSON strings end at NUL). Returns 0, or -1 with
// zt_err naming the message and the rule broken (the caller adds FILE:LINE). out is
// reset first; zt_chat_free releases it.
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
