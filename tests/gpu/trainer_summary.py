#!/usr/bin/env python3
"""The trainer part of tests/gpu/run.sh's summary: reads the RESULT lines that tests/gpu/trainer.sh
and train_torch.py wrote to LOG (run.sh's trainer.log) and prints the tiny run's checks, the
Qwen3-32B table (zerotrain and PyTorch per length and depth, the marginal cost of one layer from
the two depths) and the Qwen3.5 row. PyTorch's MFU is counted with the trainer's FLOPs of the same
step (model/flops.h: the same shapes and tokens) against the trainer's peak (its TFLOP/s / MFU).
  trainer_summary.py LOG
"""
import re
import sys


def parse(path):
    rows = []
    try:
        lines = open(path, errors="replace").read().splitlines()
    except OSError:
        return rows
    for line in lines:
        if not line.startswith("RESULT "):
            continue
        words = line[7:].split()
        head = words[0] if words and "=" not in words[0] else ""
        kv = dict(w.split("=", 1) for w in words if "=" in w)
        rows.append((head, kv, line))
    return rows


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def fmt(v, f="%.1f", none="?"):
    return none if v is None else f % v


def main():
    rows = parse(sys.argv[1])
    if not rows:
        print("the trainer on the GPU: no RESULT lines (the trainer steps did not run)")
        return
    flat = {}
    for head, kv, _ in rows:
        if not head:
            flat.update(kv)
    print("the trainer on the GPU (`zerotrain train --device cuda` from the bundle):")
    if "trainer_resume_identical" in flat or "trainer_eval_loss" in flat:
        print("  tiny Qwen3: SIGUSR1 stop + resume + --async-save vs uninterrupted: %s; export = RUN/final: %s tensors,"
              " %s differing" % ("identical " + flat.get("trainer_resume_identical", "?").replace("_", " ")
                                 if "trainer_resume_identical" in flat else "FAILED or not run",
                                 flat.get("trainer_export_equal_tensors", "?"), flat.get("differing", "?")))
        print("    eval_loss %s vs transformers' loss of RUN/final %s (rel %s, tol %s); board power: %s samples, max %s W;"
              " attention: %s; preflight exit %s" % (
                  flat.get("trainer_eval_loss", "?"), flat.get("hf_eval_loss", "?"), flat.get("rel", "?"),
                  flat.get("tol", "?"), flat.get("trainer_power_samples", "?"), flat.get("max_w", "?"),
                  flat.get("trainer_attention", "?").replace("_", " "), flat.get("trainer_preflight_exit", "?")))
    zt = {}
    for head, kv, _ in rows:
        if head in ("q3_32b", "q35", "torch_32b", "torch_q35") and "seq" in kv:
            zt[(head, int(kv["seq"]), int(kv["layers"]))] = kv
    peak = None  # FLOP/s, from any trainer row with an MFU
    for (head, _, _), kv in zt.items():
        t, m = num(kv.get("tflops")), num(kv.get("mfu"))
        if head in ("q3_32b", "q35") and t and m:
            peak = t * 1e12 / m
            break

    def torch_cell(tk, flops):
        if tk is None:
            return "not run"
        if "error" in tk:
            return tk["error"]
        ms = num(tk.get("step_ms"))
        mfu = flops / (ms / 1e3) / peak if peak and flops and ms else None
        return "%s ms (MFU %s%%, %s)" % (fmt(ms, "%.1f"), fmt(mfu and 100 * mfu, "%.1f"),
                                        tk.get("attn_kernel", "?") + ", compile " + tk.get("compile", "?"))

    def zt_cell(kv):
        if "error" in kv:
            return kv["error"]
        return "%s ms, %s TFLOP/s, MFU %s%% (%s; init %s s, %s s to the kill)" % (
            kv.get("step_ms", "?"), kv.get("tflops", "?"), fmt(num(kv.get("mfu")) and 100 * num(kv.get("mfu")), "%.1f"),
            kv.get("attention", "?").replace("_", " "), kv.get("init_s", "?"), kv.get("wall_s", "?"))

    seqs = sorted({s for (h, s, _) in zt if h == "q3_32b"} | {s for (h, s, _) in zt if h == "torch_32b"})
    if seqs:
        print("  Qwen3-32B shapes cut to L layers, world 1, 1 x S tokens a step, --attention auto (median of the steps"
              " after the first 2; peak %s TFLOP/s):" % fmt(peak and peak / 1e12, "%.0f"))
    for S in seqs:
        depths = sorted({L for (h, s, L) in zt if s == S and h in ("q3_32b", "torch_32b")})
        for L in depths:
            z, t = zt.get(("q3_32b", S, L)), zt.get(("torch_32b", S, L))
            flops = num(z.get("model_flops")) if z else None
            ratio = ""
            if z and t and num(z.get("step_ms")) and num(t.get("step_ms")):
                ratio = "; zerotrain / PyTorch time %.2f" % (num(z["step_ms"]) / num(t["step_ms"]))
            print("    S=%d L=%d: zerotrain %s | PyTorch %s%s" % (S, L, zt_cell(z) if z else "not run",
                                                            torch_cell(t, flops), ratio))
        if len(depths) >= 2:
            a, b = depths[0], depths[-1]
            za, zb = zt.get(("q3_32b", S, a)), zt.get(("q3_32b", S, b))
            ta, tb = zt.get(("torch_32b", S, a)), zt.get(("torch_32b", S, b))
            line = "    S=%d one layer (from L=%d and L=%d):" % (S, a, b)
            if za and zb and num(za.get("step_ms")) and num(zb.get("step_ms")):
                dt = (num(zb["step_ms"]) - num(za["step_ms"])) / (b - a)
                df = (num(zb["model_flops"]) - num(za["model_flops"])) / (b - a)
                mfu = df / (dt / 1e3) / peak if peak and dt > 0 else None
                line += " zerotrain %.2f ms (%s TFLOP/s, MFU %s%%)" % (dt, fmt(dt > 0 and df / (dt / 1e3) / 1e12, "%.0f"),
                                                                     fmt(mfu and 100 * mfu, "%.1f"))
                if ta and tb and num(ta.get("step_ms")) and num(tb.get("step_ms")):
                    tt = (num(tb["step_ms"]) - num(ta["step_ms"])) / (b - a)
                    line += ", PyTorch %.2f ms; ratio %.2f" % (tt, dt / tt if tt > 0 else float("nan"))
            print(line)
    for (head, S, L), kv in sorted(zt.items()):
        if head != "q35":
            continue
        t = zt.get(("torch_q35", S, L))
        ratio = ""
        if t and num(kv.get("step_ms")) and num(t.get("step_ms")):
            ratio = "; zerotrain / PyTorch time %.2f" % (num(kv["step_ms"]) / num(t["step_ms"]))
        print("  Qwen3.5-27B shapes cut to %d layers (3 Gated DeltaNet + 1 full), S=%d: zerotrain %s | PyTorch %s%s"
              % (L, S, zt_cell(kv), torch_cell(t, num(kv.get("model_flops"))), ratio))
    for head, kv, _ in rows:  # issue 50 item 3: the other attention's run and the losses' agreement
        if head.startswith("q35_") and "seq" in kv:
            print("    the same with --attention %s: %s" % (head[4:], "skipped: " + kv["skipped"].replace("_", " ")
                                                           if "skipped" in kv else zt_cell(kv)))
        if head == "q35_cudnn_vs_gemm":
            print("    the two attentions' losses (cuDNN vs GEMM): %s" % " ".join("%s=%s" % i for i in kv.items()))
    for (head, S, L), kv in sorted(zt.items()):
        if head == "torch_q35" and ("q35", S, L) not in zt:
            print("  Qwen3.5 S=%d L=%d: zerotrain not run | PyTorch %s" % (S, L, torch_cell(kv, None)))
    bad = [line for head, kv, line in rows if "error" in kv]
    for line in bad:
        print("  " + line)


if __name__ == "__main__":
    main()
