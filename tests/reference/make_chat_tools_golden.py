#!/usr/bin/env python3
"""Expected Qwen3 renderings of conversations with tools, from Hugging Face transformers,
for tests/unit/test_chat.c (data/chat_read.c reads the three input formats and
data/chat_template.c renders the template natively in C).

Builds conversations with a fixed seed, each with its tool definitions: several schemas per
conversation from a pool of generated ones (OpenAI style {"type": "function", "function":
{...}}, bare {"name", "description", "parameters"}, or both in one list; none, [] and null
too), nested parameters (objects in objects, arrays of objects, enums, defaults, int and
float bounds, booleans, null), descriptions in CJK, Arabic, emoji, combining accents, with
quotes, backslashes, control characters and special-token text; a system prompt or not;
assistant turns with tool calls (arguments as JSON strings and as JSON values; several
calls; text before the calls in the same turn; reasoning before the calls, in and before the
active chain); tool responses grouped into one user turn; wrapped <tool_response> user turns;
several queries; "weight": 0 on some assistant turns; a few conversations ending with a tool
or user turn (only --train-on all takes them). Hand-written lines add number literals that
Python reads as int or float and writes back its own way (1E3, 2.50, -0, 1e400) inside tool
schemas, in the messages form and inside ShareGPT's JSON-in-a-string members.

Each conversation is rendered with

  apply_chat_template(messages, tools=tools, tokenize=False)           -> text
  apply_chat_template(messages, tools=tools, tokenize=True)            -> ids
  render_jinja_template(..., chat_template=<{% generation %} around each assistant turn's
                        trained part>, return_assistant_tokens_mask=True) -> the generation spans

and the masks are transformers' own overlap rule (the loop of apply_chat_template, on the
token offsets; asserted equal to its assistant_masks on all spans) applied to the spans a
rule trains: "assistant" the spans of the assistant turns whose "weight" is not 0, "last"
the final assistant turn's span unless its weight is 0, "all" everything but the weight-0
spans ("weight" is OpenAI's fine-tuning member; transformers passes it to the template,
which ignores it).

The same conversations are also written in OpenAI's fine-tuning format and in ShareGPT
(LLaMA-Factory), where they can be: every OpenAI line has OpenAI-style tools, calls with
"id" and "type", arguments as JSON strings (json.dumps of a value, the template's tojson),
tool messages with the "tool_call_id" of a call before them, and null or absent content
beside tool_calls for some; every ShareGPT line alternates human|observation and
gpt|function_call (consecutive tool messages become one observation joined by
"\\n</tool_response>\\n<tool_response>\\n", which renders the same bytes), reasoning as
<think>...</think> in the value, tools as a JSON string or a list, the system prompt as a
first turn or the top-level "system" member. Each converted line is mapped back with the
rules docs/formats.md states (openai_to_messages, sharegpt_to_messages below) and asserted to
render, through transformers, exactly the messages form's text; a conversation for which a
form would render differently gets no line in that form (counted).

Writes tests/golden/chat_tools/
  messages.jsonl.gz   one {"messages": [...], "tools"?: [...]} per line
  openai.jsonl.gz     the convertible ones in OpenAI's format
  sharegpt.jsonl.gz   the convertible ones in ShareGPT
  expected.bin.gz     "ZTCHAT02", u32 n, then per conversation: u32 flags (bit 0: ends with
                      an assistant turn), u32 text_len, text, u32 ntok, u32 ids[ntok],
                      u8 masks[ntok] (bit 0 assistant, bit 1 last, bit 2 all);
                      then u32 n_openai, u32 index[n_openai] (the conversation each OpenAI
                      line is), u32 n_sharegpt, u32 index[n_sharegpt]
all little-endian, gzip with mtime 0 (byte-identical on a rerun). Run from the repository root
(python 3.11, transformers 5.24.0, jinja2 3.1):
    python3 tests/reference/make_chat_tools_golden.py
"""
import copy
import gzip
import json
import math
import os
import random
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_chat_golden import (ARABIC, CJK, CODE, COMBINING, EMOJI, JA, KO, SPECIAL, WORDS,  # noqa: E402
                              gen_template, overlap_mask)
