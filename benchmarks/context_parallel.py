#!/usr/bin/env python3
"""Context parallelism on the CPU backend: C = 2 on 2 ranks against C = 1 on 1 rank (issues 37, 50).

The same model (Qwen3, default hidden 256, ffn 768, 4 layers, 8 heads / 2 KV heads x 32, vocab 257,
untied; random init from the trainer's seed), the same data (the shipped English text as byte
tokens, blocks of --seq-len) and the same global batch (--global-batch blocks per step: grad-accum at
C = 1 on 1 rank, and at C = 2 on 2 ranks, where both ranks share every block). One thread per rank, so
the 2-rank run has twice the cores: the question is how much of that it turns into speed.
--family qwen3_5 (issue 50): Qwen3.5 instead, the same widths, layers 3 Gated DeltaNet + 1 full
attention (the full layers' heads as above, partial RoPE 1/4), linear key heads --lin-key-heads x
--head-dim and value heads --lin-value-heads x --head-dim, conv kernel 4.

For each run: tokens per second over the steps after --warmup (rank 0's step_time_s), peak memory
per rank (the max RSS of each rank process), and `zerotrain plan --device cpu`'s bytes per rank for
the same job (the engine's own allocation: fp32 state, buffers, activations; not the process itself);
and the losses of the two runs, which must agree (--tol, relative).

--memory-seq S1,S2 adds memory-only runs (one step) at those lengths, to compare peak RSS with plan
at lengths where a timed run would take long (the default adds 32,768).

  python3 benchmarks/context_parallel.py                        # seq 8192, 4 timed steps, + memory at 32768
  python3 benchmarks/context_parallel.py --seq-len 1024 --steps 3 --warmup 1 --memory-seq ""   # quick check

Exit status: 0 the losses agree, 1 they do not or a run failed. Recorded results: docs/benchmarks.md.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
RSS_WRAPPER = ("import resource,subprocess,sys\n"
               "rc = subprocess.call(sys.argv[1:])\n"
               "print('ZT_PEAK_RSS_KB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
               "sys.exit(rc)\n")


def write_config(a, path):
    if a.family == "qwen3_5":
        cfg = {"architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5_text", "vocab_size": 257,
               "hidden_size": a.hidden, "intermediate_size": a.ffn, "num_hidden_layers": a.layers,
               "layer_types": ["full_attention" if (l + 1) % 4 == 0 else "linear_attention" for l in range(a.layers)],
               "num_attention_heads": a.heads, "num_key_value_heads": a.kv_heads, "head_dim": a.head_dim,
               "linear_num_key_heads": a.lin_key_heads, "linear_num_value_heads": a.lin_value_heads,
               "linear_key_head_dim": a.head_dim, "linear_value_head_dim": a.head_dim, "linear_conv_kernel_dim": 4,
               "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "initializer_range": 0.02,
               "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25,
                                   "mrope_interleaved": True,
                                   "mrope_section": [a.head_dim // 16, a.head_dim // 32, a.head_dim // 32]},
               "max_position_embeddings": max(a.seq_len, *a.memory_seq, 2048), "attention_bias": False,
               "hidden_act": "silu", "eos_token_id": 256, "bos_token_id": 256}
        os.makedirs(path, exist_ok=True)
        json.dump(cfg, open(os.path.join(path, "config.json"), "w"), indent=2)
        return
    cfg = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 257,
           "hidden_size": a.hidden, "intermediate_size": a.ffn, "num_hidden_layers": a.layers,
           "num_attention_heads": a.heads, "num_key_value_heads": a.kv_heads, "head_dim": a.head_dim,
           "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": False,
           "initializer_range": 0.02, "max_position_embeddings": max(a.seq_len, *a.memory_seq, 2048),
           "attention_bias": False, "hidden_act": "silu", "use_sliding_window": False, "eos_token_id": 256,
           "bos_token_id": 256}
    os.makedirs(path, exist_ok=True)
    json.dump(cfg, open(os.path.join(path, "config.json"), "w"), indent=2)


def make_data(a, S, nblocks, out):
    raw = open(os.path.join(REPO, "examples", "data", "python-reference.txt"), "rb").read()
    need = nblocks * S
    data = (raw * (need // len(raw) + 1))[:need]  # the text repeated when a long run needs more
    ids = out + ".ids"
    with open(ids, "w") as f:
        for b in range(nblocks):
            f.write(" ".join(str(x) for x in data[b * S:(b + 1) * S]) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run([a.zerotrain, "pack", "--quiet", "--input", "ids", "--vocab-size", "257", "--eos", "none",
                    "--seq-len", str(S), ids, "-o", out], check=True, stdout=subprocess.DEVNULL)


def run(a, model, data, S, ranks, C, steps, name):
    rd = os.path.join(a.work, name)
    shutil.rmtree(rd, ignore_errors=True)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")
    train = [a.zerotrain, "train", "--device", "cpu", "--model", model, "--data", data, "--run-dir", rd,
             "--steps", str(steps), "--micro-batch", "1", "--grad-accum", str(a.global_batch),
             "--context-parallel", str(C), "--lr", "1e-3", "--schedule", "constant", "--warmup", "0",
             "--seed", "1234", "--threads", "1", "--no-save-final", "--no-preflight", "--log-every", "0"]
    cmd = a.mpirun.split() + ["-n", str(ranks), sys.executable, "-c", RSS_WRAPPER] + train
    t0 = time.time()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    log = p.stdout + p.stderr
    open(rd + ".log", "w").write(" ".join(cmd) + "\n" + log)
    if p.returncode != 0:
        sys.exit(f"context_parallel: {name} failed (exit {p.returncode}); log: {rd}.log\n" +
                 "\n".join(log.strip().splitlines()[-5:]))
    rows = [json.loads(l) for l in open(os.path.join(rd, "metrics.jsonl"))]
    peaks = [int(l.split()[1]) * 1024 for l in log.splitlines() if l.startswith("ZT_PEAK_RSS_KB")]
    mem = json.load(open(os.path.join(rd, "run.json")))["memory_per_rank_bytes"]
    plan = subprocess.run([a.zerotrain, "plan", "--device", "cpu", "--model", model, "--world", str(ranks),
                           "--context-parallel", str(C), "--seq-len", str(S), "--micro-batch", "1"],
                          capture_output=True, text=True, check=True).stdout
    plan_total = int([l for l in plan.splitlines() if l.strip().startswith("total")][0].split("(")[1].split()[0])
    if plan_total != sum(mem.values()):
        sys.exit(f"context_parallel: plan --device cpu says {plan_total} bytes, the run reports {sum(mem.values())}")
    print(f"  {name}: {time.time() - t0:.0f} s", flush=True)
    return {"losses": [r["loss"] for r in rows], "times": [r["step_time_s"] for r in rows], "peak_rss": peaks,
            "plan_bytes": plan_total, "command": " ".join(cmd)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--zerotrain", default=os.path.join(REPO, "build", "zerotrain"))
    ap.add_argument("--seq-len", type=int, default=8192)
    ap.add_argument("--memory-seq", default="32768", help="memory-only lengths, comma-separated ('' for none)")
    ap.add_argument("--global-batch", type=int, default=2, help="blocks per step (2)")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=1, help="steps not timed (1)")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--ffn", type=int, default=768)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=32)
    ap.add_argument("--family", choices=("qwen3", "qwen3_5"), default="qwen3")
    ap.add_argument("--lin-key-heads", type=int, default=4, help="qwen3_5: linear key heads (4)")
    ap.add_argument("--lin-value-heads", type=int, default=8, help="qwen3_5: linear value heads (8)")
    ap.add_argument("--tol", type=float, default=1e-5, help="max relative loss difference (1e-5)")
    ap.add_argument("--mpirun", default="mpirun --oversubscribe --allow-run-as-root --bind-to none "
                                        "--mca btl self,vader,tcp --mca btl_vader_single_copy_mechanism none")
    ap.add_argument("--work", default="/tmp/zt-context-parallel")
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args()
    a.memory_seq = [int(x) for x in a.memory_seq.split(",") if x.strip()]
    if a.steps <= a.warmup:
        sys.exit("context_parallel: --steps must exceed --warmup")
    os.makedirs(a.work, exist_ok=True)
    model = os.path.join(a.work, "model")
    write_config(a, model)
    if a.family == "qwen3_5":
        print(f"context_parallel: Qwen3.5 ({a.layers} layers, 3 of 4 linear: key heads {a.lin_key_heads}, value "
              f"heads {a.lin_value_heads} x {a.head_dim})", flush=True)
    print(f"context_parallel: {a.family} d {a.hidden}, ffn {a.ffn}, {a.layers} layers, heads {a.heads}/{a.kv_heads} x "
          f"{a.head_dim}, vocab 257; {a.global_batch} blocks of {a.seq_len} per step; one thread per rank; "
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    data = os.path.join(a.work, f"data{a.seq_len}")
    make_data(a, a.seq_len, a.steps * a.global_batch, data)
    res = {"c1": run(a, model, data, a.seq_len, 1, 1, a.steps, f"c1_s{a.seq_len}"),
           "c2": run(a, model, data, a.seq_len, 2, 2, a.steps, f"c2_s{a.seq_len}")}
    tokens = a.global_batch * a.seq_len
    out = {"seq_len": a.seq_len, "load_after": os.getloadavg()[0], "runs": res, "memory_only": {}}
    bad = 0
    for k, (x, y) in enumerate(zip(res["c1"]["losses"], res["c2"]["losses"])):
        if abs(x - y) > a.tol * abs(x):
            print(f"  step {k + 1}: loss C=1 {x} C=2 {y}: differ by more than {a.tol} relative")
            bad = 1
    tps = {k: tokens * (a.steps - a.warmup) / sum(r["times"][a.warmup:]) for k, r in res.items()}
    print(f"\nseq {a.seq_len}: {'run':<18} {'tok/s':>8} {'peak RSS/rank MiB':>18} {'plan MiB':>9} {'RSS/plan':>8}")
    for k, label in (("c1", "C=1 on 1 rank"), ("c2", "C=2 on 2 ranks")):
        r = res[k]
        pk = max(r["peak_rss"])
        print(f"{'':>10} {label:<18} {tps[k]:8.1f} {pk / 2**20:18.1f} {r['plan_bytes'] / 2**20:9.1f} "
              f"{pk / r['plan_bytes']:8.3f}")
    sp = tps["c2"] / tps["c1"]
    mr = max(res["c2"]["peak_rss"]) / max(res["c1"]["peak_rss"])
    print(f"C=2 / C=1: tokens per second {sp:.2f}x, peak memory per rank {mr:.2f}x; losses "
          f"{'agree' if not bad else 'DIFFER'} (max rel. diff "
          f"{max(abs(x - y) / abs(x) for x, y in zip(res['c1']['losses'], res['c2']['losses'])):.1e})")
    out.update(speedup=sp, memory_ratio=mr)
    for S in a.memory_seq:
        d = os.path.join(a.work, f"data{S}")
        make_data(a, S, a.global_batch, d)
        m = {k: run(a, model, d, S, n, n, 1, f"{k}_s{S}") for k, n in (("c1", 1), ("c2", 2))}
        out["memory_only"][S] = m
        for k in m:
            pk = max(m[k]["peak_rss"])
            print(f"seq {S} {k}: peak RSS/rank {pk / 2**20:.1f} MiB, plan {m[k]['plan_bytes'] / 2**20:.1f} MiB, "
                  f"RSS/plan {pk / m[k]['plan_bytes']:.3f}")
    if a.json:
        json.dump(out, open(a.json, "w"), indent=1)
    sys.exit(bad)


if __name__ == "__main__":
    main()
