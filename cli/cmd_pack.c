// `zerotrain pack`: command-line front end of zt_pack (token ids or text -> dataset
// directory) and of `--verify`, which opens a dataset with every check on and
// prints one line per block file, so people and tests can vet a dataset. The flags are
// one table (cli/flags.h): a usage error exits 2, a failing pack or --verify 1. An input
// given as PATH:WEIGHT makes the pack a weighted mixture of its inputs.
#include <omp.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/chat.h"
#include "data/chat_jinja.h"
#include "data/dataset.h"
#include "model/qwen3.h"
#include "data/tokenizer.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "base/common.h"
#include "data/batch.h"

typedef struct {
    int input;  // zt_pack_input
    int format;  // zt_chat_format
    const char *field, *train_on, *eos, *tokenizer, *output, *verify;
    const char *chat_template, *template_var;
    int skip_bad, threads, seq_len, per_rank, quiet;
    int64_t vocab_size, model_vocab, mix_tokens;
    uint64_t seed;
} pack_flags;

static const char synopsis[] =
    "usage: zerotrain pack [options] INPUT... -o OUT_DIR\n"
    "       zerotrain pack --verify DIR [--model-vocab V]\n"
    "\n"
    "Packs documents of text or token ids into OUT_DIR: headerless little-endian uint32\n"
    "block files of --seq-len tokens each, and dataset.json (written last). Text is\n"
    "tokenized on one worker per core. Each document is followed by --eos when set;\n"
    "the stream is cut into blocks and the tail shorter than one block is dropped.\n"
    "Conversations (--input chat) are rendered with the Qwen3 chat template (or any\n"
    "Hugging Face chat template: --chat-template) and stored as version 2 words\n"
    "(id + document-start and no-loss flags): no eos, a\n"
    "conversation never split across blocks (the rest of a block it does not fit in\n"
    "is padding, as is the end of the last block), one longer than --seq-len skipped.\n"
    "Text and chat inputs given as PATH:WEIGHT are mixed: each takes WEIGHT / (sum of\n"
    "the weights) of the mixture's tokens (--mix-tokens), by whole passes over it and a\n"
    "fixed part of one more, and the documents taken are interleaved in a seeded order.\n"
    "An operand that is the name of an existing file (b.jsonl:1 alone) is that file;\n"
    "one naming files both ways (b.jsonl:1 beside b.jsonl) is refused.\n";
static const char epilog[] =
    "\n"
    "examples:\n"
    "  zerotrain pack --vocab-size 151936 --eos 151645 corpus.ids -o data/run1\n"
    "  zerotrain pack --input bytes --seq-len 256 *.txt -o data/bytes\n"
    "  zerotrain pack --input jsonl --field content --per-rank 16 corpus.jsonl -o data/qwen\n"
    "  zerotrain pack --input lines --skip-bad --threads 8 wiki.txt -o data/wiki\n"
    "  zerotrain pack --input chat --seq-len 4096 --train-on last sft.jsonl -o data/sft\n"
    "  zerotrain pack --input chat --format sharegpt glaive_toolcall.json -o data/tools\n"
    "  zerotrain pack --input chat agent.jsonl:0.7 chat.jsonl:0.3 --mix-tokens 50000000 -o data/mix\n"
    "  zerotrain pack --verify data/run1\n";

#define T pack_flags
static const zt_flag_choice input_choices[] = {
    {"ids", ZT_PACK_TEXT_IDS}, {"u32", ZT_PACK_U32},         {"bytes", ZT_PACK_BYTES}, {"jsonl", ZT_PACK_JSONL},
    {"text", ZT_PACK_TEXT_FILES}, {"lines", ZT_PACK_TEXT_LINES}, {"chat", ZT_PACK_CHAT}, {0}};
// the names of zt_chat_train (data/chat.h); the choice is mapped with zt_chat_train_parse
static const zt_flag_choice train_on_choices[] = {
    {"assistant", ZT_CHAT_TRAIN_ASSISTANT}, {"last", ZT_CHAT_TRAIN_LAST}, {"all", ZT_CHAT_TRAIN_ALL}, {0}};
// the names of zt_chat_format (data/chat.h)
static const zt_flag_choice format_choices[] = {{"auto", ZT_CHAT_FORMAT_AUTO},
                                                {"messages", ZT_CHAT_FORMAT_MESSAGES},
                                                {"openai", ZT_CHAT_FORMAT_OPENAI},
                                                {"sharegpt", ZT_CHAT_FORMAT_SHAREGPT},
                                                {0}};

