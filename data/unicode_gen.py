#!/usr/bin/env python3
"""Generate data/unicode_tables.c: the per-code-point properties the tokenizer needs.

For every Unicode scalar value the table holds
  - the class used by the Qwen split regex: \\p{L}, \\p{N}, \\s without CR/LF, CR/LF,
    or other (Unicode 16.0 general categories and White_Space, which is what the
    Oniguruma inside Hugging Face `tokenizers` uses);
  - whether NFC may start a fresh segment at it (ccc = 0 and NFC_Quick_Check = Yes),
    judged with the normalisation tables of the reference implementation;
  - whether it is a combining mark, \\p{M} (Qwen3.5's split regex joins marks to letters);
  - whether the reference's normaliser does not know it at all (it is newer than
    the reference's Unicode version), so that it must pass through NFC untouched.

Sources: `unicodedata2` 16.0.0 (PyPI) for the Unicode data. When `tokenizers` is
installed (it is where this file was generated) every class and every NFC flag is
checked against what the reference actually does, code point by code point, and
the script stops on any difference. Run from the repository root:
    python3 data/unicode_gen.py > data/unicode_tables.c
"""
import sys

import unicodedata2 as ud

MAXCP = 0x110000
SCALARS = [c for c in range(MAXCP) if not (0xD800 <= c <= 0xDFFF)]
WHITE_SPACE = set([*range(0x09, 0x0E), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B),
                   0x2028, 0x2029, 0x202F, 0x205F, 0x3000])
OTHER, LETTER, NUMBER, SPACE, CRLF = 0, 1, 2, 3, 4
NFC_BOUNDARY, NFC_VERBATIM, MARK = 8, 16, 32


def split_class(cp):
    if cp in (0x0A, 0x0D):
        return CRLF
    if cp in WHITE_SPACE:
        return SPACE
    cat = ud.category(chr(cp))
    if cat[0] == "L":
        return LETTER
    if cat[0] == "N":
        return NUMBER
    return OTHER


def canon_decomp(cp):
    d = ud.decomposition(chr(cp))
    if not d or d.startswith("<"):
        return None
    return [int(x, 16) for x in d.split()]


def nfc16(s):
    return ud.normalize("NFC", s)


def unicode16_nfc_props():
    """ccc, NFC_QC and the primary composites, derived from the 16.0 data."""
    ccc = {}
    pairs = {}  # (first, second) -> composite
    qc_no, qc_maybe = set(), set()
    for cp in SCALARS:
        ch = chr(cp)
        c = ud.combining(ch)
        if c:
            ccc[cp] = c
        d = canon_decomp(cp)
        if d is None:
            continue
        if nfc16(ch) != ch:
            qc_no.add(cp)
        elif len(d) == 2:
            pairs[(d[0], d[1])] = cp
            qc_maybe.add(d[1])
    qc_maybe.update(range(0x1161, 0x1176))  # Hangul V and T jamo compose algorithmically
    qc_maybe.update(range(0x11A8, 0x11C3))
    return ccc, pairs, qc_no, qc_maybe


def nfc_probes(cp):
    """Short strings that expose a code point's NFC properties (decomposition,
    combining class) in any normaliser; the characters around it are old."""
    x = chr(cp)
    return [x, "a" + x + "\u0334", "a\u0345" + x, x + "\u0316", x + "\u0301", "a\u0301" + x + "\u0316",
            ud.normalize("NFD", x)]


def candidates(ccc, pairs, qc_no, qc_maybe):
    firsts = {f for f, _ in pairs}
    return sorted(set(ccc) | qc_no | qc_maybe | firsts | {cp for cp in SCALARS if canon_decomp(cp)})


def emulate_nfc(s, props, normalize):
    """The C algorithm (data/unicode.c: zt_nfc) in Python: copy text between NFC
    boundaries and normalise only the regions that need it, never handing a
    code point the reference does not know to the normaliser."""
    out, i, n = [], 0, len(s)
    last_b = 0  # start of the region a non-boundary would belong to
    while i < n:
        p = props[ord(s[i])]
        if p & NFC_BOUNDARY:
            if p & NFC_VERBATIM:
                out.append(s[last_b:i + 1])
                last_b = i + 1
            else:
                out.append(s[last_b:i])
                last_b = i
            i += 1
            continue
        j = i + 1
        while j < n and not (props[ord(s[j])] & NFC_BOUNDARY):
            j += 1
        out.append(normalize(s[last_b:j]))
        last_b = j
        i = j
    out.append(s[last_b:])
    return "".join(out)