from transformers import AutoTokenizer  # noqa: E402
from transformers.utils.chat_template_utils import render_jinja_template  # noqa: E402

TOK_DIR = "assets/qwen3-tokenizer"
OUT_DIR = "tests/golden/chat_tools"
SEED = 20260626
N_RANDOM = 1100

rng = random.Random(SEED)


def word():
    r = rng.random()
    if r < 0.62:
        return rng.choice(WORDS)
    if r < 0.70:
        return "".join(rng.choice(CJK) for _ in range(rng.randint(1, 5)))
    if r < 0.74:
        return rng.choice(JA + KO)
    if r < 0.77:
        return rng.choice(ARABIC)
    if r < 0.81:
        return rng.choice(EMOJI)
    if r < 0.85:
        return rng.choice(COMBINING)
    if r < 0.89:
        return str(rng.randint(0, 10 ** rng.randint(1, 6)))
    if r < 0.91:
        return rng.choice(CODE)
    if r < 0.94:
        return rng.choice(".,;:!?-()\"'\\/")
    if r < 0.96:
        return rng.choice(SPECIAL)
    if r < 0.97:
        return chr(rng.choice([0x01, 0x07, 0x1B, 0x7F, 0xA0, 0x2028, 0x3000, 0xFEFF]))
    return rng.choice([" ", "\n", "\t", "\n\n"])


def text(lo=0, hi=12):
    s = " ".join(word() for _ in range(rng.randint(lo, hi)))
    r = rng.random()
    if r < 0.08:
        s = "\n" + s
    elif r < 0.14:
        s = s + "\n"
    return s


def ident():
    return rng.choice(WORDS).lower() + rng.choice(["", "_id", "_name", "_count", "2", "_列表", "Ä"])


# ---- tool schemas ----------------------------------------------------------------------
def param(depth=0):
    r = rng.random()
    p = {}
    if r < 0.3 or depth > 2:
        p["type"] = "string"
        if rng.random() < 0.4:
            p["enum"] = [text(1, 2) for _ in range(rng.randint(1, 4))]
        if rng.random() < 0.2:
            p["default"] = text(0, 2)
    elif r < 0.45:
        p["type"] = "integer"
        if rng.random() < 0.5:
            p["minimum"] = rng.randint(-10, 10)
            p["maximum"] = rng.randint(11, 10 ** rng.randint(2, 12))
    elif r < 0.55:
        p["type"] = "number"
        k = rng.random()
        if k < 0.4:
            p["minimum"] = rng.choice([0.0, 0.5, -1.5, 1e-5, 2.5e-7, 1e16, 1e22, 0.1, 1 / 3])
        elif k < 0.7:
            p["multipleOf"] = rng.choice([0.01, 0.25, 1.0, 100.0])
    elif r < 0.62:
        p["type"] = "boolean"
        if rng.random() < 0.3:
            p["default"] = rng.choice([True, False])
    elif r < 0.78:
        p["type"] = "array"
        p["items"] = param(depth + 1)
        if rng.random() < 0.3:
            p["maxItems"] = rng.randint(1, 20)
    else:
        p["type"] = "object"
        p["properties"] = {ident(): param(depth + 1) for _ in range(rng.randint(1, 3))}
        if rng.random() < 0.5:
            p["required"] = list(p["properties"])[:1]
        if rng.random() < 0.3:
            p["additionalProperties"] = False
    if rng.random() < 0.6:
        p["description"] = text(1, 6)
    if rng.random() < 0.05:
        p["nullable"] = None
    return p


