#!/usr/bin/env python3
"""Goldens for zerotrain's Jinja engine (data/jinja*.c): every chat template of trl==1.16.0
(tests/golden/chat_templates/templates/), and the handwritten ones of extra/, rendered by
transformers' apply_chat_template on the
conversations of corpus.jsonl (written here), with the Qwen3 tokenizer of assets/qwen3-tokenizer
(its special tokens are the bos_token/eos_token/... variables a tokenizer passes).

Writes tests/golden/chat_templates/corpus.jsonl (one case a line: messages, tools, vars) and
expected.jsonl.gz: one line per template x case, {"t": file, "c": case, "text": rendered} or
{"t", "c", "error": message} when the template raises; "spans": the {% generation %} byte spans
(transformers' character indices turned into UTF-8 byte offsets); "ids": the Qwen3 ids of the text
(tokenize=True); "mask": return_assistant_tokens_mask where the template has generation blocks.
strftime_now is fixed at 2026-12-07 12:00:00 (the C side is given the same time).

    python3 tests/reference/make_chat_templates_golden.py   (transformers 5.25.0, jinja2 3.1.6)
"""
import datetime, gzip, json, os, re, sys

from transformers import AutoTokenizer
from transformers.utils import chat_template_utils as ctu

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
GOLD = os.path.join(ROOT, "tests", "golden", "chat_templates")
FIXED_NOW = datetime.datetime(2026, 12, 7, 12, 0, 0)

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the weather — in °C or °F",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name, e.g. Zürich or 東京"},
        "days": {"type": "integer", "description": "How many days", "minimum": 1, "maximum": 14},
        "scale": {"type": "number", "default": 1.5},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "hourly": {"type": "boolean", "default": False},
        "extra": {"type": "null"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "where": {"type": "object", "properties": {"lat": {"type": "number"}, "lon": {"type": "number"},
                                                   "meta": {"type": "object", "properties": {"src": {"type": "string"}}}},
                  "required": ["lat", "lon"]}},
        "required": ["city"]}}}
