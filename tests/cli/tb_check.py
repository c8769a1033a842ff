#!/usr/bin/env python3
"""Read a run's TensorBoard event files with TensorBoard's own reader and hold them to
metrics.jsonl: every scalar of every step once, equal to the JSON value (float32).
    tb_check.py RUN_DIR
Exit 0 ok, 1 mismatch, 77 when the tensorboard package is missing (the test is skipped).
"""
import json
import math
import os
import sys

try:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
except ImportError:
    print("SKIPPED: the Python tensorboard package is not installed (pip install tensorboard)")
    sys.exit(77)

run = sys.argv[1]
steps, evals = {}, {}
with open(os.path.join(run, "metrics.jsonl")) as f:
    for line in f:
        j = json.loads(line)
        (evals if "eval_loss" in j else steps).setdefault(j["step"], []).append(j)
dup = [s for s, v in list(steps.items()) + list(evals.items()) if len(v) > 1]
if dup:
    sys.exit(f"metrics.jsonl has steps {dup} more than once")
acc = EventAccumulator(os.path.join(run, "tb"), size_guidance={"scalars": 0})
acc.Reload()
tags = acc.Tags()["scalars"]
pairs = {"train/loss": "loss", "train/lr": "lr", "train/grad_norm": "grad_norm", "train/clip_coef": "clip_coef",
         "train/trained_tokens": "trained_tokens", "perf/tok_per_s": "tok_per_s", "perf/step_time_s": "step_time_s",
         "comm/bytes_gathered": "bytes_gathered", "cost/gpu_hours": "gpu_hours",
         "perf/tflops": "tflops_per_rank", "perf/mfu": "mfu"}
bad = 0
for tag, key in pairs.items():
    if tag not in tags:
        print(f"tag {tag} missing (have {sorted(tags)})")
        bad += 1
        continue
    ev = acc.Scalars(tag)
    got = [e.step for e in ev]
    if got != sorted(steps):
        print(f"{tag}: steps {got} but metrics.jsonl has {sorted(steps)}")
        bad += 1
        continue
    for e in ev:
        want = steps[e.step][0][key]
        # metrics.jsonl prints fixed decimals (tests the printed value's half-unit), TensorBoard
        # holds float32 (relative 2^-24)
        half_unit = {"tok_per_s": 0.05, "step_time_s": 5e-5}.get(key, 5e-7)
        if not math.isclose(e.value, want, rel_tol=1e-6, abs_tol=half_unit * 1.01):
            print(f"{tag} step {e.step}: tensorboard {e.value!r}, metrics.jsonl {want!r}")
            bad += 1
if evals:
    ev = acc.Scalars("eval/loss") if "eval/loss" in tags else []
    if [e.step for e in ev] != sorted(evals) or any(
            not math.isclose(e.value, evals[e.step][0]["eval_loss"], rel_tol=1e-6) for e in ev):
        print(f"eval/loss {[(e.step, e.value) for e in ev]} vs metrics.jsonl {[(s, v[0]['eval_loss']) for s, v in sorted(evals.items())]}")
        bad += 1
ranks = os.path.join(run, "tb", "ranks")
nr = len(os.listdir(ranks)) if os.path.isdir(ranks) else 0
for r in range(nr):
    a = EventAccumulator(os.path.join(ranks, f"rank-{r:05d}"), size_guidance={"scalars": 0})
    a.Reload()
    got = [e.step for e in a.Scalars("rank/tok_per_s")]
    if got != sorted(steps):
        print(f"rank {r}: rank/tok_per_s steps {got}")
        bad += 1
print(f"{len(pairs)} tags x {len(steps)} steps, {len(evals)} evaluations, {nr} rank directories: "
      f"{'ok' if not bad else str(bad) + ' mismatches'}")
sys.exit(1 if bad else 0)
