# Writes tests/data/safetensors/python_written.safetensors with Hugging Face's own
# safetensors library, so the C reader is tested against the real producer's layout
# (its header padding, its tensor ordering). Each tensor's expected fp32 values are
# stored beside it as "<name>.expect" (F32 written by torch), so the C test needs no
# Python. Run: python3 tests/reference/make_safetensors_fixtures.py
#   (made with safetensors 0.8.0, torch 2.15.0)
# With --verify FILE it instead checks that the library reads FILE, a file written
# by zerotrain's writer (test_safetensors keeps one when ZT_ST_SAMPLE=FILE is set).
import math
import os
import sys

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "safetensors", "python_written.safetensors")


def ramp(n):
    # Same formula as test_safetensors.c ramp(): values that need rounding in bf16.
    return torch.tensor([math.sin(0.37 * i + 0.1) * (1.0 + 0.25 * i) for i in range(n)], dtype=torch.float32)


def make():
    f32 = ramp(6).reshape(2, 3)
    bf16 = ramp(20).reshape(4, 5).to(torch.bfloat16)
    # fp16 edge cases: smallest subnormal, largest subnormal, smallest normal, max,
    # +-inf, nan, -0, a rounding case.
    f16 = torch.tensor([2.0**-24, 1023 * 2.0**-24, 2.0**-14, 65504.0, math.inf, -math.inf, math.nan, -0.0,
                        0.1, -3.5], dtype=torch.float32).to(torch.float16)
    i64 = torch.tensor([0, -1, 1, 2**40 + 3, -(2**62), 2**63 - 1], dtype=torch.int64)
    i32 = torch.tensor([-(2**31), 2**31 - 1, 7], dtype=torch.int32)
    f64 = torch.tensor([1.0 / 3.0, -1e-300, 1e300], dtype=torch.float64)
    tensors = {
        "model.layers.0.f32": f32,
        "model.layers.0.bf16": bf16,
        "edge.f16": f16,
        "ids.i64": i64,
        "ids.i32": i32,
        "wide.f64": f64,
        "scalar.f32": torch.tensor(2.5, dtype=torch.float32),
        "empty.f32": torch.zeros(0, 3, dtype=torch.float32),
    }
    for name in ["model.layers.0.f32", "model.layers.0.bf16", "edge.f16", "wide.f64"]:
        tensors[name + ".expect"] = tensors[name].to(torch.float32).clone()
    save_file(tensors, OUT, metadata={"format": "pt", "made_by": "make_safetensors_fixtures.py"})
    print("wrote", OUT, os.path.getsize(OUT), "bytes")


def verify(path):
    with safe_open(path, framework="pt") as f:
        print("metadata:", f.metadata())
        for k in f.keys():
            t = f.get_tensor(k)
            print(f"  {k}: {t.dtype} {list(t.shape)} first={t.flatten()[:4].tolist()}")
    load_file(path)  # full validation path
    print("OK: safetensors", __import__("safetensors").__version__, "reads", path)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--verify":
        verify(sys.argv[2])
    else:
        make()
