#!/usr/bin/env python3
"""Expected Qwen3 token ids from Hugging Face `tokenizers`, for tests/unit/test_tokenizer.c.

Builds a corpus with a fixed seed -- English, Chinese, Korean, Japanese, code,
emoji, mixed scripts, long whitespace runs, CR LF, contractions, digits, the added
tokens inside text, random bytes made valid UTF-8, random code points from every
plane, text that NFC changes -- plus short probes aimed at each rule of the split
regex and of NFC, encodes all of it with `tokenizers` and the shipped
tokenizer.json, and writes tests/data/tokenizer/golden.bin.gz:

  "ZTTOKGD1", u32 ndocs, then per document
  u32 text_len, text bytes, u32 nids, u32 ids[nids],
  u32 decoded_len (0xFFFFFFFF when decode(ids) == text), decoded bytes
all little-endian, gzip-compressed. Needs: tokenizers (PyPI), unicodedata2 16.0
(PyPI, for the NFC probes). Run from the repository root:
    python3 tests/reference/make_tokenizer_golden.py
"""
import gzip
import random
import struct
import sys

import unicodedata2 as ud
from tokenizers import Tokenizer

TOKENIZER = "assets/qwen3-tokenizer/tokenizer.json"
OUT = "tests/data/tokenizer/golden.bin.gz"
SEED = 20260517
N_CORPUS = 10000

ENGLISH = """the of and to in is was it for on that with as by at he his from which but be this are
or had have not were they an one their you all has been there we more her she would when if its who so
said can no up out what about into only other time new some could these two may first then do any like
my now over such our man me even most made after also did many before must through back years where much
your way well down should because each just those people how too little state good very make world still
own see men work long get here between both life being under never day same another know while last might
us great old year off come since against go came right used take three Hello World OpenAI Qwen Tokenizer
I'm you're we've they'll she'd it's don't can't won't isn't LET'S IT'S You'Re WE'VE THEY'LL I'D Ma'am
o'clock rock'n'roll 'quoted' 'twas y'all""".split()
PUNCT = list(".,;:!?-()[]{}\"'/\\@#$%^&*_+=<>|~`") + ["...", "--", "—", "–", "…", "“", "”", "‘", "’", "«", "»"]
CHINESE = ("的一是不了人我在有他这为之大来以个中上们到说国和地也子时道出而要于就下得可你年生自会那后能对着事其里所去行过"
           "家十用发天如然作方成者多日都三小军二无同么经法当起与好看学进种将还分此心前面又定见只主没公从知机器人工智能"
           "深度学习模型训练数据语言处理自然计算")
CJK_PUNCT = "，。、；：？！「」『』（）《》【】…—"
HIRAGANA = "".join(chr(c) for c in range(0x3041, 0x3097))
KATAKANA = "".join(chr(c) for c in range(0x30A1, 0x30FB)) + "ー"
KANJI = "日本語東京大学研究所言語処理自然学習機械深層生成文章"
JA_WORDS = ["こんにちは", "ありがとう", "トークナイザー", "東京", "日本語", "テスト", "です", "ます", "しました", "ＡＢＣ", "ｶﾀｶﾅ"]
KOREAN_WORDS = ["안녕하세요", "감사합니다", "한국어", "토크나이저", "서울", "데이터", "학습", "모델", "입니다", "했습니다"]
CODE = [
    "int main(int argc, char **argv) {\n    printf(\"%d\\n\", argc);\n    return 0;\n}\n",
    "def f(x):\n\tif x > 0:\n\t\treturn x ** 2  # square\n\treturn -x\n",
    "for (size_t i = 0; i < n; i++) { a[i] += b[i] * 3.14159f; }\r\n",
    "const x = await fetch(`https://example.com/api?q=${q}&n=10`);\n",
    "<div class=\"row\"><span id='a1'>&nbsp;Hello&amp;bye</span></div>\n",
    "{\"key\": [1, 2.5e-3, null, true], \"nested\": {\"k\": \"v\\u00e9\"}}\n",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;\n",
    "    x = [i for i in range(100) if i % 3 == 0]\n        \n\n",
    "#include <stdio.h>\n#define MAX(a,b) ((a)>(b)?(a):(b))\n",
    "fn main() -> Result<(), Box<dyn Error>> { let v: Vec<u32> = vec![1,2,3]; Ok(()) }\n",
    "$ ls -la /usr/lib | grep -E '^d' && echo \"done\" 2>&1 >/dev/null\n",
    "0x7fffffff 0b1010 1e10 3.0e-8 -42 +7 1,234,567.89 2026-05-17T12:34:56Z\n",
]
EMOJI = ["😀", "🎉", "👍", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇺🇸", "🇯🇵", "❤️", "✨", "🔥", "🤖", "🧑‍💻", "☺︎", "🫠", "🦀",
         "1️⃣", "©", "™", "🈚", "🀄"]
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>",
            "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|vision_pad|>", "<|file_sep|>", "<|repo_name|>",
            "<|endoftext", "<|im_", "endoftext|>", "<think", "<|", "|>", "<>", "<<|im_end|>>"]
