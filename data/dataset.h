// The token dataset directory: dataset.json plus headerless little-endian
// uint32 block files (blocks = bytes / 4 / seq_len), memory-mapped read-only.
// defines: zt_dataset, zt_dataset_open, zt_dataset_block, zt_dataset_read_block, zt_copy_guarded, zt_dataset_close,
//          zt_dataset_check_tokenizer, zt_dataset_check_template
#ifndef ZT_DATASET_H
#define ZT_DATASET_H
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define ZT_DATASET_FORMAT "zerotrain-tokens"
#define ZT_DATASET_VERSION 1       // plain token streams: every word is a bare id, every target trained
#define ZT_DATASET_VERSION_FLAGS 2 // "token_flags": each uint32 word is an id plus the two flag bits below

// Version 2 words (supervised fine-tuning data): bits 0..29 the token id (Qwen3 needs 18),
// bit 30 "this token starts a document", bit 31 "this token is not a trained target"
// (the prediction of it from the token before does not count in the loss). Version 1
// words have both bits clear, so one reader serves both.
#define ZT_TOK_ID_MASK 0x3FFFFFFFu
#define ZT_TOK_DOC_START (1u << 30)
#define ZT_TOK_NO_LOSS (1u << 31)

// The longest block (seq_len, tokens) pack writes and the loader opens: 131,072, Qwen3's YaRN
// range (4 x 32,768 original positions), the length packing, `pack --verify` and loading are
// tested at (tests/data.cmake, pack_long_*). A block is then 512 KiB of words; a document
// position (0 .. seq_len - 1, derived from the DOC_START bits by data/batch.c) fits the int32
// the trainer keeps it in, so the words need no position field.
#define ZT_SEQ_LEN_MAX 131072

typedef struct {
    char name[256];          // file name relative to the dataset directory
    char path[4096];         // full path
    int64_t blocks;          // from dataset.json, verified against the file size
    int64_t tokens;          // blocks * seq_len
    uint32_t crc32c;         // of the whole file, from dataset.json
    const uint32_t *data;    // mmap'd tokens (NULL when blocks == 0)
    size_t bytes;
    int fd, fd_open;         // kept open: the file's identity, size and times are checked on every read
    struct timespec mtime;   // modification time at open
    struct timespec ctime;   // status change time at open: moves on any write, even one whose mtime is restored
    uint64_t dev, ino;       // the file the path named at open (a file renamed over it is another inode)
} zt_data_file;

typedef struct {
    char dir[4096];
    int seq_len;
    int64_t vocab_size;      // from dataset.json
    int64_t eos_id;          // -1 when absent
    char tokenizer[256];     // tokenizer hash / name, "" when absent
    char chat_template[352]; // chat: the template rendered ("jinja FILE crc32c:..." / "qwen3 crc32c:..."), "" when absent
    char model_chat_template[64];  // chat: the --tokenizer directory's own template when pack rendered
                                   // another (--chat-template FILE), "crc32c:...", "" when absent
    int per_rank;            // layout "per-rank": file i (rank-%05d.u32) belongs to rank i
    int version;             // 1: bare ids; 2 (ZT_DATASET_VERSION_FLAGS): words carry document/loss flags
    int token_flags;         // version 2: words are id | ZT_TOK_DOC_START | ZT_TOK_NO_LOSS
    int doc_isolated;        // dataset.json "doc_attention": "isolated" (the trainer's default for this data)
    int64_t trained_tokens;  // version 2: words without ZT_TOK_NO_LOSS, from dataset.json (-1: not recorded)
    int nfiles;
    zt_data_file *files;
    int64_t total_blocks;
    uint32_t json_crc32c;    // CRC-32C of dataset.json's bytes (it records every file's blocks and crc32c)
} zt_dataset;

typedef struct {
    int verify_crc;          // recompute every file's crc32c and compare with dataset.json
    int check_tokens;        // scan every token id and check < model_vocab
    int64_t model_vocab;     // model's vocab_size; 0 = use dataset.json vocab_size
    int part, nparts;        // nparts > 1: crc/token checks only for files with index % nparts == part
                             // (ranks split the work); structure and sizes are always checked
    int json_only;           // read and check dataset.json only: no block file is opened or mapped (the
                             // dataset's description and json_crc32c, for comparing ranks at start)
} zt_dataset_opts;

