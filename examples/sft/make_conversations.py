#!/usr/bin/env python3
"""Writes examples/sft/conversations.jsonl: 400 short conversations for supervised
fine-tuning of a tiny Qwen3 (`zerotrain pack --input chat`, then `zerotrain train`).

Simple deterministic tasks a small model can pick up in a few hundred CPU steps:
reversing a short word list, counting letters, small sums and differences, sorting
digits, upper-casing a word, the next item of a sequence. A system prompt on most of
them, a second turn on some, the working-out as reasoning_content on some (rendered in
<think>...</think> by the chat template). Almost all are well under 128 tokens with the
Qwen3 template. Fixed seed, no network, standard library only:

    python3 examples/sft/make_conversations.py
"""
import json
import os
import random

SEED = 7
N = 400
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conversations.jsonl")

WORDS = ["cat", "dog", "sun", "moon", "tree", "fish", "bird", "star", "rain", "snow", "book", "lamp",
         "red", "blue", "green", "apple", "pear", "plum", "road", "ship"]
SYSTEMS = ["You are a helpful assistant.", "You are a careful assistant. Answer briefly.",
           "You answer in as few words as possible.", "You are a patient tutor."]
NUMBER_NAMES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]


def reverse_task(r):
    items = r.sample(WORDS, r.randint(2, 5))
    q = r.choice(["Reverse the list: {}", "Write this list backwards: {}", "Reverse: {}"]).format(", ".join(items))
    return q, ", ".join(reversed(items)), "Read the items from the last to the first."


def count_task(r):
    w = r.choice(WORDS)
    if r.random() < 0.5:
        return ("How many letters are in the word \"{}\"?".format(w), str(len(w)),
                "{} has the letters {}: {}.".format(w, " ".join(w), len(w)))
    c = r.choice(sorted(set(w)))
    n = w.count(c)
    return ("How many times does the letter {} appear in \"{}\"?".format(c, w), str(n),
            "Looking at {}: {} appears {} time{}.".format(" ".join(w), c, n, "" if n == 1 else "s"))


def sum_task(r):
    a, b = r.randint(0, 20), r.randint(0, 20)
    if r.random() < 0.7:
        return "What is {} + {}?".format(a, b), str(a + b), "{} plus {} is {}.".format(a, b, a + b)
    a, b = max(a, b), min(a, b)
    return "What is {} - {}?".format(a, b), str(a - b), "{} minus {} is {}.".format(a, b, a - b)


def sort_task(r):
    d = [r.randint(0, 9) for _ in range(r.randint(3, 6))]
    return ("Sort these digits from smallest to largest: {}".format(" ".join(map(str, d))),
            " ".join(map(str, sorted(d))), "The smallest first: {}.".format(" ".join(map(str, sorted(d)))))


def upper_task(r):
    w = r.choice(WORDS)
    return "Write \"{}\" in capital letters.".format(w), w.upper(), "Each letter of {} in upper case.".format(w)


def next_task(r):
    start, step = r.randint(0, 10), r.randint(1, 4)
    seq = [start + step * i for i in range(4)]
    return ("What comes next: {}, ...?".format(", ".join(map(str, seq))), str(start + step * 4),
            "The numbers go up by {}: {} + {} = {}.".format(step, seq[-1], step, seq[-1] + step))


TASKS = [reverse_task, count_task, sum_task, sort_task, upper_task, next_task]


def assistant(r, answer, why):
    m = {"role": "assistant", "content": answer}
    if r.random() < 0.3:
        m["reasoning_content"] = why
    return m


def conversation(r):
    msgs = []
    if r.random() < 0.7:
        msgs.append({"role": "system", "content": r.choice(SYSTEMS)})
    for _ in range(2 if r.random() < 0.15 else 1):
        q, a, why = r.choice(TASKS)(r)
        msgs.append({"role": "user", "content": q})
        msgs.append(assistant(r, a, why))
    return {"messages": msgs}


def main():
    r = random.Random(SEED)
    convs = [conversation(r) for _ in range(N)]
    # the first lines are short ones (a small --seq-len keeps some of the first ten)
    convs[0] = {"messages": [{"role": "user", "content": "What is 3 + 4?"}, {"role": "assistant", "content": "7"}]}
    convs[1] = {"messages": [{"role": "user", "content": "Reverse the list: cat, dog"},
                             {"role": "assistant", "content": "dog, cat"}]}
    with open(OUT, "w", encoding="utf-8", newline="\n") as f:
        for c in convs:
            f.write(json.dumps(c, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