static const zt_flag pack_flags_table[] = {
    {.type = ZT_FLAG_SECTION, .help = "options:"},
    {"input", ZT_FLAG_ENUM, ZT_AT_INT(T, input), "KIND", .def = ZT_PACK_TEXT_IDS, .choices = input_choices,
     .letter = 'i',
     .help = "what INPUT files hold (default {default}):\n"
             "  ids    decimal ids separated by spaces or commas,\n"
             "         one document per non-empty line\n"
             "  u32    raw little-endian uint32 ids, one document per file\n"
             "  bytes  any file, one document per file, token = byte value\n"
             "text, tokenized (see --tokenizer):\n"
             "  jsonl  JSON Lines; the document is member --field of\n"
             "         each line's object (blank lines are ignored)\n"
             "  text   UTF-8 text, one document per file\n"
             "  lines  UTF-8 text, one document per non-empty line\n"
             "  chat   JSON Lines of conversations: member --field of each\n"
             "         line's object is an array of {\"role\": system|user|\n"
             "         assistant|tool, \"content\", \"reasoning_content\"?,\n"
             "         \"tool_calls\"?}, rendered as transformers'\n"
             "         apply_chat_template renders it (the Qwen3\n"
             "         template, or --chat-template)"},
    {"format", ZT_FLAG_ENUM, ZT_AT_INT(T, format), "FORMAT", .def = ZT_CHAT_FORMAT_AUTO, .choices = format_choices,
     .help = "chat: how each line holds its conversation (default {default}:\n"
             "decided per input from its first lines, and said):\n"
             "  messages  {\"messages\": [...], \"tools\"?}: transformers'\n"
             "            apply_chat_template(messages, tools=tools)\n"
             "  openai    OpenAI's fine-tuning JSONL (tool calls with ids,\n"
             "            arguments as JSON strings, tool_call_id, weight)\n"
             "  sharegpt  {\"conversations\": [{\"from\", \"value\"}], \"tools\"?,\n"
             "            \"system\"?} as LLaMA-Factory reads it\n"
             "every format: \"weight\": 0 on an assistant turn trains\n"
             "nothing of it"},
    {"field", ZT_FLAG_STR, ZT_AT_STR(T, field), "NAME",
     .help = "jsonl: the string member holding the text (default text);\n"
             "chat: the array of messages (default messages, sharegpt:\n"
             "conversations)"},
    {"train-on", ZT_FLAG_KEYWORD, ZT_AT_STR(T, train_on), "RULE", .choices = train_on_choices,
     .help = "chat: which tokens are trained targets (default assistant):\n"
             "  assistant  every assistant turn after its\n"
             "             \"<|im_start|>assistant\\n\" header, up to and\n"
             "             including its <|im_end|>\n"
             "  last       only the final assistant turn, the same way\n"
             "  all        every token\n"
             "a turn with \"weight\": 0 trains nothing under any rule\n"
             "assistant and last need each conversation to end with an\n"
             "assistant turn. With --chat-template: the {% generation %}\n"
             "spans; a template without them renders each assistant\n"
             "message's prompt (messages before it, generation prompt on)\n"
             "and prompt + message, as TRL finds a completion, and trains\n"
             "the difference; a conversation where one rendering is not a\n"
             "prefix of the next is refused (counted under --skip-bad)"},
    {"chat-template", ZT_FLAG_STR, ZT_AT_STR(T, chat_template), "FILE",
     .help = "chat: render with this Hugging Face chat template (a .jinja\n"
             "file, or a tokenizer_config.json's \"chat_template\") through\n"
             "zerotrain's Jinja engine, as apply_chat_template renders it\n"
             "(default: --tokenizer DIR's chat_template.jinja when there is\n"
             "one, else the built-in Qwen3 renderer); --train-on assistant\n"
             "and last then train the {% generation %} spans (all of them,\n"
             "the last one), which a template without them cannot give.\n"
             "dataset.json records the template's CRC-32C (chat_template)\n"
             "and, when FILE is not --tokenizer DIR's own template, that\n"
             "one's too (model_chat_template): train accepts the data for a\n"
             "model whose directory holds either, and refuses any other"},
    {"template-var", ZT_FLAG_STR, ZT_AT_STR(T, template_var), "NAME=VALUE[,...]",
     .help = "chat: template variables (enable_thinking=false,\n"
             "add_generation_prompt=true, ...): true/false/none, numbers,\n"
             "JSON, or else a string; default add_generation_prompt=false"},
    {"skip-bad", ZT_FLAG_SET, ZT_AT_INT(T, skip_bad),
     .help = "text: count and skip bad documents (invalid UTF-8, malformed\n"
             "JSON line, missing or non-string field, empty document;\n"
             "chat: a conversation the template or --train-on refuses)\n"
             "instead of stopping at the first one"},
    {"threads", ZT_FLAG_INT, ZT_AT_INT(T, threads), "N", 1, 4096, .letter = 'j',
     .help = "text: tokenizer workers (default: one per core)"},
    {"seq-len", ZT_FLAG_INT, ZT_AT_INT(T, seq_len), "N", 2, 1 << 30, .def = 2048, .letter = 's',
     .help = "tokens per block (default {default}; at least 2, at most 131072:\nQwen3's YaRN range)"},
    {"vocab-size", ZT_FLAG_I64, ZT_AT_I64(T, vocab_size), "V", 1, 1LL << 32, .def = -1, .letter = 'V',
     .help = "every id must be < V; required for ids and u32\n"
             "(bytes: default 257, ids 0..255 plus eos 256; text: the\n"
             "tokenizer's vocabulary, 151669 for Qwen3)"},
    // "none" or an id in [0, 2^32 - 1], checked after parsing (a number or a word)
    {"eos", ZT_FLAG_STR, ZT_AT_STR(T, eos), "ID|none", .letter = 'e',
     .help = "id appended after every document (default: none for ids\n"
             "and u32, 256 for bytes, <|endoftext|> (151643) for text;\n"
             "chat appends none and refuses --eos)"},
    {"per-rank", ZT_FLAG_INT, ZT_AT_INT(T, per_rank), "W", 1, 99999, .letter = 'r',
     .help = "write W files rank-00000.u32 ... dealing documents\n"
             "round-robin, each packed separately (block counts differ\n"
             "per rank: the trainer must stop all ranks at the minimum);\n"
             "default: one file data.u32, blocks dealt by the trainer"},
    {"tokenizer", ZT_FLAG_STR, ZT_AT_STR(T, tokenizer), "ARG", .letter = 't',
     .help = "text: tokenizer.json to use, or a directory holding one\n"
             "(default: the Qwen3 one shipped in assets/); its CRC-32C\n"
             "is recorded in dataset.json (train refuses the data for a\n"
             "model directory whose tokenizer.json differs). chat: without\n"
             "--chat-template, the directory's chat_template.jinja, else the\n"
             "built-in Qwen3 renderer (its tokenizer_config.json must hold\n"
             "the Qwen3 chat_template byte for byte). What loading derives\n"
             "from tokenizer.json is cached (ZT_TOKENIZER_CACHE)\n"
             "ids, u32, bytes: the name recorded (default \"ids\", or\n"
             "\"bytes\" with --input bytes)"},
    {"output", ZT_FLAG_STR, ZT_AT_STR(T, output), "OUT_DIR", .letter = 'o',
     .help = "dataset directory to create; must not hold a dataset.json"},
    {"quiet", ZT_FLAG_SET, ZT_AT_INT(T, quiet), .letter = 'q',
     .help = "no progress lines on stderr (the summary is still printed)"},
    {"mix-tokens", ZT_FLAG_I64, ZT_AT_I64(T, mix_tokens), "N", 1, 1LL << 52,
     .help = "mixture (inputs given as PATH:WEIGHT): its size in tokens\n"
             "(documents and their eos; chat: conversations, padding not\n"
             "counted); an input whose share exceeds its tokens is taken\n"
             "more than once (default: the largest mixture that takes no\n"
             "input more than once)"},
    {"seed", ZT_FLAG_U64, ZT_AT_I64(T, seed), "N", 0, INT64_MAX, .def = 1234,
     .help = "mixture: the seed of the interleave (default {default}); the\n"
             "documents taken do not depend on it"},
    {"verify", ZT_FLAG_STR, ZT_AT_STR(T, verify), "DIR",
     .help = "check an existing dataset instead of packing: dataset.json,\n"
             "file sizes, every crc32c and every token id"},
    {"model-vocab", ZT_FLAG_I64, ZT_AT_I64(T, model_vocab), "V", 1, 1LL << 32,
     .help = "with --verify: check ids against a model's vocab_size V\n"
             "instead of the dataset's own"},
    {0}};