// Open and validate. Errors (returned as -1 with zt_err) name the file and the
// rule: missing/corrupt dataset.json, size not a multiple of 4*seq_len, block
// count differing from dataset.json, crc mismatch, token id >= vocab (with file,
// block index and position inside the block).
int zt_dataset_open(zt_dataset *ds, const char *dir, const zt_dataset_opts *opts);
// Pointer to seq_len tokens of block `block` of file `file` (the mapping itself: a file
// truncated meanwhile faults on access; training reads through zt_dataset_read_block).
const uint32_t *zt_dataset_block(const zt_dataset *ds, int file, int64_t block);
// Copies block `block` of file `file` (seq_len words) into dst, safely against the file
// changing underneath: its size, modification time and status change time (ctime: a write
// whose mtime was restored with `touch -r` or `rsync --inplace -t` still moves it) are compared
// with those at open before and after the copy (ctime also moves when the file is removed or
// renamed over: then the message says whether the path is gone or names another inode); a
// SIGBUS inside the copy (the file truncated under the mapping) is caught; and every copied id must be
// below dataset.json's vocab_size (a change no file time shows). -1 + zt_err naming the
// file, the block and what changed ("the file changed while training (...)").
int zt_dataset_read_block(const zt_dataset *ds, int file, int64_t block, uint32_t *dst);
// memcpy from a mapping that may have lost its pages (the file truncated): 0, or -1 when the
// copy faulted with SIGBUS (caught; dst then holds a partial copy).
int zt_copy_guarded(void *dst, const void *src, size_t n);
// 0 when file `file` is still the one opened, with its size and times of open; -1 + zt_err.
int zt_dataset_check_unchanged(const zt_dataset *ds, int file);
void zt_dataset_close(zt_dataset *ds);
// dataset.json's seq_len without opening the dataset (the start-up checks that need the block
// length before the data is opened and validated): 0 when the file does not read or names none
// (zt_err cleared: zt_dataset_open reports it where the data is opened).
int64_t zt_dataset_peek_seq_len(const char *dir);
// The tokenizer the dataset was packed with (dataset.json "tokenizer", a "crc32c:..." digest of
// the tokenizer.json bytes) against the model directory's tokenizer.json: 0 when they agree or
// there is nothing to compare (model_dir NULL or not a directory, no tokenizer.json in it, a
// dataset of ids or bytes); -1 + zt_err naming both digests and both paths when they differ.
// Qwen3 ids fit inside Qwen3.5's vocabulary, so without this such a run trains on wrong tokens.
// Then the chat template (zt_dataset_check_template): one call checks both.
int zt_dataset_check_tokenizer(const zt_dataset *ds, const char *data_dir, const char *model_dir);
// The chat template a chat dataset was rendered with (dataset.json "chat_template", its crc32c:
// digest of the template text) against the model directory's template (chat_template.jinja, else
// tokenizer_config.json's chat_template: zt_chat_template_of_dir): 0 when the model's equals the
// rendered one or the one pack recorded as the tokenizer directory's own ("model_chat_template":
// a variant such as trl's *_training.jinja packed deliberately for that model), or when there is
// nothing to compare (no model_dir, no template there, a dataset without "chat_template"); -1 +
// zt_err naming both digests otherwise (docs/formats.md, "chat_template").
int zt_dataset_check_template(const zt_dataset *ds, const char *data_dir, const char *model_dir);

// ---- pack: token ids -> dataset directory ----
typedef enum {
    ZT_PACK_U32 = 0,
    ZT_PACK_TEXT_IDS = 1,
    ZT_PACK_BYTES = 2,
    // the text kinds, tokenized with opts.tok (data/pack_text.c):
    ZT_PACK_JSONL = 3,       // JSON Lines: the document is the string member opts.field of each line's object
    ZT_PACK_TEXT_FILES = 4,  // UTF-8 text, each file one document
    ZT_PACK_TEXT_LINES = 5,  // UTF-8 text, each non-empty line one document (without its \n or \r\n)
    ZT_PACK_CHAT = 6,        // JSON Lines of conversations (member opts.field, default "messages"), rendered
                             // with the Qwen3 chat template (data/chat_template.c): version 2 words with loss masks
} zt_pack_input;

struct zt_tokenizer;  // data/tokenizer.h