TOOL_NAMES = ["get_weather", "search_web", "calculator", "lookup_user", "run_code", "translate", "send_email",
              "book_flight", "get_stock_price", "create_event", "翻译文本", "wetter_abfragen", "read_file", "list_files",
              "convert_units", "geocode", "résumé_parse", "emoji_react", "sql_query", "get_time", "set_alarm",
              "play_music", "order_pizza", "lookup_word", "find_route", "get_news", "rate_limit", "x", "tool.v2",
              "خريطة"]


def schema(name):
    fn = {"name": name}
    if rng.random() < 0.85:
        fn["description"] = text(1, 12)
    props = {ident(): param() for _ in range(rng.randint(0, 4))}
    params = {"type": "object", "properties": props}
    if props and rng.random() < 0.7:
        params["required"] = rng.sample(list(props), rng.randint(1, len(props)))
    if rng.random() < 0.9:
        fn["parameters"] = params
    if rng.random() < 0.1:
        fn["strict"] = True
    if rng.random() < 0.05:
        fn["return"] = {"type": "string", "description": text(1, 4)}
    return fn


POOL = [schema(TOOL_NAMES[i % len(TOOL_NAMES)] + ("" if i < len(TOOL_NAMES) else "_%d" % i)) for i in range(60)]


def tools_for_conversation():
    """(tools or None, all OpenAI style)."""
    r = rng.random()
    if r < 0.03:
        return None, True
    if r < 0.05:
        return [], True
    fns = rng.sample(POOL, rng.randint(1, 4))
    form = rng.random()
    out = []
    for fn in fns:
        wrap = form < 0.6 or (form >= 0.85 and rng.random() < 0.5)
        out.append({"type": "function", "function": copy.deepcopy(fn)} if wrap else copy.deepcopy(fn))
    return out, all("type" in t for t in out)


# ---- calls and conversations -------------------------------------------------------------
def value(depth=0):
    r = rng.random()
    if depth > 2 or r < 0.3:
        return text(0, 4)
    if r < 0.45:
        return rng.randint(-1000, 10 ** rng.randint(1, 15))
    if r < 0.58:
        k = rng.random()
        if k < 0.4:
            return rng.random() * 10 ** rng.randint(-8, 20)
        if k < 0.7:
            return round(rng.uniform(-100, 100), rng.randint(0, 4))
        return rng.choice([0.0, -0.0, 1e16, 1e-4, 1e-5, 2.0 ** 53, 0.1 + 0.2, 1e22, 1e23, 5e-324, 100.0])
    if r < 0.65:
        return rng.choice([True, False, None])
    if r < 0.82:
        return [value(depth + 1) for _ in range(rng.randint(0, 3))]
    return {ident(): value(depth + 1) for _ in range(rng.randint(0, 3))}


def tool_call(tools):
    names = [t["function"]["name"] if "function" in t else t["name"] for t in tools or []] or ["f"]
    name = rng.choice(names)
    r = rng.random()
    if r < 0.25:
        args = json.dumps({ident(): value() for _ in range(rng.randint(0, 3))}, ensure_ascii=rng.random() < 0.3,
                          separators=rng.choice([None, (",", ":")]))
    elif r < 0.3:
        args = text(0, 4)  # any string is written as it is
    else:
        args = {ident(): value() for _ in range(rng.randint(0, 4))}
    call = {"name": name, "arguments": args}
    k = rng.random()
    if k < 0.6:
        return {"type": "function", "function": call}
    if k < 0.7:
        return {"function": call}
    return call


def assistant_text():
    r = rng.random()
    if r < 0.15:
        return ""
    return text(1, 20)


def reasoning(m):
    r = rng.random()
    if r < 0.2:
        m["reasoning_content"] = text(0, 10)
    elif r < 0.25:
        m["content"] = "<think>" + text(0, 6) + "</think>" + rng.choice(["", "\n\n"]) + m["content"]


