#!/usr/bin/env python3
"""Expected Qwen3 chat renderings, ids and loss masks from Hugging Face transformers,
for tests/unit/test_chat.c (data/chat_template.c renders the template natively in C).

Builds conversations with a fixed seed -- every role, multi-turn, system prompts (first
and later), reasoning_content (and its aliases thinking / reasoning, and null),
<think>...</think> and a bare </think> inside assistant content, empty content, content
starting and ending with newlines, CJK, emoji, combining accents (also at the very start
of a turn), Arabic, the special tokens' text inside user text (<|im_end|>, <|im_start|>,
<think>, <tool_response>, '<|im_end|>' + U+0338 which NFC would compose if it looked
across the added token), tool messages single and consecutive (and first), tool_calls
with string and object arguments (ints, big ints, floats, -0, 1E5-style literals, nested
values, control characters), user turns that are wrapped tool responses (the template's
last_query_index) -- and renders each with

  AutoTokenizer.from_pretrained("assets/qwen3-tokenizer")
  apply_chat_template(messages, tokenize=False)                  -> text
  apply_chat_template(messages, tokenize=True)["input_ids"]      -> ids
  apply_chat_template(messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True,
                      chat_template=<the template with {% generation %} around each assistant
                      turn's trained part>)["assistant_masks"]   -> the "assistant" mask

The generation copy must render byte-identical text (asserted for every conversation).
The "last" mask applies transformers' own overlap rule (the loop of apply_chat_template,
on the token offsets) to the final generation span only; the same loop on all spans is
asserted equal to assistant_masks. Conversations that do not end with an assistant turn
are kept (flag bit 0 clear): the C side must refuse them under assistant/last and train
every token under all.

Writes
  tests/golden/chat/conversations.jsonl   one {"messages": [...]} per line (some lines
                                           hand-written JSON, for number literals)
  tests/golden/chat/expected.bin.gz       "ZTCHAT01", u32 n, then per conversation:
                                           u32 flags (bit 0: ends with an assistant turn),
                                           u32 text_len, text, u32 ntok, u32 ids[ntok],
                                           u8 masks[ntok] (bit 0 assistant, bit 1 last)
all little-endian. Run from the repository root (python 3.11, transformers 5.24, jinja2):
    python3 tests/reference/make_chat_golden.py
"""
import gzip
import json
import math
import random
import struct
import sys

from transformers import AutoTokenizer
from transformers.utils.chat_template_utils import render_jinja_template

TOK_DIR = "assets/qwen3-tokenizer"
OUT_JSONL = "tests/golden/chat/conversations.jsonl"
OUT_BIN = "tests/golden/chat/expected.bin.gz"
SEED = 20260601
N_RANDOM = 2400

rng = random.Random(SEED)

WORDS = """the of and to in is was it for on that with as by at from which but be this are or had
have not were they one their you all has been there more when if its who so said can no up out what
about into only other time new some could these two may first then do any like now over such even most
made after also did many before must through back years where much your way well down should because
each just those people how too little good very make world still own see work long get here between
both life being under never day same another know while last might great old year off come since
against go came right used take three Hello World Qwen sort list reverse count sum answer question""".split()
CJK = "的一是不了人我在有他这为之大来以个中上们到说国和地也子时道出而要于就下得可你年生自会那后能对着事其里所去行过机器学习模型训练数据"
JA = ["こんにちは", "ありがとう", "東京", "日本語", "テスト", "です", "ます"]
KO = ["안녕하세요", "감사합니다", "한국어", "서울", "데이터"]
ARABIC = ["مرحبا", "بالعالم", "اللغة", "العربية", "شكرا", "كتاب", "مدرسة"]
EMOJI = ["😀", "🎉", "👍🏽", "👨‍👩‍👧‍👦", "🇯🇵", "❤️", "🚀", "✨", "🤖"]
COMBINING = ["e\u0301", "a\u0308", "n\u0303", "o\u0302\u0323", "\u0301", "\u0338", "c\u0327", "\u1100\u1161",
             "A\u030a", "u\u0308\u0301", "\u0915\u093c"]
SPECIAL = ["<|im_end|>", "<|im_start|>", "<|im_start|>assistant\n", "<think>", "</think>", "<tool_response>",
           "</tool_response>", "<tool_call>", "</tool_call>", "<|endoftext|>", "<|im_end|>\u0338", "<\u0338",
           "=\u0338", "<|im_", "|>"]