#undef T

static int verify_dataset(const char *dir, long long model_vocab) {
    zt_dataset ds;
    zt_dataset_opts o = {.verify_crc = 1, .check_tokens = 1, .model_vocab = model_vocab};
    double t0 = zt_now();
    if (zt_dataset_open(&ds, dir, &o) != 0) {
        fprintf(stderr, "zerotrain: error: %s\n", zt_errmsg());
        return 1;
    }
    printf("%s: %s v%d, seq_len %d, vocab_size %lld, eos_id %lld, tokenizer \"%s\", %d file%s\n", ds.dir,
           ZT_DATASET_FORMAT, ds.version, ds.seq_len, (long long)ds.vocab_size, (long long)ds.eos_id, ds.tokenizer,
           ds.nfiles, ds.nfiles == 1 ? "" : "s");
    int lo = 0, hi = 0;
    int64_t trained = 0, docs = 0;
    for (int i = 0; i < ds.nfiles; i++) {
        const zt_data_file *f = &ds.files[i];
        printf("  %s: %lld blocks, %lld tokens, %zu bytes, crc32c 0x%08x ok, ids ok", f->name, (long long)f->blocks,
               (long long)f->tokens, f->bytes, f->crc32c);
        if (ds.token_flags) {  // version 2: count the flags
            int64_t t = 0, d = 0;
            for (int64_t k = 0; k < f->tokens; k++) {
                t += !(f->data[k] & ZT_TOK_NO_LOSS);
                d += !!(f->data[k] & ZT_TOK_DOC_START);
            }
            printf(", %lld trained, %lld document starts", (long long)t, (long long)d);
            trained += t, docs += d;
        }
        printf("\n");
        if (f->blocks < ds.files[lo].blocks) lo = i;
        if (f->blocks > ds.files[hi].blocks) hi = i;
    }
    if (ds.token_flags && ds.trained_tokens >= 0 && ds.trained_tokens != trained) {
        fprintf(stderr, "zerotrain: error: %s/dataset.json: trained_tokens %lld, but the blocks hold %lld words "
                        "without the no-loss flag\n",
                ds.dir, (long long)ds.trained_tokens, (long long)trained);
        zt_dataset_close(&ds);
        return 1;
    }
    if (ds.token_flags)
        printf("%s: version 2 words: %lld trained tokens (as dataset.json says), %lld document starts (padding "
               "runs included), documents %s\n",
               ds.dir, (long long)trained, (long long)docs, ds.doc_isolated ? "isolated" : "attend to each other");
    printf("%s: ok: %lld blocks (%lld tokens) checked in %.2f s\n", ds.dir, (long long)ds.total_blocks,
           (long long)ds.total_blocks * ds.seq_len, zt_now() - t0);
    // What `train` would refuse as --eval-data (and what would train nothing as --data).
    int64_t targets = 0;
    for (int i = 0; i < ds.nfiles; i++)
        for (int64_t b = 0; b < ds.files[i].blocks; b++)
            targets += zt_batch_count_targets(zt_dataset_block(&ds, i, b), ds.seq_len, ds.doc_isolated);
    if (ds.total_blocks == 0)
        fprintf(stderr, "zerotrain: warning: %s holds no blocks: train refuses it as --eval-data, and as --data it "
                        "gives no step\n", ds.dir);
    else if (targets == 0)
        fprintf(stderr, "zerotrain: warning: %s: its blocks hold no trained target (every prediction is masked out "
                        "of the loss): train refuses it as --eval-data, and as --data no step would change the "
                        "model\n", ds.dir);
    if (ds.nfiles > 1 && ds.files[lo].blocks != ds.files[hi].blocks)
        printf("%s: uneven: %s has %lld blocks, %s has %lld; a per-rank run must stop every rank after %lld "
               "blocks\n",
               ds.dir, ds.files[lo].name, (long long)ds.files[lo].blocks, ds.files[hi].name,
               (long long)ds.files[hi].blocks, (long long)ds.files[lo].blocks);
    zt_dataset_close(&ds);
    return 0;
}

