#!/usr/bin/env python3
"""PyTorch's training step on the shapes tests/gpu/trainer.sh gives zerotrain, for the speed
comparison (tests/gpu/README.md): transformers' causal LM for the config (Qwen3ForCausalLM, or
Qwen3.5's text model, whose Gated DeltaNet layers run flash-linear-attention's Triton kernels when
`fla` imports) cut to each depth, fp32 parameters (the master weights) with bf16 autocast compute,
fused AdamW, SDPA attention (cuDNN's backend first where PyTorch offers it), torch.compile of each
decoder layer (regional compilation: the layers share one compiled graph), micro-batch 1 of random
token ids, the loss over every position (transformers shifts the labels).

A step is forward + backward + optimizer step + zero_grad; its time is the CUDA-event time
(wall time on the CPU) between synchronisations. Prints, per (seq, depth):
  RESULT TAG seq=S layers=L step_ms=MEDIAN (of --steps after --warmup) first_ms=... loss=... \
      peak_gib=... attn_kernel=NAME compile=regional|none
or "... error=oom" / "error=..." and goes on with the next. On the CPU (the proof of this script at
tiny sizes) times mean nothing.

  train_torch.py --config CONFIG.json --depths 2,4 --seqs 2048,8192 [--steps 6 --warmup 2]
                 [--device cuda] [--no-compile] [--budget-s 150] [--tag torch]
"""
import argparse
import gc
import json
import statistics
import sys
import time

import torch


def make_model(src, layers, device):
    from transformers import AutoConfig, AutoModelForCausalLM

    c = dict(src)
    c["num_hidden_layers"] = layers
    if isinstance(c.get("layer_types"), list):
        c["layer_types"] = c["layer_types"][:layers]
    cfg = AutoConfig.for_model(**c)
    cfg._attn_implementation = "sdpa"
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32, attn_implementation="sdpa")
    return model.train()


def sdpa_context(device):
    """SDPA backends in order of preference: cuDNN first (what zerotrain's auto takes), then flash."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if device != "cuda":
        return sdpa_kernel([SDPBackend.MATH, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION])
    order = [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
    try:
        return sdpa_kernel(order, set_priority=True)
    except TypeError:  # an older torch without set_priority: the set, in its own order
        return sdpa_kernel(order)


def attention_kernel(step, device):
    """The name of the attention kernel one step ran (the profiler's kernel names), for the record."""
    if device != "cuda":
        return "cpu"
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    names = [e.key for e in prof.key_averages() if any(k in e.key.lower() for k in ("attn", "attention", "fmha", "sdpa",
                                                                                   "flash", "cudnn"))]
    names = [n for n in names if "delta" not in n.lower() and "chunk" not in n.lower()]
    return (min(names, key=len)[:60].replace(" ", "_") if names else "unknown")


def one(args, src, S, L, compile_layers, note=""):
    dev = args.device
    model = make_model(src, L, dev)
    compiled = "none" + note
    if compile_layers:
        for layer in model.model.layers:
            layer.compile()
        compiled = "regional"
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)
    ids = torch.randint(0, src["vocab_size"], (1, S), device=dev)
    losses = []

    def step():
        with torch.autocast(device_type=dev, dtype=torch.bfloat16), sdpa_context(dev):
            out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(out.loss.detach())

    times = []
    for _ in range(args.warmup + args.steps):
        if dev == "cuda":
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            step()
            b.record()
            torch.cuda.synchronize()
            times.append(a.elapsed_time(b))
        else:
            t = time.time()
            step()
            times.append((time.time() - t) * 1e3)
    kernel = attention_kernel(step, dev)  # one more step, under the profiler
    peak = torch.cuda.max_memory_allocated() / 2**30 if dev == "cuda" else 0.0
    med = statistics.median(times[args.warmup:])
    print("RESULT %s seq=%d layers=%d step_ms=%.2f first_ms=%.1f loss=%.4f peak_gib=%.1f attn_kernel=%s compile=%s"
          % (args.tag, S, L, med, times[0], float(losses[-1]), peak, kernel, compiled), flush=True)
    del model, opt, ids, losses


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--depths", required=True)
    ap.add_argument("--seqs", required=True)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--no-compile", dest="compile", action="store_false")
    ap.add_argument("--budget-s", type=float, default=1e9, help="start no new shape past this many seconds")
    ap.add_argument("--tag", default="torch", help="the RESULT lines' first word")
    a = ap.parse_args()
    t0 = time.time()
    src = json.load(open(a.config))
    if a.device == "cuda" and not torch.cuda.is_available():  # never the 32B shapes on a CPU by accident
        print("RESULT %s error=no_cuda_device" % a.tag, flush=True)
        sys.exit(1)
    import transformers

    info = "torch %s, transformers %s" % (torch.__version__, transformers.__version__)
    if src.get("model_type", "").startswith("qwen3_5"):
        try:
            import fla

            info += ", fla %s (the Gated DeltaNet kernels)" % getattr(fla, "__version__", "?")
        except Exception as e:  # transformers falls back to its PyTorch recurrence: say so
            info += ", no fla (%s): transformers' PyTorch delta rule" % type(e).__name__
    if a.device == "cuda":
        info += ", %s" % torch.cuda.get_device_name()
    print("torch: " + info, flush=True)
    bad = 0
    for S in [int(x) for x in a.seqs.split(",")]:
        for L in [int(x) for x in a.depths.split(",")]:
            if time.time() - t0 > a.budget_s:
                print("RESULT %s seq=%d layers=%d error=skipped_budget" % (a.tag, S, L), flush=True)
                continue
            try:
                try:
                    one(a, src, S, L, a.compile)
                except torch.cuda.OutOfMemoryError:
                    raise
                except Exception as e:  # torch.compile may refuse a model (Triton kernels inside): eager
                    if not a.compile:
                        raise
                    print("torch: seq %d layers %d: torch.compile failed (%s: %s); eager instead"
                          % (S, L, type(e).__name__, str(e)[:300]), file=sys.stderr, flush=True)
                    gc.collect()
                    one(a, src, S, L, False, "(compile_failed:%s)" % type(e).__name__)
            except torch.cuda.OutOfMemoryError:
                print("RESULT %s seq=%d layers=%d error=oom" % (a.tag, S, L), flush=True)
            except Exception as e:  # the next shape may still run; the summary shows this one failed
                bad = 1
                print("RESULT %s seq=%d layers=%d error=%s" % (a.tag, S, L, type(e).__name__), flush=True)
                print("torch: seq %d layers %d: %s" % (S, L, str(e)[:2000]), file=sys.stderr, flush=True)
            gc.collect()
            if a.device == "cuda":
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
    print("torch: total %.1f s" % (time.time() - t0), flush=True)
    sys.exit(bad)


if __name__ == "__main__":
    main()
