#!/usr/bin/env python3
"""Seeds for fuzz_flight and fuzz_watch (called by make_seeds.sh): flight recorders in the
layout of engine/flight.h with small rings (a file fits the fuzzers' -max_len of 8192),
and run directories' watcher files in fuzz_watch's container (watch.json NUL
heartbeat.json NUL run.json NUL rank 0's flight recorder).
  flight_seeds.py CORPUS_DIR   (writes CORPUS_DIR/flight/* and CORPUS_DIR/watch/*)"""
import json
import os
import struct
import sys

OPS = {"allgather": 1, "reduce_scatter": 2, "allreduce": 3, "broadcast": 4, "barrier": 5, "alltoall": 6}  # engine/coll.h
DONE, WAITING, ISSUED = 3, 2, 1
T0 = 1796388000 * 10**9  # ns, 2026-12


def header(cap, issued, rank=0, world=2, status=0, step=7, pid=4242, host=b"node0"):
    h = b"ZTFLIGHT" + struct.pack("<IIIIii", 1, 128, 128, cap, rank, world)
    h += struct.pack("<Qqqiiq", issued, step, 0, 1, pid, T0)
    h += struct.pack("<Ii", status, 0) + host.ljust(48, b"\0")
    assert len(h) == 128
    return h


def record(seq, op, state, label, step=7, t_end=True):
    start = T0 + seq * 10**6
    r = struct.pack("<IBBBBQQQqqqqiiB7x", 2 * seq, OPS[op], 0, 0, state, seq, 4096, 1024,
                    start, start + 5000 if t_end else 0, step, 0, 1, -1, 1 if op in ("barrier", "allreduce") else 0)
    r += label.encode().ljust(48, b"\0")
    assert len(r) == 128
    return r


def ring(cap, issued, last_state=DONE, rank=0, world=2, status=0, last_op="allgather", last_label="unit 5 params",
         hdr_issued=None):
    """A ring the writer would leave after `issued` collectives; hdr_issued overrides the header's count."""
    slots = [b"\0" * 128] * cap
    for s in range(max(1, issued - cap + 1), issued + 1):
        last = s == issued
        slots[(s - 1) % cap] = record(s, last_op if last else ("allgather" if s % 2 else "reduce_scatter"),
                                      last_state if last else DONE, last_label if last else "unit %d" % (s % 64),
                                      t_end=not last or last_state == DONE)
    return header(cap, issued if hdr_issued is None else hdr_issued, rank, world, status) + b"".join(slots)


def main(out):
    fl = os.path.join(out, "flight")
    wa = os.path.join(out, "watch")
    os.makedirs(fl, exist_ok=True)
    os.makedirs(wa, exist_ok=True)
    seeds = {
        "fresh": ring(4, 0),
        "done_3": ring(4, 3),
        "wrapped_waiting": ring(16, 37, WAITING, rank=1, world=4),
        "aborted_barrier": ring(8, 9, WAITING, status=2, last_op="barrier", last_label="epoch-end save"),
        "one_slot": ring(1, 5, ISSUED),
        # The battery's file (issue 35): issued = 2^64 - 1 spun `watch --once` and `report`.
        "found_issued_max": ring(16, 20, hdr_issued=2**64 - 1),
    }
    for name, b in seeds.items():
        open(os.path.join(fl, name), "wb").write(b)

    run = {"format": "zerotrain-run", "run_id": "20261204T125235Z-2d65a9", "world_size": 2, "backend": "cpu",
           "model": "tests/golden/tiny_untied_gqa",
           "model_config": {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
                            "num_key_value_heads": 2, "vocab_size": 96},
           "param_count": 120000, "train": {"total_steps": 100, "micro_batch": 1, "grad_accum": 1},
           "data": {"seq_len": 16}}
    hb = {"run_id": run["run_id"], "state": "running", "step": 7, "total_steps": 100, "epoch": 0, "tokens": 224,
          "time": T0 / 1e9, "elapsed_s": 3.5, "step_time_s": 0.5, "tok_per_s": 64, "loss": 4.6, "world_size": 2,
          "gpu_hours": 0.001, "gpu_hours_per_epoch": 0.02, "gpu_hours_at_risk": 0.001}
    watch = {"format": "zerotrain-watch", "version": 1, "state": "CRASHED", "exit_code": 3,
             "reason": "liveness ticks stopped: rank 1 (1 of 2) not updated for over 15 s",
             "diagnosis": "rank 1: reduce_scatter(\"unit 4 grads\") seq 36; rank 0: allgather(\"unit 5 params\") seq 37",
             "time": T0 / 1e9 + 60, "run_dir": "runs/x", "world": 2, "details": ["rank 0: tick 1 s ago"]}

    def container(w, h, r, flight):
        parts = [json.dumps(x).encode() if isinstance(x, dict) else x for x in (w, h, r)]
        return b"\0".join(parts) + b"\0" + flight

    wseeds = {
        "crashed": container(watch, hb, run, ring(8, 12, WAITING)),
        "hung": container(dict(watch, state="HUNG", exit_code=4), hb, run, ring(8, 30, WAITING, last_op="barrier")),
        "running_no_flight": container(dict(watch, state="RUNNING"), hb, run, b""),
        "failed_markup": container(dict(watch, state="FAILED", reason="<script>alert(1)</script> & \"q\""),
                                   dict(hb, state="failed", error="<b>x</b>"), run, ring(4, 2)),
        # The battery's two cases (issue 35): report with a CRASHED watch.json over the spinning
        # recorder; a heartbeat world_size of 2^31 - 1 (out of memory) in watch and report.
        "found_crashed_issued_max": container(watch, hb, run, ring(8, 12, hdr_issued=2**64 - 1)),
        "found_world_2g": container(watch, dict(hb, world_size=2**31 - 1), dict(run, world_size=2**31 - 1),
                                    ring(8, 12, WAITING)),
    }
    for name, b in wseeds.items():
        assert len(b) <= 8192, (name, len(b))
        open(os.path.join(wa, name), "wb").write(b)


if __name__ == "__main__":
    main(sys.argv[1])