// A usage error: exit 2 (the table's own errors, and the checks below that need only argv).
#define USAGE_ERROR 2

// An operand PATH:WEIGHT (a mixture's input): 1 and *path/*weight set. 0 for a plain path:
// no number after the last colon, or the name of an existing file (b.jsonl:1 when b.jsonl
// does not exist); *why says which, for the error when the other inputs are weighted. -1 +
// zt_err for a weight that is no positive number, and for an operand that names a file both
// ways (b.jsonl:1 and b.jsonl both exist).
static int split_weight(const char *arg, char **path, double *weight, char *why, size_t nwhy) {
    const char *colon = strrchr(arg, ':');
    const int whole = access(arg, F_OK) == 0;
    if (!colon || colon == arg) {
        snprintf(why, nwhy, "no :WEIGHT");
        return 0;
    }
    char *end;
    errno = 0;
    const double w = strtod(colon + 1, &end);
    if (end == colon + 1 || *end || isspace((unsigned char)colon[1])) {
        snprintf(why, nwhy, "'%s' after the last colon is no number, so the whole is a path", colon + 1);
        return 0;
    }
    char *prefix = strndup(arg, (size_t)(colon - arg));
    const int part = access(prefix, F_OK) == 0;
    if (whole && part) {
        zt_err("'%s' is ambiguous: the file %s exists, and so does %s, which it would weight %s; rename one, or "
               "write %s:WEIGHT to weight the file %s, or spell the weight so that no file bears the name (%s:%s.0)",
               arg, arg, prefix, colon + 1, arg, arg, prefix, colon + 1);
        free(prefix);
        return -1;
    }
    if (whole) {
        snprintf(why, nwhy, "the file %s exists and %s does not, so it is read as a path; write %s:WEIGHT to weight it",
                 arg, prefix, arg);
        free(prefix);
        return 0;
    }
    if (errno == ERANGE || isinf(w)) {
        zt_err("%s: weight %s: out of the range of a double; weights are relative, so scale them all", arg,
               colon + 1);
        free(prefix);
        return -1;
    }
    if (!(w > 0)) {
        zt_err("%s: weight %s: a mixture's weights are positive numbers (leave an input out instead of "
               "weighting it 0)",
               arg, colon + 1);
        free(prefix);
        return -1;
    }
    *path = prefix;
    *weight = w;
    return 1;
}

