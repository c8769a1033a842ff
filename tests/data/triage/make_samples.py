#!/usr/bin/env python3
"""Writes the small sample logs in this directory (committed; rerun only to change them).

States follow the field report's B300 table (board power per GPU, utilization):
compute 940-1040 W at ~100% even; communication ~640 W at 100% even; data starvation
~575 W at 55-100% uneven; deadlock 190-195 W with one rank at 0% and the others at 100%;
checkpoint: the same but only rank 0 at 0%; idle ~135 W at 0% everywhere.

  node0.smi.csv, node1.smi.csv  nvidia-smi --query-gpu CSV of two 4-GPU nodes (job GPUs
                                0-3 and 4-7): compute, checkpoint, compute, deadlock with
                                job GPU 5 (node 1 index 1) at 0%, idle
  node.dmon.log                 nvidia-smi dmon without timestamps, 4 GPUs: compute,
                                starvation, communication, compute (no deadlock)
  idle.dmon-dt.log              nvidia-smi dmon -o DT, 4 GPUs idle
  ranks/rank-0000N.power.csv    the trainer's per-rank files, 4 ranks sampling out of
                                phase: compute, then deadlock with rank 2 at 0%
"""
import random, time, os

random.seed(20251129)
T0 = 1764423900  # 2025-11-29 13:45:00 UTC
HERE = os.path.dirname(os.path.abspath(__file__))
os.environ["TZ"] = "UTC"
time.tzset()


def reading(state, gpu, culprit):
    u = random.uniform
    if state == "compute": return u(945, 1035), u(98, 100)
    if state == "comm": return 640 + random.gauss(0, 8), u(97, 100)
    if state == "starv": return 575 + random.gauss(0, 12), u(55, 100)
    if state == "ckpt": return (u(150, 200), u(0, 2)) if gpu == 0 else (u(189, 196), 100)
    if state == "deadlock": return u(188, 197), (0 if gpu == culprit else 100)
    if state == "idle": return 135 + random.gauss(0, 2.5), 0
    raise ValueError(state)


def trace(segments, ngpu):
    rows = []
    for state, secs, culprit in segments:
        for _ in range(secs):
            rows.append([reading(state, g, culprit) for g in range(ngpu)])
    return rows


def smi(path, rows, g0, g1):
    with open(path, "w") as f:
        f.write("timestamp, index, power.draw [W], utilization.gpu [%]\n")
        for s, r in enumerate(rows):
            ts = time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(T0 + s)) + ".%03d" % random.randint(100, 140)
            for g in range(g0, g1):
                f.write("%s, %d, %.2f W, %.0f %%\n" % (ts, g - g0, r[g][0], r[g][1]))


def dmon(path, rows, dt):
    with open(path, "w") as f:
        for s, r in enumerate(rows):
            if s % 20 == 0:
                if dt:
                    f.write("#Date       Time        gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk \n")
                    f.write("#YYYYMMDD   HH:MM:SS    Idx      W      C      C      %      %      %      %      %      %    MHz    MHz \n")
                else:
                    f.write("# gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk \n")
                    f.write("# Idx      W      C      C      %      %      %      %      %      %    MHz    MHz \n")
            for g, (p, u) in enumerate(r):
                pre = time.strftime(" %Y%m%d   %H:%M:%S ", time.localtime(T0 + s)) if dt else ""
                f.write("%s   %4d   %4.0f     47      -   %4.0f     38      0      0      0      0   3996   1965 \n" % (pre, g, p, u))


day = trace([("compute", 20, 0), ("ckpt", 8, 0), ("compute", 10, 0), ("deadlock", 15, 5), ("idle", 7, 0)], 8)
smi(os.path.join(HERE, "node0.smi.csv"), day, 0, 4)
smi(os.path.join(HERE, "node1.smi.csv"), day, 4, 8)
dmon(os.path.join(HERE, "node.dmon.log"),
     trace([("compute", 25, 0), ("starv", 8, 0), ("comm", 8, 0), ("compute", 9, 0)], 4), False)
dmon(os.path.join(HERE, "idle.dmon-dt.log"), trace([("idle", 30, 0)], 4), True)
rows = trace([("compute", 20, 0), ("deadlock", 10, 2)], 4)
for g in range(4):
    phase = random.uniform(0, 0.9)
    with open(os.path.join(HERE, "ranks", "rank-%05d.power.csv" % g), "w") as f:
        f.write("time,gpu,power_w,util_pct,mem_used_mib\n")
        for s, r in enumerate(rows):
            f.write("%.3f,%d,%.1f,%.0f,%d\n" % (T0 + s + phase, g, r[g][0], r[g][1], 81234 + random.randint(0, 50)))
