#!/usr/bin/env python3
"""Synchronous against asynchronous checkpoints (--async-save) on the CPU backend.

Three runs of `zerotrain train` under mpirun on the same model, data and steps: no
checkpoint before the last step, a synchronous save every K steps, an asynchronous save
every K steps. From each run's RUN/metrics.jsonl and terminal output it prints:

  blocked per save   the time the training loop stood still for a save: the sync
                     save's duration ("checkpoint: step N -> ... (T s)"), the async save's
                     ckpt_blocked_s at the save point (barrier, wait for the previous write)
                     plus the next optimizer update's wait for the writer thread's snapshot
                     copy (the "copied" record's ckpt_blocked_s)
  write per save     the async writer's ckpt_write_s (the work moved off the loop)
  overlapped step    mean step_time_s of the steps that ran while a write was in flight,
                     against the steady mean of the run without saves
  N steps            elapsed_s(step N) - elapsed_s(step 1): the loop from step 2 to N with
                     the K saves in between (the last step's save, synchronous in every
                     run, comes after step N's record and is not counted)
  saves' cost        the loop minus (N - 1) x the run's own steady step time (the steps that
                     overlapped no write): what the saves added to this run, measured against
                     the same run's speed, so that the machine's drift from run to run (5-10%
                     of the step time on a shared VM) does not enter it; in % of the loop

Needs python3, mpirun and a built zerotrain; nothing else. Rerun command and results:
docs/benchmarks.md ("Asynchronous checkpoints").
"""
import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time