def conversation():
    tools, _ = tools_for_conversation()
    msgs = []
    if rng.random() < 0.5:
        msgs.append({"role": "system", "content": text(0, 14)})
    turns = rng.choice([1, 1, 2, 2, 3])
    for t in range(turns):
        if rng.random() < 0.06:
            msgs.append({"role": "user", "content": "<tool_response>" + text(0, 4) + "</tool_response>"})
        else:
            msgs.append({"role": "user", "content": text(1, 16)})
        for _ in range(rng.choice([0, 1, 1, 1, 2])):  # tool rounds after the query
            a = {"role": "assistant", "content": text(1, 10) if rng.random() < 0.35 else ""}
            reasoning(a)
            a["tool_calls"] = [tool_call(tools) for _ in range(rng.choice([1, 1, 1, 2, 3]))]
            msgs.append(a)
            for _ in range(rng.choice([1, 1, 2]) if len(a["tool_calls"]) == 1 else len(a["tool_calls"])):
                msgs.append({"role": "tool", "content": text(0, 12)})
        a = {"role": "assistant", "content": assistant_text()}
        reasoning(a)
        msgs.append(a)
    assistants = [m for m in msgs if m["role"] == "assistant"]
    if rng.random() < 0.12:
        rng.choice(assistants)["weight"] = 0
    for m in assistants:
        if "weight" not in m and rng.random() < 0.05:
            m["weight"] = 1
    r = rng.random()
    if r < 0.03:
        msgs.append({"role": "tool", "content": text(0, 4)})
    elif r < 0.05:
        msgs.append({"role": "user", "content": text(0, 6)})
    line = {"messages": msgs}
    if tools is not None or rng.random() < 0.5:
        line["tools"] = tools
    return line


# Hand-written lines: literals Python reads as int or float and writes back its own way.
HANDWRITTEN = [
    '{"messages": [{"role": "user", "content": "n"}, {"role": "assistant", "content": "ok"}], "tools": [{"type": '
    '"function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "number", '
    '"minimum": 1E3, "maximum": 2.50, "default": -0, "multipleOf": 1e-7, "x": 123456789012345678901234567890, '
    '"y": -1.0e+2, "z": 1e400, "w": 10E-1}}}}}]}',
    '{"tools":[{"name":"g","description":"\\u00e9\\ud83d\\ude00 \\"q\\" \\\\ \\u0007","parameters":{"k":[0,-0.0,1.5,'
    '[],{},{"t":[true,false,null]}]}}],"messages":[{"role":"system","content":"s"},{"role":"user","content":"x"},'
    '{"role":"assistant","content":"","tool_calls":[{"name":"g","arguments":{"k":1.0}}]},{"role":"tool",'
    '"content":"r"},{"role":"assistant","content":"y"}]}',
]
# ShareGPT lines written by hand: numbers inside the JSON held in strings.
HANDWRITTEN_SHAREGPT = [
    '{"conversations": [{"from": "human", "value": "q"}, {"from": "function_call", "value": "{\\"name\\": \\"f\\", '
    '\\"arguments\\": {\\"a\\": 1E3, \\"b\\": 2.50, \\"c\\": -0, \\"d\\": [1e-7, 10]}}"}, {"from": "observation", '
    '"value": "r"}, {"from": "gpt", "value": "done"}], "tools": "[{\\"name\\": \\"f\\", \\"parameters\\": '
    '{\\"minimum\\": 1E3, \\"x\\": 0.50}}]", "system": "sys"}',
    '{"conversations": [{"from": "system", "value": ""}, {"from": "human", "value": "q"}, {"from": "function_call", '
    '"value": "<think>\\nplan\\n</think>\\n\\n[{\\"name\\": \\"f\\", \\"arguments\\": \\"raw\\"}, {\\"name\\": '
    '\\"g\\", \\"arguments\\": {}}]"}, {"from": "observation", "value": "r1"}, {"from": "gpt", "value": '
    '"<think>t</think>a", "weight": 0}, {"from": "human", "value": "again"}, {"from": "gpt", "value": "b"}], '
    '"tools": [{"type": "function", "function": {"name": "f"}}, {"name": "g"}]}',
]