SEARCH = {"type": "function", "function": {
    "name": "search", "description": "Search the web",
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}

CALL = {"type": "function", "function": {"name": "get_weather", "arguments": {
    "city": "Zürich", "days": 3, "scale": 2.0, "hourly": True, "extra": None, "tags": ["a", "ü"],
    "where": {"lat": 47.37, "lon": 8.54, "meta": {"src": "gps \"quoted\""}}}}}

CASES = [
    {"messages": [{"role": "user", "content": "Hello!"}, {"role": "assistant", "content": "Hi there. How can I help?"}]},
    {"messages": [{"role": "system", "content": "You are a helpful assistant."},
                  {"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4."},
                  {"role": "user", "content": "And 3*3?"}, {"role": "assistant", "content": "9, of course.\n"}]},
    {"messages": [{"role": "user", "content": "Think first: 17*3?"},
                  {"role": "assistant", "content": "51", "reasoning_content": "17*3 = 51, check: 50+1."}]},
    {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hi"},
                  {"role": "assistant", "content": "hi", "reasoning_content": "short"},
                  {"role": "user", "content": "again"},
                  {"role": "assistant", "content": "<think>\ninline\n</think>\n\nhi again"}],
     "vars": {"enable_thinking": False}},
    {"messages": [{"role": "user", "content": "Weather in Zürich?"},
                  {"role": "assistant", "content": "", "tool_calls": [CALL]},
                  {"role": "tool", "name": "get_weather", "content": "{\"temp\": 21, \"sky\": \"☀\"}"},
                  {"role": "assistant", "content": "It is 21 °C and sunny."}],
     "tools": [WEATHER, SEARCH]},
    {"messages": [{"role": "system", "content": "Use tools."}, {"role": "user", "content": "Search cats then weather"},
                  {"role": "assistant", "content": "Let me look.", "tool_calls": [
                      {"type": "function", "function": {"name": "search", "arguments": {"q": "cats"}}},
                      {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo", "days": 1}}}]},
                  {"role": "tool", "name": "search", "content": "cats are mammals"},
                  {"role": "tool", "name": "get_weather", "content": "cold"},
                  {"role": "assistant", "content": "Cats are mammals; Oslo is cold."}],
     "tools": [SEARCH, WEATHER]},
    {"messages": [{"role": "user", "content": [{"type": "text", "text": "Part one."}, {"type": "text", "text": "Part two."}]},
                  {"role": "assistant", "content": [{"type": "text", "text": "Both parts read."}]}]},
    {"messages": [{"role": "user", "content": "Jinja: {{ x }} and {% if y %} and {# c #} and {%- raw -%} '\"\\"},
                  {"role": "assistant", "content": "Literal {{ }} {% endif %} #} stays."}]},
    {"messages": [{"role": "user", "content": "  spaces around  \n\n"}, {"role": "assistant", "content": "\n trimmed? \n"}],
     "vars": {"add_generation_prompt": False}},
    {"messages": [{"role": "system", "content": "Sys"}, {"role": "user", "content": "Prompt only"}],
     "vars": {"add_generation_prompt": True}},
    {"messages": [{"role": "user", "content": "Prompt, no thinking"}],
     "vars": {"add_generation_prompt": True, "enable_thinking": False}},
    {"messages": [{"role": "user", "content": "Unicode: naïve café, 日本語, emoji 🎉, RTL שלום"},
                  {"role": "assistant", "content": "Ñandú — ✓ 🎉"}]},
    {"messages": [{"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1", "reasoning_content": "r1"},
                  {"role": "user", "content": "q2"},
                  {"role": "assistant", "content": "", "reasoning_content": "r2", "tool_calls": [
                      {"type": "function", "function": {"name": "search", "arguments": {"q": "x y"}}}]},
                  {"role": "tool", "content": "result x"},
                  {"role": "assistant", "content": "a2", "reasoning_content": "r3"}],
     "tools": [SEARCH]},
    {"messages": [{"role": "assistant", "content": "I start."}, {"role": "user", "content": "ok"}]},
    {"messages": [{"role": "user", "content": "Call with string args"},
                  {"role": "assistant", "content": "", "tool_calls": [
                      {"type": "function", "function": {"name": "search", "arguments": "{\"q\": \"raw string\"}"}}]},
                  {"role": "tool", "content": "done"}, {"role": "assistant", "content": "Done."}],
     "tools": [SEARCH]},
    {"messages": [{"role": "system", "content": [{"type": "text", "text": "System as parts"}]},
                  {"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}],
     "vars": {"enable_thinking": True, "add_generation_prompt": False}},
]


def main():
    tok = AutoTokenizer.from_pretrained(os.path.join(ROOT, "assets", "qwen3-tokenizer"))
    names = sorted(f for f in os.listdir(os.path.join(GOLD, "templates")) if f.endswith(".jinja"))
    # constructs trl's templates use little or not at all (call blocks, slices with steps, filters,
    # tests, Python's str/repr of values, whitespace control): extra/, written for this test
    names += sorted("extra/" + f for f in os.listdir(os.path.join(GOLD, "extra")) if f.endswith(".jinja"))
    with open(os.path.join(GOLD, "corpus.jsonl"), "w", encoding="utf-8") as f:
        for c in CASES:
            f.write(json.dumps(c, ensure_ascii=False) + "\n")
    out, nerr = [], 0
    for name in names:
        tpl = open(os.path.join(GOLD, name if name.startswith("extra/") else os.path.join("templates", name)),
                   encoding="utf-8").read()
        compiled = ctu._compile_jinja_template(tpl)
        compiled.environment.globals["strftime_now"] = lambda fmt: FIXED_NOW.strftime(fmt)
        gen = re.search(r"\{\%-?\s*generation\s*-?\%\}", tpl) is not None
        for ci, c in enumerate(CASES):
            kw = dict(c.get("vars", {}))
            rec = {"t": name, "c": ci}
            try:
                text = tok.apply_chat_template(c["messages"], tools=c.get("tools"), chat_template=tpl,
                                               tokenize=False, **kw)
            except Exception as e:  # the C side must raise too (same message for raise_exception)
                rec["error"] = str(e)
                rec["kind"] = type(e).__name__
                nerr += 1
                out.append(rec)
                continue
            rec["text"] = text
            if gen:
                r = tok.apply_chat_template(c["messages"], tools=c.get("tools"), chat_template=tpl, tokenize=True,
                                            return_dict=True, return_assistant_tokens_mask=True, **kw)
                rec["ids"] = list(r["input_ids"])
                rec["mask"] = list(r["assistant_masks"])
                _, idx = ctu.render_jinja_template([c["messages"]], tools=c.get("tools"), chat_template=tpl,
                                                   return_assistant_tokens_mask=True,
                                                   **{**tok.special_tokens_map, **kw})
                b = lambda i: len(text[:i].encode("utf-8"))
                rec["spans"] = [[b(s), b(e)] for s, e in idx[0]]
            else:
                rec["ids"] = tok.encode(text, add_special_tokens=False)
            out.append(rec)
    lines = [json.dumps({"special_tokens": tok.special_tokens_map, "now": "2026-12-07T12:00:00",
                         "templates": len(names), "cases": len(CASES)}, ensure_ascii=False)]
    lines += [json.dumps(r, ensure_ascii=False) for r in out]
    with open(os.path.join(GOLD, "expected.jsonl.gz"), "wb") as raw:  # mtime 0: the same bytes every run
        with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0, filename="") as gz:
            gz.write(("\n".join(lines) + "\n").encode("utf-8"))
    print(f"{len(names)} templates x {len(CASES)} cases = {len(out)} renders, {nerr} raise")


if __name__ == "__main__":
    sys.exit(main())