NFC_CHANGES = ["e\u0301", "A\u030A", "\u1100\u1161\u11A8", "\u212B", "\u2126", "o\u0308\u0304", "a\u0328\u0301",
               "\u0958", "\uFB01", "q\u0307\u0323", "\u1E9B\u0323", "\u00C5", "\u0041\u0301\u0316", "\u3131",
               "\u0CC6\u0CC2\u0CD5", "\u0B47\u0B3E", "\u1026\u102E", "\uAC00\u11A8", "\u0344", "\u0F73"]
WS = [" ", "  ", "\t", "\n", "\r\n", "\r", "\n\n", " \n", "\u00A0", "\u3000", "\u2003", "\u0085", "\u2028", "\x0b",
      "\x0c", "   \t  ", "\n   ", " \r\n \r\n"]


def rand_scalar(rng):
    plane = rng.random()
    if plane < 0.5:
        cp = rng.randrange(0x80, 0x3000)
    elif plane < 0.8:
        cp = rng.randrange(0x3000, 0x10000)
    elif plane < 0.95:
        cp = rng.randrange(0x10000, 0x20000)
    else:
        cp = rng.randrange(0x20000, 0x110000)
    if 0xD800 <= cp <= 0xDFFF:
        cp = 0xFFFD
    return chr(cp)


def english(rng, n):
    out = []
    for i in range(n):
        w = rng.choice(ENGLISH)
        if rng.random() < 0.1:
            w = w.capitalize()
        elif rng.random() < 0.03:
            w = w.upper()
        out.append(w)
        r = rng.random()
        if r < 0.08:
            out.append(rng.choice([".", ",", "!", "?", ";", ":"]))
        if r < 0.02:
            out.append(rng.choice(["\n", "\n\n", "\r\n"]))
        out.append(" " if rng.random() < 0.95 else rng.choice(WS))
    return "".join(out)


def piece(rng, kind):
    if kind == "en":
        return english(rng, rng.randint(1, 60))
    if kind == "zh":
        return "".join(rng.choice(CHINESE) if rng.random() < 0.9 else rng.choice(CJK_PUNCT) for _ in range(rng.randint(1, 80)))
    if kind == "ja":
        pools = [HIRAGANA, KATAKANA, KANJI]
        s = "".join(rng.choice(rng.choice(pools)) for _ in range(rng.randint(1, 40)))
        return s + "".join(rng.choice(JA_WORDS) for _ in range(rng.randint(0, 5))) + rng.choice(["。", "、", "！", ""])
    if kind == "ko":
        return " ".join(rng.choice(KOREAN_WORDS) for _ in range(rng.randint(1, 15))) + rng.choice([".", "?", "!", ""])
    if kind == "hangul":
        return "".join(chr(rng.randrange(0xAC00, 0xD7A4)) for _ in range(rng.randint(1, 20)))
    if kind == "code":
        return "".join(rng.choice(CODE) for _ in range(rng.randint(1, 4)))
    if kind == "emoji":
        return "".join(rng.choice(EMOJI) + rng.choice(["", " ", "", "!"]) for _ in range(rng.randint(1, 12)))
    if kind == "ws":
        return "".join(rng.choice(WS) for _ in range(rng.randint(1, 8))) * rng.randint(1, 20)
    if kind == "digits":
        return " ".join(str(rng.randrange(10 ** rng.randint(1, 15))) for _ in range(rng.randint(1, 10))) + rng.choice(
            ["", "١٢٣", "٣.١٤", "²³", "½", "Ⅻ", "߀߁", "𝟙𝟚"])
    if kind == "special":
        return rng.choice(SPECIALS)
    if kind == "contraction":
        return rng.choice(["'s", "'S", "'t", "'T", "'re", "'RE", "'rE", "'ve", "'Ve", "'m", "'M", "'ll", "'LL", "'lL",
                           "'d", "'D", "'ſ", "'x", "'", "''", "'l", "'r", "'v", "'1", "' s"]) + rng.choice(["", "a", " ", "s", "\n"])
    if kind == "nfc":
        return "".join(rng.choice(NFC_CHANGES) for _ in range(rng.randint(1, 6)))
    if kind == "randbytes":
        raw = bytes(rng.randrange(256) for _ in range(rng.randint(1, 200)))
        return raw.decode("utf-8", errors=rng.choice(["replace", "ignore"]))
    if kind == "randcp":
        return "".join(rand_scalar(rng) for _ in range(rng.randint(1, 50)))
    if kind == "longword":
        unit = rng.choice(["a", "ab", "abc", "xyz", "ー", "😀", "==", "0", " ", "\n", "aé", "的"])
        return unit * rng.randint(50, 2000)
    if kind == "base64":
        alpha = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
        return "".join(rng.choice(alpha) for _ in range(rng.randint(100, 4000))) + "=="
    if kind == "mixed":
        return "".join(rng.choice([rng.choice(ENGLISH), rng.choice(CHINESE), rng.choice(KOREAN_WORDS), rng.choice(EMOJI),
                                   rng.choice(JA_WORDS), "Привет", "мир", "Γειά", "σου", "שלום", "مرحبا", "नमस्ते", "สวัสดี",
                                   "Tiếng Việt", "ǅemal", "ŉ", "İstanbul", "ß", "ﬀ"]) + rng.choice(["", " ", "-", ",", "\t"])
                       for _ in range(rng.randint(1, 30)))
    raise ValueError(kind)