CODE = ["def f(x):\n    return x * 2\n", "for (int i = 0; i < n; i++) {\n\ta[i] = 0;\n}\n", "SELECT * FROM t;",
        "{\"k\": [1, 2]}", "x = [i for i in range(10)]", "printf(\"%d\\n\", v);"]
SPACES = [" ", "  ", "\t", "\n", "\n\n", "\r\n", " \n", "   "]


def word():
    r = rng.random()
    if r < 0.55:
        w = rng.choice(WORDS)
        return w.capitalize() if rng.random() < 0.1 else w
    if r < 0.63:
        return "".join(rng.choice(CJK) for _ in range(rng.randint(1, 6)))
    if r < 0.67:
        return rng.choice(JA + KO)
    if r < 0.71:
        return rng.choice(ARABIC)
    if r < 0.75:
        return rng.choice(EMOJI)
    if r < 0.80:
        return rng.choice(COMBINING)
    if r < 0.84:
        return str(rng.randint(0, 10 ** rng.randint(1, 8)))
    if r < 0.87:
        return rng.choice(CODE)
    if r < 0.90:
        return rng.choice(".,;:!?-()\"'")
    if r < 0.93:
        return rng.choice(SPECIAL)
    if r < 0.95:
        return chr(rng.choice([0x01, 0x07, 0x1B, 0x1F, 0x7F, 0xA0, 0x2028, 0x3000, 0xFEFF]))
    return rng.choice(SPACES)


def text(lo=0, hi=24, specials=True):
    n = rng.randint(lo, hi)
    out = []
    for _ in range(n):
        w = word()
        if not specials and ("<" in w or "|" in w):
            w = rng.choice(WORDS)
        out.append(w)
        out.append(" " if rng.random() < 0.8 else rng.choice(SPACES))
    s = "".join(out).rstrip(" ") if rng.random() < 0.7 else "".join(out)
    r = rng.random()  # newlines at the ends: the template strips some of them
    if r < 0.12:
        s = "\n" * rng.randint(1, 3) + s
    elif r < 0.22:
        s = s + "\n" * rng.randint(1, 3)
    elif r < 0.27:
        s = "\n" + s + "\n\n"
    return s


def value(depth=0):
    r = rng.random()
    if depth > 2 or r < 0.25:
        return text(0, 5)
    if r < 0.40:
        return rng.randint(-1000, 10 ** rng.randint(1, 12))
    if r < 0.55:
        k = rng.random()
        if k < 0.3:
            return rng.random() * 10 ** rng.randint(-8, 20)
        if k < 0.5:
            return round(rng.uniform(-100, 100), rng.randint(0, 4))
        if k < 0.6:
            return float(rng.randint(-10, 10))
        if k < 0.7:
            return -0.0 if rng.random() < 0.5 else 0.0
        if k < 0.8:
            return rng.choice([1e16, 1e15, 1e-4, 1e-5, 123456789.123, 5e-324, 1.7976931348623157e308, 2.0 ** 53,
                               0.1 + 0.2, 1 / 3, 2.5e-7, 9007199254740993.0, 1e22, 1e23])
        return struct.unpack("<d", struct.pack("<Q", rng.getrandbits(63)))[0] if rng.random() < 0.5 else \
            math.ldexp(1.0, rng.randint(-1070, 1020))
    if r < 0.62:
        return rng.choice([True, False, None])
    if r < 0.80:
        return [value(depth + 1) for _ in range(rng.randint(0, 4))]
    return {rng.choice(WORDS) + str(i): value(depth + 1) for i in range(rng.randint(0, 4))}


def finite(v):
    if isinstance(v, float):
        return math.isfinite(v)
    if isinstance(v, list):
        return all(finite(x) for x in v)
    if isinstance(v, dict):
        return all(finite(x) for x in v.values())
    return True