# ---- the formats, both ways --------------------------------------------------------------
def openai_to_messages(o):
    """The openai reader's mapping (data/chat_read.c): null or absent content beside tool_calls is "";
    the rest is passed as it is (the template ignores id, type, tool_call_id, weight)."""
    msgs = []
    for m in o["messages"]:
        m = dict(m)
        if m["role"] == "assistant" and m.get("tool_calls") and m.get("content") is None:
            m["content"] = ""
        msgs.append(m)
    return msgs, o.get("tools")


def sharegpt_to_messages(s):
    """The sharegpt reader's mapping (data/chat_read.c), as LLaMA-Factory reads the turns."""
    turns = s["conversations"]
    msgs = []
    if turns and turns[0]["from"] == "system":
        msgs.append({"role": "system", "content": turns[0]["value"]})
        turns = turns[1:]
    elif s.get("system"):
        msgs.append({"role": "system", "content": s["system"]})
    for t in turns:
        f, v = t["from"], t["value"]
        if f == "human":
            msgs.append({"role": "user", "content": v})
        elif f == "observation":
            msgs.append({"role": "tool", "content": v})
        elif f == "gpt":
            msgs.append({"role": "assistant", "content": v})
        else:
            content = ""
            if v.lstrip(" \t\r\n")[:1] not in ("{", "[") and "</think>" in v:  # reasoning first
                k = v.index("</think>") + len("</think>")
                content, v = v[:k], v[k:]
            calls = json.loads(v)
            calls = calls if isinstance(calls, list) else [calls]
            msgs.append({"role": "assistant", "content": content,
                         "tool_calls": [{"name": c["name"], "arguments": c["arguments"]} for c in calls]})
        if "weight" in t:
            msgs[-1]["weight"] = t["weight"]
    tools = s.get("tools")
    if isinstance(tools, str):
        tools = json.loads(tools) if tools.strip() else None
    return msgs, tools


def to_openai(line):
    tools = line.get("tools")
    if tools and not all(t.get("type") == "function" for t in tools):
        return None
    out, ids, n = [], [], 0
    for m in line["messages"]:
        m = copy.deepcopy(m)
        if m["role"] == "assistant" and m.get("tool_calls"):
            calls = []
            ids = []
            for c in m["tool_calls"]:
                fn = c.get("function") or c
                args = fn["arguments"]
                if not isinstance(args, str):
                    args = json.dumps(args, ensure_ascii=False)  # the template's tojson
                n += 1
                ids.append("call_%d" % n)
                calls.append({"id": ids[-1], "type": "function", "function": {"name": fn["name"], "arguments": args}})
            m["tool_calls"] = calls
            if m["content"] == "":
                r = rng.random()
                if r < 0.4:
                    m["content"] = None
                elif r < 0.7:
                    del m["content"]
        elif m["role"] == "tool":
            if not ids:
                return None
            m["tool_call_id"] = rng.choice(ids)
        out.append(m)
    o = {"messages": out}
    if "tools" in line:
        o["tools"] = tools
    return o


