#!/usr/bin/env python3
"""Writes examples/sft/tools_{messages,openai,sharegpt}.jsonl: the same 120 short tool-calling
conversations in the three forms `zerotrain pack --input chat` reads (docs/formats.md):

  tools_messages.jsonl  {"messages": [...], "tools": [...]}: what transformers'
                        apply_chat_template(messages, tools=tools) takes (arguments as objects)
  tools_openai.jsonl    OpenAI's fine-tuning format: tool calls with "id" and "type", arguments
                        as JSON strings, tool messages with "tool_call_id", "weight"
  tools_sharegpt.jsonl  ShareGPT as LLaMA-Factory reads it: human / function_call / observation /
                        gpt turns, "tools" as a JSON string, "system"

All three pack to the same tokens and masks. Small tasks a tiny Qwen3 can pick up: add two
numbers, look up the weather of a city, count the letters of a word, with one or two of the
tools offered, a direct answer when no tool is needed, two calls in one turn, reasoning before
a call, and a first wrong answer with "weight": 0 (kept in the context, not trained). Each is
under 320 tokens with the Qwen3 template and its tools block. Fixed seed, standard library only:

    python3 examples/sft/make_tool_conversations.py
"""
import json
import os
import random

SEED = 11
N = 120
DIR = os.path.dirname(os.path.abspath(__file__))

TOOLS = {
    "add": {"type": "function", "function": {
        "name": "add", "description": "Add two integers.",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                       "required": ["a", "b"]}}},
    "get_weather": {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather of a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    "word_length": {"type": "function", "function": {
        "name": "word_length", "description": "Number of letters in a word.",
        "parameters": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}}},
}
CITIES = ["Oslo", "Lima", "Cairo", "Tokyo", "Quito", "Perth", "Accra", "Hanoi"]
SKIES = ["sun", "rain", "snow", "clouds", "fog"]
WORDS = ["planet", "river", "garden", "window", "orange", "tiger", "cloud", "pencil", "castle", "mirror"]
SYSTEMS = ["You are a helpful assistant with tools.", "Use a tool when it helps. Answer briefly."]


def task(r):
    """(tool names offered, user question, [calls], [results], answer, reasoning or None)."""
    k = r.random()
    if k < 0.3:
        a, b = r.randint(2, 99), r.randint(2, 99)
        return (["add"], "What is %d + %d?" % (a, b), [("add", {"a": a, "b": b})], [str(a + b)],
                "%d + %d = %d." % (a, b, a + b), "I should add them with the tool." if r.random() < 0.3 else None)
    if k < 0.55:
        c, t, s = r.choice(CITIES), r.randint(-5, 35), r.choice(SKIES)
        return (["get_weather"], "What's the weather in %s?" % c, [("get_weather", {"city": c})],
                [json.dumps({"city": c, "temp_c": t, "sky": s})], "It is %d °C with %s in %s." % (t, s, c), None)
    if k < 0.75:
        w = r.choice(WORDS)
        return (["word_length", "add"], "How many letters are in \"%s\"?" % w, [("word_length", {"word": w})],
                [str(len(w))], "\"%s\" has %d letters." % (w, len(w)), None)
    if k < 0.88:
        c1, c2 = r.sample(CITIES, 2)
        t1, t2 = r.randint(-5, 35), r.randint(-5, 35)
        return (["get_weather"], "Is it warmer in %s or in %s?" % (c1, c2),
                [("get_weather", {"city": c1}), ("get_weather", {"city": c2})],
                [json.dumps({"city": c1, "temp_c": t1}), json.dumps({"city": c2, "temp_c": t2})],
                "%s (%d °C vs %d °C)." % (c1 if t1 >= t2 else c2, max(t1, t2), min(t1, t2)), None)
    return (["add", "get_weather"], "Say hello in French.", [], [], "Bonjour !", None)


def conversation(r, n):
    names, question, calls, results, answer, reasoning = task(r)
    tools = [TOOLS[x] for x in names]
    system = r.choice(SYSTEMS) if r.random() < 0.5 else None
    msgs = [{"role": "system", "content": system}] if system else []
    msgs.append({"role": "user", "content": question})
    if calls:
        if r.random() < 0.15:  # a wrong first answer, kept as context but not trained
            msgs.append({"role": "assistant", "content": "I do not know.", "weight": 0})
            msgs.append({"role": "user", "content": "Please use the tool."})
        a = {"role": "assistant", "content": "",
             "tool_calls": [{"type": "function", "function": {"name": f, "arguments": args}} for f, args in calls]}
        if reasoning:
            a["reasoning_content"] = reasoning
        msgs.append(a)
        for res in results:
            msgs.append({"role": "tool", "content": res})
    msgs.append({"role": "assistant", "content": answer})
    return {"messages": msgs, "tools": tools}


def to_openai(line, n):
    out, ids = [], []
    for m in line["messages"]:
        m = dict(m)
        if m.get("tool_calls"):
            ids = ["call_%d_%d" % (n, k) for k in range(len(m["tool_calls"]))]
            m["tool_calls"] = [{"id": i, "type": "function",
                                "function": {"name": c["function"]["name"],
                                             "arguments": json.dumps(c["function"]["arguments"])}}
                               for i, c in zip(ids, m["tool_calls"])]
            m["content"] = None
        elif m["role"] == "tool":
            m["tool_call_id"] = ids.pop(0)
        out.append(m)
    return {"messages": out, "tools": line["tools"]}


def to_sharegpt(line):
    turns, system = [], None
    msgs = line["messages"]
    if msgs[0]["role"] == "system":
        system, msgs = msgs[0]["content"], msgs[1:]
    i = 0
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
        elif m.get("tool_calls"):
            calls = [{"name": c["function"]["name"], "arguments": c["function"]["arguments"]} for c in m["tool_calls"]]
            value = json.dumps(calls[0] if len(calls) == 1 else calls, ensure_ascii=False)
            if m.get("reasoning_content"):
                value = "<think>\n" + m["reasoning_content"] + "\n</think>\n\n" + value
            turns.append({"from": "function_call", "value": value})
        else:
            turns.append({"from": "gpt", "value": m["content"]})
            if "weight" in m:
                turns[-1]["weight"] = m["weight"]
        i += 1
    out = {"conversations": turns, "tools": json.dumps(line["tools"], ensure_ascii=False)}
    if system:
        out["system"] = system
    return out


def main():
    r = random.Random(SEED)
    lines = [conversation(r, n) for n in range(N)]
    forms = {"messages": lines, "openai": [to_openai(x, n) for n, x in enumerate(lines)],
             "sharegpt": [to_sharegpt(x) for x in lines]}
    for name, rows in forms.items():
        with open(os.path.join(DIR, "tools_%s.jsonl" % name), "w", encoding="utf-8", newline="\n") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