def sh(cmd, out_path, env):
    with open(out_path, "w") as out:
        t = time.time()
        rc = subprocess.call(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        return rc, time.time() - t


def read_metrics(path):
    steps, ckpt = {}, []
    with open(path) as f:
        for line in f:
            try:
                o = json.loads(line)
            except ValueError:
                continue
            if "ckpt_event" in o:
                ckpt.append(o)
            elif "loss" in o:
                steps[o["step"]] = o
    return steps, ckpt


def mean(v):
    return sum(v) / len(v) if v else float("nan")


def main():
    src = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zerotrain", default=os.path.join(src, "build", "zerotrain"))
    ap.add_argument("--work", default="/tmp/zt-async-bench")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=40, help="N: steps per run")
    ap.add_argument("--save-every", type=int, default=10, help="K saves at K, 2K, ... before N")
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--ffn", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1, help="threads per rank")
    ap.add_argument("--runs", default="none,sync,async")
    args = ap.parse_args()

    os.makedirs(args.work, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), OPENBLAS_NUM_THREADS=str(args.threads),
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cfg = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": args.vocab,
           "hidden_size": args.hidden, "intermediate_size": args.ffn, "num_hidden_layers": args.layers,
           "num_attention_heads": args.heads, "num_key_value_heads": args.kv_heads,
           "head_dim": args.hidden // args.heads, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
           "tie_word_embeddings": False, "initializer_range": 0.02, "max_position_embeddings": 4096,
           "eos_token_id": args.vocab - 1, "torch_dtype": "bfloat16"}
    cfg_path = os.path.join(args.work, "config.json")
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=1)
    data = os.path.join(args.work, "data")
    if not os.path.exists(os.path.join(data, "dataset.json")):
        rnd = random.Random(7)
        docs = os.path.join(args.work, "docs.txt")
        with open(docs, "w") as f:
            for _ in range(args.ranks * (args.steps + 8)):
                f.write(" ".join(str(rnd.randrange(args.vocab - 1)) for _ in range(args.seq)) + "\n")
        subprocess.check_call([args.zerotrain, "pack", "--quiet", "--input", "ids", "--vocab-size", str(args.vocab),
                               "--seq-len", str(args.seq), "-o", data, docs], env=env)

    mpirun = ["mpirun", "--oversubscribe", "--allow-run-as-root", "--bind-to", "none", "-n", str(args.ranks),
              "-x", "OMP_NUM_THREADS", "-x", "OPENBLAS_NUM_THREADS"]
    base = [args.zerotrain, "train", "--model", cfg_path, "--data", data, "--steps", str(args.steps),
            "--threads", str(args.threads), "--log-every", "0", "--keep-last", "2", "--no-save-final",
            "--no-tensorboard", "--no-preflight", "--lr", "1e-4"]
    res = {}
    for kind in args.runs.split(","):
        run = os.path.join(args.work, "run-" + kind)
        shutil.rmtree(run, ignore_errors=True)
        extra = [] if kind == "none" else ["--save-every", str(args.save_every)]
        if kind == "async":
            extra.append("--async-save")
        cmd = mpirun + base + ["--run-dir", run] + extra
        print("$ " + " ".join(cmd), file=sys.stderr)
        rc, wall = sh(cmd, run + ".out", env)
        if rc != 0:
            sys.exit("%s run failed (exit %d): see %s.out" % (kind, rc, run))
        steps, ckpt = read_metrics(os.path.join(run, "metrics.jsonl"))
        text = open(run + ".out").read()
        n = args.steps
        r = {"wall": wall, "loop": steps[n]["elapsed_s"] - steps[1]["elapsed_s"],
             "step_times": {s: o["step_time_s"] for s, o in steps.items()}}
        sync = [(int(a), float(b)) for a, b in re.findall(r"checkpoint: step (\d+) -> \S+ \(([0-9.]+) s\)", text)]
        r["sync_blocked"] = [t for s, t in sync if s < n]
        snaps = [c for c in ckpt if c["ckpt_event"] == "snapshot"]
        commits = [c for c in ckpt if c["ckpt_event"] == "commit"]
        # blocked per save: at the save point, plus (CPU engine) the next update's wait for the
        # writer thread's snapshot copy ("copied" record of the same ckpt_step)
        copied = {c["ckpt_step"]: c for c in ckpt if c["ckpt_event"] == "copied"}
        r["async_blocked"] = [c["ckpt_blocked_s"] + copied.get(c["ckpt_step"], {}).get("ckpt_blocked_s", 0)
                              for c in snaps]
        r["async_copy"] = [c["ckpt_snapshot_s"] for c in copied.values()]
        r["async_wait"] = [c.get("ckpt_wait_s", 0) for c in snaps]
        r["async_write"] = [c["ckpt_write_s"] for c in commits]
        overlapped = set()
        for c in commits:  # steps after the snapshot up to the boundary where the write committed
            overlapped.update(range(c["ckpt_step"] + 1, c["step"] + 1))
        r["overlapped"] = sorted(s for s in overlapped if s <= n)
        m = re.search(r"host snapshot ([0-9.]+ \w+) per rank", text)
        r["snapshot"] = m.group(1) if m else ""
        ck = [d for d in os.listdir(os.path.join(run, "checkpoints")) if d.startswith("step-") and "." not in d]
        if ck:
            r["ckpt_bytes"] = os.path.getsize(os.path.join(run, "checkpoints", sorted(ck)[-1], "ckpt.h5"))
        res[kind] = r

    n, k = args.steps, (args.steps - 1) // args.save_every
    params = sum([args.vocab * args.hidden * 2, args.layers * (
        args.hidden * (args.hidden + 2 * (args.hidden // args.heads) * args.kv_heads) + args.hidden * args.hidden
        + 3 * args.hidden * args.ffn + 2 * args.hidden + 2 * (args.hidden // args.heads)), args.hidden])
    steady = [t for s, t in res["none"]["step_times"].items() if s > 1] if "none" in res else []
    print("model: Qwen3 %d layers, d=%d, ffn=%d, vocab %d: %.1f M parameters; checkpoint %.2f GB; W=%d, "
          "%d thread(s) per rank, seq %d, %d steps, a save every %d steps (%d saves before step %d)"
          % (args.layers, args.hidden, args.ffn, args.vocab, params / 1e6,
             max(r.get("ckpt_bytes", 0) for r in res.values()) / 1e9, args.ranks, args.threads, args.seq, n,
             args.save_every, k, n))
    print()
    print("| run | blocked per save (s) | write per save, off the loop (s) | step time, overlapped (s) | "
          "step time, steady (s) | %d steps (s) | vs no saves | saves' cost (s, %% of the loop) |" % n)
    print("|---|---|---|---|---|---|---|---|")
    loop0 = res["none"]["loop"] if "none" in res else float("nan")
    for kind in ("none", "sync", "async"):
        if kind not in res:
            continue
        r = res[kind]
        st = r["step_times"]
        if kind == "sync":
            blocked, write, ov = mean(r["sync_blocked"]), "—", "—"
        elif kind == "async":
            blocked = mean(r["async_blocked"])
            write = "%.2f" % mean(r["async_write"])
            ov = "%.3f (%d steps)" % (mean([st[s] for s in r["overlapped"] if s in st]), len(r["overlapped"]))
        else:
            blocked, write, ov = float("nan"), "—", "—"
        quiet = mean([t for s, t in st.items() if s > 1 and s not in r.get("overlapped", [])])
        cost = r["loop"] - (n - 1) * quiet
        print("| %s | %s | %s | %s | %.3f | %.2f | %s | %.2f (%.1f%%) |" % (
            {"none": "no saves", "sync": "sync saves", "async": "--async-save"}[kind],
            "—" if blocked != blocked else "%.3f" % blocked, write, ov, quiet, r["loop"],
            "—" if kind == "none" else "%+.1f%%" % (100 * (r["loop"] / loop0 - 1)), cost, 100 * cost / r["loop"]))
    if "sync" in res and "async" in res and res["sync"]["sync_blocked"]:
        print()
        print("async blocked / sync blocked per save: %.2f%%; async snapshot %s per rank, copied by the writer "
              "thread in %s s; async waits at save points: %s s"
              % (100 * mean(res["async"]["async_blocked"]) / mean(res["sync"]["sync_blocked"]),
                 res["async"]["snapshot"], ", ".join("%.3f" % w for w in res["async"]["async_copy"]),
                 ", ".join("%.3f" % w for w in res["async"]["async_wait"])))
    if steady:
        print("steady step time (no saves, steps 2..N): %.3f s" % mean(steady))


if __name__ == "__main__":
    main()
