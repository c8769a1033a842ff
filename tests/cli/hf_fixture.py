#!/usr/bin/env python3
"""Variants of the committed Hugging Face fixtures for tests/cli/hf_config_cli.sh, and the check that
an output holds the input's tensors. Standard library only (CI has no torch).

  hf_fixture.py config  SRC_JSON DST_JSON KEY=JSON ...   set (KEY=null: a JSON null; KEY=-: remove) top-level
                                                          or nested keys (text_config.tie_word_embeddings)
  hf_fixture.py drop    SRC.safetensors DST.safetensors NAME     every tensor but NAME
  hf_fixture.py fill    SRC.safetensors DST.safetensors PREFIX VALUE   F32 tensors named PREFIX* all VALUE
  hf_fixture.py same    IN_DIR OUT_DIR                  every tensor of IN_DIR is in OUT_DIR with the same dtype,
                                                          shape and bytes, and OUT_DIR has nothing else (exit 1)
"""
import json
import os
import struct
import sys


def read_st(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    meta = head.pop("__metadata__", None)
    return meta, {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in head.items()}


def write_st(path, meta, tensors):
    head, blobs, off = {}, [], 0
    if meta is not None:
        head["__metadata__"] = meta
    for k in sorted(tensors):
        dtype, shape, b = tensors[k]
        head[k] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(head, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def model(d):
    ix = os.path.join(d, "model.safetensors.index.json")
    files = sorted(set(json.load(open(ix))["weight_map"].values())) if os.path.exists(ix) else ["model.safetensors"]
    out = {}
    for f in files:
        out.update(read_st(os.path.join(d, f))[1])
    return out


def main(argv):
    cmd = argv[1]
    if cmd == "config":
        cfg = json.load(open(argv[2]))
        for kv in argv[4:]:
            key, val = kv.split("=", 1)
            *path, last = key.split(".")
            o = cfg
            for p in path:
                o = o[p]
            if val == "-":
                o.pop(last, None)
            else:
                o[last] = json.loads(val)
        with open(argv[3], "w") as f:
            json.dump(cfg, f, indent=2)
            f.write("\n")
    elif cmd == "drop":
        meta, t = read_st(argv[2])
        assert argv[4] in t, f"{argv[4]} is not in {argv[2]}"
        del t[argv[4]]
        write_st(argv[3], meta, t)
    elif cmd == "fill":
        meta, t = read_st(argv[2])
        prefix, value, n = argv[4], float(argv[5]), 0
        for k, (dtype, shape, b) in list(t.items()):
            if k.startswith(prefix) or (prefix.startswith("*") and k.endswith(prefix[1:])):
                assert dtype == "F32", f"{k} is {dtype}"
                t[k] = (dtype, shape, struct.pack("<f", value) * (len(b) // 4))
                n += 1
        assert n, f"no tensor matches {prefix}"
        write_st(argv[3], meta, t)
    elif cmd == "same":
        a, b = model(argv[2]), model(argv[3])
        bad = [k for k in a if k not in b or a[k] != b[k]] + [k for k in b if k not in a]
        print(f"{argv[3]}: {len(b)} tensors, {len(bad)} differ from {argv[2]}{': ' + ', '.join(bad[:5]) if bad else ''}")
        return 1 if bad else 0
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