// The summary lines on stdout (the tests read them).
static void print_summary(const zt_pack_opts *o, const zt_pack_stats *st, const char *out_dir,
                          const char *const *paths) {
    const int chat = o->input == ZT_PACK_CHAT;
    const int text = o->input == ZT_PACK_JSONL || o->input == ZT_PACK_TEXT_FILES || o->input == ZT_PACK_TEXT_LINES;
    const double s = st->seconds > 1e-9 ? st->seconds : 1e-9;
    if (chat) {
        printf("packed %lld conversations (%.1f MB) into %s: %lld tokens (%lld trained under --train-on %s, %lld "
               "padding) -> %lld blocks of %d in %d file%s, %lld conversation%s longer than --seq-len skipped, %.2f s "
               "(%.1f MB/s, %.2fM tok/s)\n",
               (long long)st->documents, (double)st->bytes_in / 1e6, out_dir, (long long)st->tokens,
               (long long)st->trained_tokens, zt_chat_train_name((zt_chat_train)o->train_on),
               (long long)st->padding_tokens, (long long)st->blocks, o->seq_len, st->nfiles, st->nfiles == 1 ? "" : "s",
               (long long)st->conversations_too_long, st->conversations_too_long == 1 ? "" : "s", st->seconds,
               (double)st->bytes_in / 1e6 / s, (double)st->tokens / 1e6 / s);
        printf("%lld bad conversation%s skipped\n", (long long)st->bad_documents, st->bad_documents == 1 ? "" : "s");
    } else {
        printf("packed %lld documents (%.1f MB) into %s: %lld tokens -> %lld blocks of %d in %d file%s, %lld tokens "
               "dropped (each stream's tail shorter than a block), %.2f s (%.1f MB/s, %.2fM tok/s)\n",
               (long long)st->documents, (double)st->bytes_in / 1e6, out_dir, (long long)st->tokens,
               (long long)st->blocks, o->seq_len, st->nfiles, st->nfiles == 1 ? "" : "s",
               (long long)st->dropped_tokens, st->seconds, (double)st->bytes_in / 1e6 / s,
               (double)st->tokens / 1e6 / s);
        if (text)
            printf("%lld bad document%s skipped\n", (long long)st->bad_documents, st->bad_documents == 1 ? "" : "s");
    }
    if (o->weights) {
        printf("mixture of %lld tokens (seed %llu):\n", (long long)st->mix_tokens, (unsigned long long)o->mix_seed);
        for (int i = 0; i < st->ninputs; i++) {
            const zt_pack_input_stats *in = &st->inputs[i];
            printf("  %s: weight %g (share %.4f): %lld of %lld %s taken (%.4f epochs), %lld tokens", paths[i],
                   in->weight, in->share, (long long)in->taken_documents, (long long)in->documents,
                   chat ? "conversations" : "documents", in->epochs, (long long)in->taken_tokens);
            if (chat) printf(", %lld trained", (long long)in->taken_trained);
            printf("\n");
        }
    }
}

// --eos and --train-on into the options. 0, or USAGE_ERROR with the message printed.
static int read_eos_and_rule(const pack_flags *f, zt_pack_opts *o) {
    if (f->eos && strcmp(f->eos, "none")) {
        int64_t v;
        if (zt_arg_i64("--eos", f->eos, 0, (1LL << 32) - 1, &v) != 0) {
            fprintf(stderr, "zerotrain pack: error: %s\n", zt_errmsg());
            return USAGE_ERROR;
        }
        o->eos_id = v;
    }
    if (f->train_on) {
        zt_chat_train rule = ZT_CHAT_TRAIN_ASSISTANT;
        zt_chat_train_parse(f->train_on, &rule);  // one of the table's choices: known
        o->train_on = (int)rule;
    }
    return 0;
}

// Packing (not --verify) needs INPUT operands and -o, and takes no --model-vocab.
static int check_pack_operands(const pack_flags *f, int argc, int first) {
    if (f->model_vocab) {
        fprintf(stderr, "zerotrain: error: --model-vocab only applies with --verify\n");
        return USAGE_ERROR;
    }
    if (first >= argc) {
        fprintf(stderr, "zerotrain: error: no INPUT files given\n\n");
        zt_flags_usage(stderr, pack_flags_table, synopsis, epilog);
        return USAGE_ERROR;
    }
    if (!f->output) {
        fprintf(stderr, "zerotrain: error: no output directory: add -o OUT_DIR\n\n");
        zt_flags_usage(stderr, pack_flags_table, synopsis, epilog);
        return USAGE_ERROR;
    }
    return 0;
}

