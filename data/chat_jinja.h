// Any Hugging Face chat template for `pack --input chat`: a conversation line rendered by the
// Jinja engine (data/jinja.h) as apply_chat_template(messages, tools=tools, **vars) renders it,
// with the trained byte spans a --train-on rule takes from its {% generation %} blocks (what
// transformers' return_assistant_tokens_mask marks); then zt_chat_tokenize (data/chat.h) as for
// the built-in Qwen3 renderer.
// defines: zt_chat_jinja, zt_chat_jinja_load, zt_chat_jinja_free, zt_chat_jinja_scratch,
//          zt_chat_render_jinja, zt_chat_template_of_dir
#ifndef ZT_CHAT_JINJA_H
#define ZT_CHAT_JINJA_H
#include <cjson/cJSON.h>
#include <stdint.h>

#include "data/chat.h"
#include "data/jinja.h"

typedef struct zt_chat_jinja_t {
    zt_jinja *tpl;
    uint32_t crc;        // CRC-32C of the template text
    char name[320];      // recorded in dataset.json: "jinja FILE crc32c:xxxxxxxx"
    char **vars;         // NAME=VALUE, in order: the tokenizer's special tokens, add_generation_prompt=false,
    int nvars;           // then --template-var's
    zt_jinja_limits lim;
} zt_chat_jinja;

// Load the template at path: a .json file (tokenizer_config.json) gives its "chat_template"
// (a string, or the entry named "default" of a list), any other file is the template itself.
// cfgpath (NULL or absent: none) is the tokenizer_config.json whose bos/eos/unk/pad/sep/cls/mask
// tokens become variables, as a tokenizer passes them; vars (NULL: none) is --template-var:
// NAME=VALUE items separated by commas (a comma starts a new item only before NAME=).
// 0, or -1 + zt_err naming the file (and line:column and construct for a template the engine
// refuses).
int zt_chat_jinja_load(zt_chat_jinja *cj, const char *path, const char *cfgpath, const char *vars);
void zt_chat_jinja_free(zt_chat_jinja *cj);

// The chat template of a model directory, as transformers loads it: dir/chat_template.jinja, else
// the "chat_template" of dir/tokenizer_config.json (a string, or the list entry named "default").
// 1 with *crc its CRC-32C (of the template text, as zt_chat_jinja.crc) and path the file it came
// from; 0 when the directory has none (no such files, or a tokenizer_config.json without
// "chat_template"); -1 + zt_err when the file does not read or parse.
int zt_chat_template_of_dir(const char *dir, uint32_t *crc, char *path, size_t pathsz);

typedef struct {
    zt_jinja_vars *vars;
    zt_jinja_result res;
    zt_buf line;    // an OpenAI or ShareGPT line as the messages line
    zt_buf prompt;  // prefix mode: a prefix's rendering with the generation prompt
} zt_chat_jinja_scratch;  // per worker; zero it, free with zt_chat_jinja_scratch_free
void zt_chat_jinja_scratch_free(zt_chat_jinja_scratch *s);

// Render the line (root: its parse; json/n: its text, read again here so that 1 and 1.0 stay apart)
// in format fmt (messages: handed over as it is, as to apply_chat_template; openai, sharegpt: read
// by chat_read.c into the messages the built-in renderer sees, then handed over as a messages
// line; field NULL or "": the format's default member) into out->text and out->spans under rule: assistant = every {% generation %} span, last = the
// final one, all = the whole text. Overlapping and touching spans are merged; an empty span
// is kept (a token straddling it is trained, as transformers marks it). 0, or -1 +
// zt_err: raise_exception's message ("the template raised: MSG"), an engine error, a limit, a
// member "weight" (not supported here), or no generation span under assistant/last.
// A template without generation blocks, under assistant/last ("prefix mode", as TRL finds a
// prompt-completion's completion): for each assistant message i (last: the final one), P =
// messages[:i] rendered with add_generation_prompt=true, F = messages[:i+1] with it false; P
// must be a prefix of F and F of the whole text, and [len P, len F) is trained. Refused (-1 +
// zt_err) when a rendering is not a prefix ("... is not a prefix ..."), when one raises, when
// the first message is the assistant's (no prompt to render: transformers renders no empty
// conversation) or when there is no assistant message.
int zt_chat_render_jinja(const zt_chat_jinja *cj, const cJSON *root, zt_chat_format fmt, const char *json, size_t n,
                         const char *field, zt_chat_train rule, zt_chat_jinja_scratch *sc, zt_chat *out);
#endif