def tool_call():
    name = rng.choice(["get_weather", "search", "calc", "lookup_user", "run_code", "翻译", "f"])
    r = rng.random()
    if r < 0.3:
        args = json.dumps({"q": text(0, 4, specials=False)}, ensure_ascii=rng.random() < 0.5)
    elif r < 0.4:
        args = text(0, 6)  # any string is written as it is
    else:
        args = {rng.choice(WORDS): value() for _ in range(rng.randint(0, 4))}
        while not finite(args):
            args = {rng.choice(WORDS): value() for _ in range(rng.randint(0, 4))}
    call = {"name": name, "arguments": args}
    if rng.random() < 0.6:
        out = {"type": "function", "function": call}
        if rng.random() < 0.1:
            out["id"] = "call_%d" % rng.randint(0, 999)
        return out
    if rng.random() < 0.1:
        call["function"] = None  # null: the template uses the call itself
    return call


def assistant(final):
    m = {"role": "assistant"}
    r = rng.random()
    content = text(0, 30)
    if r < 0.18:
        m["reasoning_content"] = text(0, 20)
    elif r < 0.22:
        m[rng.choice(["thinking", "reasoning"])] = text(0, 10)  # aliases transformers reads
    elif r < 0.25:
        m["reasoning_content"] = None
        content = "<think>" + text(0, 8) + "</think>" + content
    elif r < 0.38:
        content = rng.choice(["", "\n", "\n\n", "<think>\n"]) + "<think>" + text(0, 12) + "</think>" + \
            rng.choice(["", "\n", "\n\n", "\n\n\n"]) + content
    elif r < 0.44:
        content = text(0, 8) + "</think>" + content  # bare </think>
    elif r < 0.47:
        content = text(0, 4) + "</think>" + text(0, 4) + "</think>" + content
    elif r < 0.50:
        content = text(0, 4) + "<think>" + text(0, 4) + "<think>" + text(0, 4) + "</think>" + content
    elif r < 0.56:
        content = ""
    elif r < 0.60:
        content = rng.choice(COMBINING) + content  # NFC at the start of the trained part
    m["content"] = content
    if rng.random() < 0.15:
        m["tool_calls"] = [tool_call() for _ in range(rng.randint(1, 3))]
    elif rng.random() < 0.03:
        m["tool_calls"] = [] if rng.random() < 0.5 else None
    return m


def conversation():
    msgs = []
    r = rng.random()
    if r < 0.5:
        msgs.append({"role": "system", "content": text(0, 16)})
    elif r < 0.53:
        msgs.append({"role": "tool", "content": text(0, 6)})  # a tool message first
    turns = rng.choice([1, 1, 1, 2, 2, 3, 4])
    for t in range(turns):
        if rng.random() < 0.05 and msgs:
            msgs.append({"role": "system", "content": text(0, 6)})  # a later system turn
        if rng.random() < 0.08:
            u = "<tool_response>" + text(0, 6) + "</tool_response>"  # not a query for last_query_index
        else:
            u = text(0, 24)
        msgs.append({"role": "user", "content": u})
        last = t == turns - 1
        if rng.random() < 0.2:  # a tool round trip
            a = assistant(False)
            a["tool_calls"] = [tool_call() for _ in range(rng.randint(1, 2))]
            msgs.append(a)
            for _ in range(rng.choice([1, 1, 2, 3])):
                msgs.append({"role": "tool", "content": text(0, 10)})
            if rng.random() < 0.3:
                msgs.append({"role": "user", "content": "<tool_response>" + text(0, 4) + "</tool_response>"})
        msgs.append(assistant(last))
    r = rng.random()
    if r < 0.05:
        msgs.append({"role": "user", "content": text(0, 10)})  # ends with the user: only --train-on all
    elif r < 0.08:
        msgs.append({"role": "tool", "content": text(0, 5)})
    elif r < 0.10:
        msgs = [m for m in msgs if m["role"] != "user"] or msgs  # no query at all
    return msgs


# Hand-written lines: number literals Python reads as int or float and writes back its way.
HANDWRITTEN = [
    '{"messages": [{"role": "user", "content": "n"}, {"role": "assistant", "content": "", "tool_calls": '
    '[{"function": {"name": "f", "arguments": {"a": -0, "b": 1E5, "c": 2.50, "d": 1e-7, "e": '
    '123456789012345678901234567890, "f": -1.0e+2, "g": 0.000100, "h": 1e400, "i": -1e400, "j": 10E-1}}}]}]}',
    '{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"y","tool_calls":[{"name":"g",'
    '"arguments":[0,-0.0,1.5,[],{},{"k":[true,false,null]},"\\u001f\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00"]}]}]}',
    '{"messages": [{"role": "system", "content": "s"}, {"role": "assistant", "content": "only"}], "id": 7}',
    '{"id": 3, "messages": [{"content": "c first", "role": "user"}, {"content": "ok", "role": "assistant", '
    '"reasoning_content": ""}]}',
]