static void free_inputs(char **paths, int ninputs, double *weights) {
    for (int i = 0; i < ninputs; i++) free(paths[i]);
    free(paths);
    free(weights);
}

// The INPUT operands: plain paths, or PATH:WEIGHT for a mixture (every input weighted or none).
// 0 with *paths and *weights allocated, or USAGE_ERROR with the message printed and nothing held.
static int read_inputs(char **args, int ninputs, const pack_flags *f, int text, char ***paths_out,
                       double **weights_out, int *nweighted_out) {
    char **paths = zt_xcalloc((size_t)ninputs, sizeof *paths);
    double *weights = zt_xcalloc((size_t)ninputs, sizeof *weights);
    char (*why)[512] = zt_xcalloc((size_t)ninputs, sizeof *why);  // why an input has no weight
    int nweighted = 0, bad = 0;
    for (int i = 0; i < ninputs && !bad; i++) {
        const int k = split_weight(args[i], &paths[i], &weights[i], why[i], sizeof why[i]);
        if (k < 0) {
            fprintf(stderr, "zerotrain: error: %s\n", zt_errmsg());
            bad = 1;
        }
        if (k == 0) paths[i] = strdup(args[i]);
        nweighted += k == 1;
    }
    if (!bad && nweighted && nweighted != ninputs) {
        fprintf(stderr, "zerotrain: error: a mixture gives every input a weight (PATH:WEIGHT); %d of the %d inputs "
                        "have none:",
                ninputs - nweighted, ninputs);
        for (int i = 0, k = 0; i < ninputs; i++)
            if (!weights[i]) fprintf(stderr, "%s '%s' (%s)", k++ ? ";" : "", args[i], why[i]);
        fprintf(stderr, "\n");
        bad = 1;
    }
    free(why);
    if (!bad && nweighted && !text) {
        fprintf(stderr, "zerotrain: error: a mixture (PATH:WEIGHT inputs) takes --input jsonl, text, lines or chat\n");
        bad = 1;
    }
    for (int i = 0; i < ninputs && !bad && nweighted; i++)
        if (access(paths[i], F_OK) != 0) {  // named with the operand it came from
            fprintf(stderr, "zerotrain: error: '%s': read as PATH:WEIGHT, %s with weight %g, but %s does not exist "
                            "(nor does a file named %s)\n",
                    args[i], paths[i], weights[i], paths[i], args[i]);
            bad = 1;
        }
    if (!bad && !nweighted && (f->mix_tokens || f->seed != 1234)) {
        fprintf(stderr, "zerotrain: error: --mix-tokens and --seed apply to a mixture: give every input as "
                        "PATH:WEIGHT\n");
        bad = 1;
    }
    if (bad) {
        free_inputs(paths, ninputs, weights);
        return USAGE_ERROR;
    }
    *paths_out = paths, *weights_out = weights, *nweighted_out = nweighted;
    return 0;
}

// The flags that apply to some inputs only. 0, or USAGE_ERROR with the message printed.
static int check_input_flags(const pack_flags *f, const zt_pack_opts *o, int text, int chat, int eos_given) {
    if (!text && (o->field || o->skip_bad || f->threads)) {
        fprintf(stderr, "zerotrain: error: --field, --skip-bad and --threads apply to text input (--input jsonl, "
                        "text, lines or chat)\n");
        return USAGE_ERROR;
    }
    if (o->field && o->input != ZT_PACK_JSONL && !chat) {
        fprintf(stderr, "zerotrain: error: --field only applies to --input jsonl and chat\n");
        return USAGE_ERROR;
    }
    if ((f->chat_template || f->template_var) && !chat) {
        fprintf(stderr, "zerotrain: error: --chat-template and --template-var only apply to --input chat\n");
        return USAGE_ERROR;
    }
    if (f->train_on && !chat) {
        fprintf(stderr, "zerotrain: error: --train-on %s only applies to --input chat (conversations); other inputs "
                        "train every token\n",
                f->train_on);
        return USAGE_ERROR;
    }
    if (chat && eos_given) {
        fprintf(stderr, "zerotrain: error: --eos does not apply to --input chat: no eos is appended, the template "
                        "ends every turn with <|im_end|> and a newline\n");
        return USAGE_ERROR;
    }
    return 0;
}

// Where the tokenizer and the chat template were found (o->chat_template points into it).
typedef struct {
    char tokpath[4096], cfgpath[4096 + 32], tplname[64], jinjapath[4096 + 32], modeltpl[32];
    zt_chat_jinja jinja;  // a Jinja template (o->jinja points here)
} tokenizer_paths;