typedef struct {
    zt_pack_input input;     // u32: raw little-endian uint32 ids; text-ids: whitespace-separated
                             // decimal ids (or comma-separated), one document per non-empty line; bytes: each input file is a
                             // document of UTF-8 bytes, token = byte value (0..255)
    int seq_len;             // default 2048
    int64_t vocab_size;      // ids must be < vocab_size
    int64_t eos_id;          // inserted after every document when >= 0
    int per_rank;            // 0: one file "data.u32"; W > 0: files rank-00000.u32 ... (documents dealt
                             // round-robin by row, each rank packed separately: uneven block counts)
    const char *tokenizer;   // recorded in dataset.json ("bytes", "ids", or a tokenizer hash)
    int quiet;
    // text kinds only (jsonl, text files, lines, chat):
    const struct zt_tokenizer *tok;  // required; vocab_size must be >= its vocabulary
    const char *field;       // jsonl member holding the document (NULL: "text"); chat: the messages (NULL: "messages")
    int skip_bad;            // count and skip bad documents (invalid UTF-8, malformed JSON line,
                             // missing or non-string field, empty document) instead of failing
    int threads;             // tokenizer workers; <= 0: one per core
    // chat only: no eos (each turn ends with <|im_end|>\n); a conversation never straddles two
    // blocks (the rest of a block it does not fit in is padded), one longer than seq_len is skipped
    int train_on;            // zt_chat_train (data/chat.h): which tokens are trained targets
    const char *chat_template;  // recorded in dataset.json: "qwen3 crc32c:xxxxxxxx" or "jinja FILE crc32c:xxxxxxxx"
    const char *model_chat_template;  // recorded in dataset.json when set: "crc32c:xxxxxxxx", the --tokenizer
                                      // directory's own template where --chat-template rendered another
    const struct zt_chat_jinja_t *jinja;  // chat: a Jinja template (data/chat_jinja.h) instead of the built-in
                                          // Qwen3 renderer (NULL: the built-in one)
    int chat_format;         // zt_chat_format (data/chat.h): how lines hold conversations; 0 (auto): decided
                             // per input from its first lines (zt_chat_detect)
    // a mixture (text kinds and chat; data/pack.c): weights[i] > 0 for every input turns the pack
    // into a seeded interleave of the inputs, each taking weights[i] / sum of the mixture's tokens
    const double *weights;   // NULL: no mixture, every document of every input once, in order
    int64_t mix_tokens;      // the mixture's tokens (documents, eos included); 0: the largest that takes no
                             // input more than once
    uint64_t mix_seed;       // the interleave's order (which documents are taken does not depend on it)
} zt_pack_opts;

// One input of a chat pack or a mixture: what it gave and, in a mixture, what was taken of it.
typedef struct {
    int chat_format;          // chat: the zt_chat_format it was read as
    char format_from[128];    // chat: "--format", or what the detection saw ("line 1: ...")
    int64_t documents;        // documents (conversations) it gave: packed, or in a mixture available
    int64_t tokens;           // their tokens (text: eos included)
    int64_t trained;          // chat: their trained tokens
    int64_t bad_documents;    // skipped as bad (skip_bad)
    int64_t too_long;         // chat: longer than seq_len, skipped
    double weight, share;     // mixture: as given, and normalised to sum 1
    int64_t taken_documents, taken_tokens, taken_trained;  // mixture: what the interleave holds
    double epochs;            // mixture: taken_tokens / tokens
} zt_pack_input_stats;

typedef struct {
    int64_t documents;       // non-empty documents (chat: conversations) packed
    int64_t tokens;          // tokens produced, eos (chat: padding) included: blocks * seq_len + dropped_tokens
    int64_t blocks;          // over all output files
    int64_t dropped_tokens;  // each output stream's tail shorter than one block
    int64_t bytes_in;        // input bytes read
    int64_t bad_documents;   // text kinds with skip_bad: documents skipped as bad
    int64_t conversations_too_long;  // chat: longer than seq_len, skipped
    int64_t trained_tokens;  // chat: words without ZT_TOK_NO_LOSS
    int64_t padding_tokens;  // chat: padding words (<|endoftext|>, NO_LOSS) filling blocks
    int nfiles;              // block files written
    double seconds;
    zt_pack_input_stats *inputs;  // chat packs and mixtures: one per input (malloc'd; zt_pack_stats_free)
    int ninputs;
    int64_t mix_tokens;      // mixture: the size used (opts.mix_tokens or the default)
} zt_pack_stats;

// Pack the given input files into out_dir (created; must not already hold a dataset.json).
int zt_pack(const char *const *inputs, int ninputs, const char *out_dir, const zt_pack_opts *opts,
            zt_pack_stats *stats);
void zt_pack_stats_free(zt_pack_stats *stats);

#endif