def to_sharegpt(line):
    msgs = line["messages"]
    turns = []
    system = None
    i = 0
    if msgs and msgs[0]["role"] == "system":
        if msgs[0]["content"] and rng.random() < 0.5:
            system = msgs[0]["content"]
        else:
            turns.append({"from": "system", "value": msgs[0]["content"]})
        i = 1
    while i < len(msgs):
        m = msgs[i]
        if m["role"] == "user":
            turns.append({"from": "human", "value": m["content"]})
        elif m["role"] == "tool":
            group = [m["content"]]
            while i + 1 < len(msgs) and msgs[i + 1]["role"] == "tool":
                i += 1
                group.append(msgs[i]["content"])
            turns.append({"from": "observation", "value": "\n</tool_response>\n<tool_response>\n".join(group)})
        elif m["role"] == "assistant":
            content = m["content"]
            if m.get("reasoning_content") is not None:
                content = "<think>" + m["reasoning_content"] + "</think>" + content
            if m.get("tool_calls"):
                calls = [{"name": (c.get("function") or c)["name"], "arguments": (c.get("function") or c)["arguments"]}
                         for c in m["tool_calls"]]
                if content and not (content.endswith("</think>") and content.count("</think>") == 1):
                    return None  # text beside calls: no ShareGPT turn holds both
                v = json.dumps(calls[0] if len(calls) == 1 and rng.random() < 0.7 else calls, ensure_ascii=False)
                turns.append({"from": "function_call", "value": content + v})
            else:
                turns.append({"from": "gpt", "value": content})
            if "weight" in m:
                turns[-1]["weight"] = m["weight"]
        else:
            return None  # a later system turn
        i += 1
    out = {"conversations": turns}
    if system is not None:
        out["system"] = system
    tools = line.get("tools")
    if tools is not None:
        out["tools"] = json.dumps(tools, ensure_ascii=False) if rng.random() < 0.6 else tools
    return out


def sharegpt_ok(s):
    """LLaMA-Factory's alternation and even count (the reader refuses the rest)."""
    turns = s["conversations"][1:] if s["conversations"][0]["from"] == "system" else s["conversations"]
    if not turns or len(turns) % 2:
        return False
    for k, t in enumerate(turns):
        if (t["from"] in ("gpt", "function_call")) != (k % 2 == 1):
            return False
    return True


# ---- rendering and masks ------------------------------------------------------------------
def weighted_masks(tok, gtpl, msgs, tools, text_, ids):
    enc = tok(text_, add_special_tokens=False, return_offsets_mapping=True)
    assert enc["input_ids"] == ids
    rendered, gen = render_jinja_template(conversations=[msgs], tools=tools, chat_template=gtpl,
                                          return_assistant_tokens_mask=True, **tok.special_tokens_map)
    assert rendered[0] == text_
    spans = gen[0]
    weights = [m.get("weight", 1) for m in msgs if m["role"] == "assistant"]
    assert len(spans) == len(weights)
    offsets = enc["offset_mapping"]
    if msgs[-1]["role"] == "assistant":
        r = tok.apply_chat_template(msgs, tools=tools, tokenize=True, return_dict=True,
                                    return_assistant_tokens_mask=True, chat_template=gtpl)
        assert r["input_ids"] == ids and overlap_mask(offsets, spans) == r["assistant_masks"]
    asst = overlap_mask(offsets, [s for s, w in zip(spans, weights) if w])
    last = overlap_mask(offsets, spans[-1:] if weights and weights[-1] else [])
    held, keep, at = [s for s, w in zip(spans, weights) if not w], [], 0
    for b, e in held:
        if b > at:
            keep.append((at, b))
        at = e
    if len(text_) > at:
        keep.append((at, len(text_)))
    alls = overlap_mask(offsets, keep)
    return [a | (b << 1) | (c << 2) for a, b, c in zip(asst, last, alls)]


def dumps_finite(obj):
    """The line, or None when it would hold NaN or Infinity (not JSON; only the messages form's own lines,
    written by hand, carry such literals, as 1e400)."""
    try:
        return json.dumps(obj, ensure_ascii=False, allow_nan=False)
    except ValueError:
        return None


