"""Shared by the *_vs_torch.py benchmarks: run a C driver on raw fp32 inputs, read its raw fp32
outputs back, and compare them with PyTorch's tensors (max |ours - torch| / max |torch| per tensor)."""

import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def driver_args(ap, driver, tol):
    """The options every *_vs_torch.py takes: --bench (default build/<driver>), --reps, --threads, --tol."""
    ap.add_argument("--bench", default=os.path.join(REPO, "build", driver))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--tol", type=float, default=tol)


def run_driver(cmd, inputs, like, threads):
    """Writes `inputs` (tensors) back to back as little-endian fp32, runs `cmd + ["--in", IN, "--out", OUT]`
    with OMP_NUM_THREADS=threads, and returns (its stdout, its outputs as tensors shaped like `like`).
    A failing driver prints its output and exits 1."""
    with tempfile.TemporaryDirectory() as d:
        fin, fout = os.path.join(d, "in.bin"), os.path.join(d, "out.bin")
        with open(fin, "wb") as f:
            for x in inputs:
                f.write(x.contiguous().numpy().astype("<f4").tobytes())
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        run = subprocess.run(cmd + ["--in", fin, "--out", fout], env=env, capture_output=True, text=True)
        if run.returncode != 0:
            print(run.stdout, run.stderr)
            sys.exit(1)
        flat = np.fromfile(fout, dtype="<f4")
    ours, off = [], 0
    for r in like:
        ours.append(torch.from_numpy(flat[off:off + r.numel()].copy()).reshape(r.shape))
        off += r.numel()
    return run.stdout, ours


def value_after(stdout, key):
    """The number after `key` in the driver's output."""
    return float(stdout.split(key)[1].split()[0])


def compare(names, ours, ref, tol):
    """Prints each tensor's relative error; True when every one is within tol."""
    ok = True
    for name, x, r in zip(names, ours, ref):
        err = ((x - r).abs().max() / r.abs().max().clamp_min(1e-30)).item()
        ok &= err <= tol
        print(f"  {name:6s} rel err {err:.2e} {'ok' if err <= tol else 'FAIL'} (tol {tol:.0e})")
    return ok