// chat: a Jinja template from --chat-template or the tokenizer directory's chat_template.jinja.
// 1: loaded (o->jinja set), 0: none (the built-in Qwen3 renderer), -1: refused (printed).
static int setup_jinja(zt_pack_opts *o, tokenizer_paths *tp, const char *file, const char *vars) {
    const char *slash = strrchr(tp->tokpath, '/');
    if (!file) {
        snprintf(tp->jinjapath, sizeof tp->jinjapath, "%.*schat_template.jinja", slash ? (int)(slash - tp->tokpath) + 1 : 0,
                 tp->tokpath);
        if (access(tp->jinjapath, R_OK) != 0) {
            if (vars) {
                fprintf(stderr, "zerotrain: error: --template-var needs a Jinja template (--chat-template FILE, or "
                                "chat_template.jinja beside tokenizer.json); the built-in Qwen3 renderer takes none\n");
                return -1;
            }
            return 0;
        }
        file = tp->jinjapath;
    }
    if (zt_chat_jinja_load(&tp->jinja, file, tp->cfgpath, vars)) {
        fprintf(stderr, "zerotrain: error: %s\n", zt_errmsg());
        return -1;
    }
    o->jinja = &tp->jinja;
    o->chat_template = tp->jinja.name;
    // --chat-template FILE for a tokenizer directory that has its own template (trl's *_training.jinja
    // variant of the model's, say): dataset.json records the directory's too, so that train accepts
    // the data for that model (zt_dataset_check_template)
    char dir[4096], path[4200];
    uint32_t crc;
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - tp->tokpath) : 1, slash ? tp->tokpath : ".");
    const int has = file == tp->jinjapath ? 0 : zt_chat_template_of_dir(dir, &crc, path, sizeof path);
    if (has < 0) {
        fprintf(stderr, "zerotrain: error: %s\n", zt_errmsg());
        zt_chat_jinja_free(&tp->jinja);
        return -1;
    }
    if (has > 0 && crc != tp->jinja.crc) {
        snprintf(tp->modeltpl, sizeof tp->modeltpl, "crc32c:%08x", crc);
        o->model_chat_template = tp->modeltpl;
    }
    return 1;
}

// Text input: the tokenizer (and for chat the template beside it) into the options, and the line
// that names them. 0, or 1 with the message printed.
static int setup_tokenizer(zt_pack_opts *o, tokenizer_paths *tp, int chat, int eos_given, int threads,
                           const pack_flags *f, zt_tokenizer **tok_out) {
    const char *arg = o->tokenizer ? o->tokenizer : ZT_DEFAULT_TOKENIZER;
    size_t al = strlen(arg);
    if (al > 15 && !strcmp(arg + al - 15, "/tokenizer.json")) snprintf(tp->tokpath, sizeof tp->tokpath, "%s", arg);
    else if (al >= 5 && !strcmp(arg + al - 5, ".json")) snprintf(tp->tokpath, sizeof tp->tokpath, "%s", arg);
    else snprintf(tp->tokpath, sizeof tp->tokpath, "%s/tokenizer.json", arg);  // a model directory
    if (chat) {  // the chat template comes from tokenizer_config.json beside tokenizer.json
        const char *slash = strrchr(tp->tokpath, '/');
        snprintf(tp->cfgpath, sizeof tp->cfgpath, "%.*stokenizer_config.json",
                 slash ? (int)(slash - tp->tokpath) + 1 : 0, tp->tokpath);
        const int j = setup_jinja(o, tp, f->chat_template, f->template_var);
        if (j < 0) return 1;
        uint32_t crc;
        if (j == 0 && zt_chat_check_template(tp->cfgpath, &crc)) {
            fprintf(stderr, "zerotrain: error: %s\n  hint: --tokenizer DIR names a directory holding the "
                            "Qwen3 tokenizer.json and tokenizer_config.json\n",
                    zt_errmsg());
            return 1;
        }
        if (j == 0) {
            snprintf(tp->tplname, sizeof tp->tplname, "qwen3 crc32c:%08x", crc);
            o->chat_template = tp->tplname;
        }
    }
    zt_tokenizer *tok = zt_tokenizer_load(tp->tokpath);
    if (!tok) {
        fprintf(stderr, "zerotrain: error: %s\n  hint: --tokenizer PATH names the tokenizer.json (or the "
                        "model directory holding it)\n", zt_errmsg());
        return 1;
    }
    o->tok = tok;
    o->threads = threads;
    o->tokenizer = zt_tokenizer_hash(tok);
    if (o->vocab_size < 0) o->vocab_size = zt_tokenizer_vocab_size(tok);
    if (!eos_given && !chat) o->eos_id = zt_tokenizer_token_id(tok, "<|endoftext|>");
    if (!o->quiet && chat)
        fprintf(stderr, "pack: tokenizer %s (%s, %lld ids), chat template %s, train on %s, %d worker%s\n",
                tp->tokpath, o->tokenizer, (long long)zt_tokenizer_vocab_size(tok), o->chat_template,
                zt_chat_train_name((zt_chat_train)o->train_on), threads > 0 ? threads : omp_get_num_procs(),
                threads == 1 ? "" : "s");
    else if (!o->quiet)
        fprintf(stderr, "pack: tokenizer %s (%s, %lld ids), eos %lld, %d worker%s\n", tp->tokpath, o->tokenizer,
                (long long)zt_tokenizer_vocab_size(tok), (long long)o->eos_id,
                threads > 0 ? threads : omp_get_num_procs(), threads == 1 ? "" : "s");
    *tok_out = tok;
    return 0;
}