def main():
    tok = AutoTokenizer.from_pretrained(TOK_DIR)
    gtpl = gen_template(tok.chat_template)
    lines = [json.dumps(conversation(), ensure_ascii=False) for _ in range(N_RANDOM)]
    lines[50:50] = HANDWRITTEN
    hand_sg = []
    for s in HANDWRITTEN_SHAREGPT:  # their messages form joins the corpus
        msgs, tools = sharegpt_to_messages(json.loads(s))
        line = {"messages": msgs}
        if tools is not None:
            line["tools"] = tools
        hand_sg.append((len(lines), s))
        lines.append(json.dumps(line, ensure_ascii=False))
    out = [b"ZTCHAT02", struct.pack("<I", len(lines))]
    openai_lines, sharegpt_lines = [], []
    stats = dict(tokens=0, with_tools=0, schemas=0, calls=0, weight0=0, asst=0, no_openai=0, no_sharegpt=0)
    for k, line in enumerate(lines):
        obj = json.loads(line)
        msgs, tools = obj["messages"], obj.get("tools")
        text_ = tok.apply_chat_template(msgs, tools=tools, tokenize=False)
        ids = tok.apply_chat_template(msgs, tools=tools, tokenize=True)["input_ids"]
        masks = weighted_masks(tok, gtpl, msgs, tools, text_, ids)
        ends_asst = msgs[-1]["role"] == "assistant"
        stats["tokens"] += len(ids)
        stats["with_tools"] += bool(tools)
        stats["schemas"] += len(tools or [])
        stats["calls"] += sum(len(m.get("tool_calls") or []) for m in msgs)
        stats["weight0"] += sum(m.get("weight", 1) == 0 for m in msgs)
        stats["asst"] += ends_asst
        t = text_.encode("utf-8")
        out += [struct.pack("<II", int(ends_asst), len(t)), t, struct.pack("<I", len(ids)),
                struct.pack("<%dI" % len(ids), *ids), bytes(masks)]
        if k >= len(lines) - len(HANDWRITTEN_SHAREGPT):
            continue
        o = to_openai(obj)
        if o is not None and dumps_finite(o) is None:
            o = None
        if o is not None:
            om, ot = openai_to_messages(o)
            if tok.apply_chat_template(om, tools=ot, tokenize=False) == text_:
                openai_lines.append((k, dumps_finite(o)))
            else:
                o = None
        stats["no_openai"] += o is None
        s = to_sharegpt(obj)
        if s is not None and sharegpt_ok(s) and dumps_finite(s) is not None:
            sm, st = sharegpt_to_messages(s)
            if tok.apply_chat_template(sm, tools=st, tokenize=False) == text_ and \
                    [m.get("weight", 1) for m in sm if m["role"] == "assistant"] == \
                    [m.get("weight", 1) for m in msgs if m["role"] == "assistant"]:
                sharegpt_lines.append((k, dumps_finite(s)))
            else:
                s = None
        else:
            s = None
        stats["no_sharegpt"] += s is None
    sharegpt_lines += hand_sg
    for name, rows in (("openai", openai_lines), ("sharegpt", sharegpt_lines)):
        out.append(struct.pack("<I", len(rows)))
        out.append(struct.pack("<%dI" % len(rows), *[k for k, _ in rows]))
    os.makedirs(OUT_DIR, exist_ok=True)

    def write_gz(name, data):
        with open(os.path.join(OUT_DIR, name), "wb") as raw:
            with gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as f:
                f.write(data)

    write_gz("messages.jsonl.gz", "".join(line + "\n" for line in lines).encode("utf-8"))
    write_gz("openai.jsonl.gz", "".join(line + "\n" for _, line in openai_lines).encode("utf-8"))
    write_gz("sharegpt.jsonl.gz", "".join(line + "\n" for _, line in sharegpt_lines).encode("utf-8"))
    write_gz("expected.bin.gz", b"".join(out))
    print("%d conversations (%d with tools, %d schemas, %d tool calls, %d weight-0 turns, %d end with the assistant), "
          "%d tokens; %d OpenAI lines (%d not convertible), %d ShareGPT lines (%d not convertible)"
          % (len(lines), stats["with_tools"], stats["schemas"], stats["calls"], stats["weight0"], stats["asst"],
             stats["tokens"], len(openai_lines), stats["no_openai"], len(sharegpt_lines), stats["no_sharegpt"]),
          file=sys.stderr)


if __name__ == "__main__":
    main()