def main():
    ccc, pairs, qc_no, qc_maybe = unicode16_nfc_props()
    props = bytearray(MAXCP)
    for cp in SCALARS:
        b = split_class(cp)
        if ud.category(chr(cp))[0] == "M":  # \p{M}, which Qwen3.5's split regex joins to letters
            b |= MARK
        if cp not in ccc and cp not in qc_no and cp not in qc_maybe:
            b |= NFC_BOUNDARY
        props[cp] = b
    for cp in range(0xD800, 0xE000):
        props[cp] = OTHER | NFC_BOUNDARY  # never reached: text is validated UTF-8

    cand = candidates(ccc, pairs, qc_no, qc_maybe)
    checked = "not checked against tokenizers (not installed)"
    try:
        from tokenizers import Regex, normalizers, pre_tokenizers
    except ImportError:
        Regex = None
    if Regex is not None:
        # 1. the split classes, every scalar value, against the reference's Oniguruma
        joined = "\x00".join(chr(c) for c in SCALARS if c)
        for name, pat, want in [("\\p{L}", r"\p{L}", {LETTER}), ("\\p{N}", r"\p{N}", {NUMBER}),
                                ("\\s", r"\s", {SPACE, CRLF}), ("\\p{M}", r"\p{M}", None)]:
            pieces = pre_tokenizers.Split(Regex(pat), behavior="removed").pre_tokenize_str(joined)
            non = {ord(ch) for piece, _ in pieces for ch in piece}
            for cp in SCALARS:
                if cp == 0:
                    continue
                ours = (props[cp] & 7) in want if want else bool(props[cp] & MARK)
                if ours != (cp not in non):
                    sys.exit("class %s differs from tokenizers at U+%04X" % (name, cp))
        # 2. NFC: code points whose probes the reference leaves alone although Unicode
        #    16.0 changes them are unknown to it; mark them verbatim boundaries.
        hf = normalizers.NFC()
        verbatim = set()
        for cp in cand:
            if cp == 0:
                continue
            for s in nfc_probes(cp):
                if hf.normalize_str(s) != nfc16(s) and hf.normalize_str(s) == s:
                    verbatim.add(cp)
        # A composite the reference does not know: mark its unknown component. The
        # second one is known when the reference composes it with some other first.
        differing = [(f, sec) for (f, sec) in pairs if hf.normalize_str(chr(f) + chr(sec)) != nfc16(chr(f) + chr(sec))]
        known_second = {sec for (f, sec) in pairs if (f, sec) not in set(differing)}
        for f, sec in differing:
            verbatim.add(f if sec in known_second else sec)
        for cp in verbatim:
            props[cp] = (props[cp] & (7 | MARK)) | NFC_BOUNDARY | NFC_VERBATIM
        # 3. the emulation must now agree with the reference on every probe
        nprobe = 0
        for cp in cand:
            if cp == 0:
                continue
            probes = nfc_probes(cp) + [chr(f) + chr(s) for (f, s) in pairs if cp in (f, s)]
            for s in probes:
                nprobe += 1
                got = emulate_nfc(s, props, nfc16)
                if got != hf.normalize_str(s):
                    sys.exit("NFC emulation differs on %r: %r vs %r" % (s, got, hf.normalize_str(s)))
        checked = ("checked against tokenizers: split classes of all %d scalar values but NUL, NFC on %d probes; "
                   "%d code points unknown to its normaliser" % (len(SCALARS) - 1, nprobe, len(verbatim)))
        print(checked, file=sys.stderr)

    # two-stage table: 256-code-point blocks, identical blocks shared
    blocks, index = {}, []
    for hi in range(MAXCP >> 8):
        blk = bytes(props[hi << 8:(hi + 1) << 8])
        if blk not in blocks:
            blocks[blk] = len(blocks)
        index.append(blocks[blk])
    w = sys.stdout.write
    w("// Generated by data/unicode_gen.py from Unicode 16.0 (unicodedata2 %s): do not edit.\n" % ud.unidata_version)
    w("// %s.\n" % checked)
    w("// Per code point: bits 0-2 split class (0 other, 1 \\p{L}, 2 \\p{N}, 3 \\s but not CR/LF, 4 CR/LF),\n")
    w("// bit 3 NFC boundary (ccc 0 and NFC_QC Yes), bit 4 unknown to the reference normaliser, bit 5 \\p{M}.\n")
    w("#include \"data/unicode.h\"\n\n")
    w("const uint16_t zt_uni_stage1[%d] = {\n" % len(index))
    for i in range(0, len(index), 16):
        w("    " + ", ".join(str(x) for x in index[i:i + 16]) + ",\n")
    w("};\n\nconst uint8_t zt_uni_stage2[%d] = {\n" % (len(blocks) * 256))
    for blk in sorted(blocks, key=blocks.get):
        for i in range(0, 256, 32):
            w("    " + ",".join(str(x) for x in blk[i:i + 32]) + ",\n")
    w("};\n")


if __name__ == "__main__":
    main()