// --input bytes, ids or u32: the vocabulary and eos they need. 0, or USAGE_ERROR with the message printed.
static int setup_ids(zt_pack_opts *o, int eos_given) {
    if (o->input == ZT_PACK_BYTES) {
        if (o->vocab_size < 0) o->vocab_size = 257;
        if (!eos_given) {
            o->eos_id = 256;
            if (o->vocab_size <= 256) {
                fprintf(stderr, "zerotrain: error: --input bytes puts eos 256 after each document, which needs "
                                "--vocab-size >= 257; pass --eos none for no separator\n");
                return USAGE_ERROR;
            }
        }
        if (!o->tokenizer) o->tokenizer = "bytes";
    } else {
        if (o->vocab_size < 0) {
            fprintf(stderr, "zerotrain: error: --vocab-size is required with --input %s (ids must be checked "
                            "against the model's vocabulary)\n",
                    o->input == ZT_PACK_U32 ? "u32" : "ids");
            return USAGE_ERROR;
        }
        if (!o->tokenizer) o->tokenizer = "ids";
    }
    return 0;
}

int zt_cmd_pack(int argc, char **argv) {
    pack_flags f;
    int first;
    const int prc = zt_flags_parse_operands("pack", pack_flags_table, &f, argc, argv, synopsis, epilog, &first);
    if (prc) return prc == 1 ? 0 : USAGE_ERROR;
    zt_pack_opts o = {.input = (zt_pack_input)f.input, .seq_len = f.seq_len, .vocab_size = f.vocab_size,
                      .eos_id = -1, .per_rank = f.per_rank, .tokenizer = f.tokenizer, .quiet = f.quiet,
                      .field = f.field, .skip_bad = f.skip_bad};
    const char *out_dir = f.output;
    const int eos_given = f.eos != NULL;
    if (read_eos_and_rule(&f, &o) != 0) return USAGE_ERROR;
    if (f.verify) {
        if (first < argc || out_dir) {
            fprintf(stderr, "zerotrain: error: --verify DIR checks an existing dataset; it takes no INPUT or -o\n");
            return USAGE_ERROR;
        }
        return verify_dataset(f.verify, f.model_vocab);
    }
    if (check_pack_operands(&f, argc, first) != 0) return USAGE_ERROR;
    const int chat = o.input == ZT_PACK_CHAT;
    int text = o.input == ZT_PACK_JSONL || o.input == ZT_PACK_TEXT_FILES || o.input == ZT_PACK_TEXT_LINES || chat;
    if (f.format != ZT_CHAT_FORMAT_AUTO && !chat) {
        fprintf(stderr, "zerotrain: error: --format %s only applies to --input chat\n",
                zt_chat_format_name((zt_chat_format)f.format));
        return USAGE_ERROR;
    }
    o.chat_format = f.format;
    const int ninputs = argc - first;
    char **paths;
    double *weights;
    int nweighted;
    if (read_inputs(argv + first, ninputs, &f, text, &paths, &weights, &nweighted) != 0) return USAGE_ERROR;
    if (nweighted) o.weights = weights, o.mix_tokens = f.mix_tokens, o.mix_seed = f.seed;
    zt_tokenizer *tok = NULL;
    tokenizer_paths tp;
    int rc = check_input_flags(&f, &o, text, chat, eos_given);
    if (rc == 0) rc = text ? setup_tokenizer(&o, &tp, chat, eos_given, f.threads, &f, &tok) : setup_ids(&o, eos_given);
    if (rc != 0) {
        free_inputs(paths, ninputs, weights);
        return rc;
    }

    zt_pack_stats st;
    rc = zt_pack((const char *const *)paths, ninputs, out_dir, &o, &st);
    zt_tokenizer_free(tok);
    if (o.jinja) zt_chat_jinja_free(&tp.jinja);
    if (rc != 0) {
        fprintf(stderr, "zerotrain: error: %s\n", zt_errmsg());
        zt_pack_stats_free(&st);
        free_inputs(paths, ninputs, weights);
        return 1;
    }
    print_summary(&o, &st, out_dir, (const char *const *)paths);
    zt_pack_stats_free(&st);
    free_inputs(paths, ninputs, weights);
    return 0;
}