KINDS = ["en"] * 8 + ["zh"] * 3 + ["ja"] * 2 + ["ko"] * 2 + ["hangul", "code", "code", "emoji", "emoji", "ws", "ws",
         "digits", "digits", "special", "special", "contraction", "contraction", "nfc", "randbytes", "randcp", "mixed",
         "mixed"]


def corpus_doc(rng, i):
    if i % 500 == 499:  # a few long single-kind documents (long words, base64, long runs)
        return piece(rng, rng.choice(["longword", "base64", "ws", "en"]))
    n = rng.choice([1, 1, 1, 2, 2, 3, 4, 6])
    return "".join(piece(rng, rng.choice(KINDS)) for _ in range(n))


def regex_probes():
    """Every pair and many triples of characters from each class of the regex."""
    reps = ["a", "Z", "é", "中", "ſ", "s", "S", "t", "l", "L", "r", "e", "v", "m", "d", "1", "٣", "½", " ", "\t", "\n",
            "\r", "\u00A0", "\u3000", "\u0085", "'", "!", ".", "<", "😀", "\u0301", "\x00", "\u180E", "\u2028", "_"]
    out = []
    for x in reps:
        for y in reps:
            out.append(x + y)
            for z in ["a", " ", "\n", "'", "1", "!"]:
                out.append(x + y + z)
    return out


def nfc_probes():
    """The probes of data/unicode_gen.py: each code point that NFC can touch, alone,
    around combining marks of several classes, and every canonical composition pair."""
    out = []
    pairs = []
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF or cp == 0:
            continue
        ch = chr(cp)
        d = ud.decomposition(ch)
        canon = d and not d.startswith("<")
        if not (ud.combining(ch) or canon):
            continue
        out += [ch, "a" + ch + "\u0334", "a\u0345" + ch, ch + "\u0316", "a\u0301" + ch + "\u0316", ud.normalize("NFD", ch)]
        if canon and len(d.split()) == 2:
            pairs.append("".join(chr(int(x, 16)) for x in d.split()))
    return out + pairs


def main():
    tok = Tokenizer.from_file(TOKENIZER)
    rng = random.Random(SEED)
    docs = [corpus_doc(rng, i) for i in range(N_CORPUS)]
    docs += ["", " ", "\n", "<|endoftext|>", "<|endoftext|><|endoftext|>", "a<|im_start|>b", "\r\n\r\n", "'s", "x" * 20000]
    docs += regex_probes()
    docs += nfc_probes()
    encs = tok.encode_batch(docs, add_special_tokens=False)
    body = bytearray(b"ZTTOKGD1")
    body += struct.pack("<I", len(docs))
    ntok = nchanged = 0
    for text, enc in zip(docs, encs):
        t = text.encode("utf-8")
        ids = enc.ids
        ntok += len(ids)
        dec = tok.decode(ids, skip_special_tokens=False).encode("utf-8")
        body += struct.pack("<I", len(t)) + t + struct.pack("<I", len(ids)) + struct.pack("<%dI" % len(ids), *ids)
        if dec == t:
            body += struct.pack("<I", 0xFFFFFFFF)
        else:
            nchanged += 1
            body += struct.pack("<I", len(dec)) + dec
    with open(OUT, "wb") as f:
        f.write(gzip.compress(bytes(body), compresslevel=9, mtime=0))
    print("%d documents (%d corpus, %d probes), %d tokens, %d whose decode differs from the text (NFC), "
          "%.1f MB raw" % (len(docs), N_CORPUS, len(docs) - N_CORPUS, ntok, nchanged, len(body) / 1e6), file=sys.stderr)


if __name__ == "__main__":
    main()