def gen_template(tpl):
    """The template with {% generation %} around each assistant turn's trained part."""
    a = "{{- '<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content.strip('\\n')"
    b = "{{- '<think>\\n' + reasoning_content.strip('\\n')"
    assert tpl.count(a) == 1
    t = tpl.replace(a, b)
    c = "{{- '<|im_start|>' + message.role + '\\n' + content }}"
    assert t.count(c) == 2
    t = t.replace(c, "{{- content }}")
    d = "        {%- if loop.index0 > ns.last_query_index %}"
    assert t.count(d) == 1
    t = t.replace(d, "        {{- '<|im_start|>' + message.role + '\\n' }}\n        {%- generation %}\n" + d)
    e = "        {{- '<|im_end|>\\n' }}\n    {%- elif message.role == \"tool\" %}"
    assert t.count(e) == 1
    t = t.replace(e, "        {{- '<|im_end|>' }}\n        {%- endgeneration %}\n        {{- '\\n' }}\n"
                  "    {%- elif message.role == \"tool\" %}")
    return t


def overlap_mask(offsets, spans):
    """transformers' apply_chat_template loop: a token is marked iff it overlaps a span."""
    mask = [0] * len(offsets)
    si = 0
    for i, (ts, te) in enumerate(offsets):
        while si < len(spans) and ts >= spans[si][1]:
            si += 1
        if si == len(spans):
            break
        if te > spans[si][0]:
            mask[i] = 1
    return mask


def main():
    tok = AutoTokenizer.from_pretrained(TOK_DIR)
    tpl = tok.chat_template
    gtpl = gen_template(tpl)
    lines = [json.dumps({"messages": conversation()}, ensure_ascii=False) for _ in range(N_RANDOM)]
    lines[100:100] = HANDWRITTEN
    out = [b"ZTCHAT01", struct.pack("<I", len(lines))]
    ntok = nconv_asst = ntrained = nlast = 0
    for k, line in enumerate(lines):
        msgs = json.loads(line)["messages"]
        text_ = tok.apply_chat_template(msgs, tokenize=False)
        gtext = tok.apply_chat_template(msgs, tokenize=False, chat_template=gtpl)
        assert gtext == text_, "generation copy renders differently at conversation %d" % k
        ids = tok.apply_chat_template(msgs, tokenize=True)["input_ids"]
        enc = tok(text_, add_special_tokens=False, return_offsets_mapping=True)
        assert enc["input_ids"] == ids
        ends_asst = msgs[-1]["role"] == "assistant"
        masks = [0] * len(ids)
        if ends_asst:
            r = tok.apply_chat_template(msgs, tokenize=True, return_dict=True, return_assistant_tokens_mask=True,
                                        chat_template=gtpl)
            assert r["input_ids"] == ids
            asst = r["assistant_masks"]
            rendered, gen = render_jinja_template(conversations=[msgs], chat_template=gtpl,
                                                  return_assistant_tokens_mask=True, **tok.special_tokens_map)
            assert rendered[0] == text_
            spans = gen[0]
            assert spans and overlap_mask(enc["offset_mapping"], spans) == asst
            last = overlap_mask(enc["offset_mapping"], spans[-1:])
            masks = [a | (b << 1) for a, b in zip(asst, last)]
            nconv_asst += 1
            ntrained += sum(asst)
            nlast += sum(last)
        ntok += len(ids)
        t = text_.encode("utf-8")
        out += [struct.pack("<II", int(ends_asst), len(t)), t, struct.pack("<I", len(ids)),
                struct.pack("<%dI" % len(ids), *ids), bytes(masks)]
    with open(OUT_JSONL, "w", encoding="utf-8", newline="\n") as f:
        for line in lines:
            f.write(line + "\n")
    with gzip.GzipFile(OUT_BIN, "wb", mtime=0) as f:
        f.write(b"".join(out))
    print("%d conversations (%d end with an assistant turn), %d tokens, %d trained under assistant, %d under last"
          % (len(lines), nconv_asst, ntok, ntrained, nlast), file=sys.stderr)


if __name__ == "__main__":
    main()
