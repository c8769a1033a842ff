#!/usr/bin/env bash
# CLI tests of `zerotrain inspect` and `zerotrain export` on the checkpoints that
# test_ckpt saved (WORK/run: tiny_untied_gqa at step 30, saved at W=4; WORK/run_tied),
# plus the real full-disk test on a 1 MiB tmpfs. One case per invocation.
#   ckpt_cli.sh ZEROTRAIN WORK CASE [TEST_CKPT MPIEXEC...]   (exit 77 = skipped)
set -u
ZT=$1 WORK=$2 CASE=$3
W="$WORK/cli/$CASE"
umount "$W/tmpfs" 2>/dev/null
rm -rf "$W" && mkdir -p "$W"
RUN="$WORK/run"
fail() { echo "FAIL [$CASE]: $*"; exit 1; }

# expect_error CMD...: the command must exit non-zero, with $EXPECT_RC when set (2: a usage
# error, 1: a failed export or inspect), and print every pattern in $PATTERNS.
expect_error() {
    local rc
    "$@" >"$W/out.txt" 2>&1 && { cat "$W/out.txt"; fail "command succeeded but should have failed: $*"; }
    rc=$?
    [ -z "${EXPECT_RC:-}" ] || [ "$rc" -eq "$EXPECT_RC" ] || { cat "$W/out.txt"; fail "exit $rc, not $EXPECT_RC: $*"; }
    for p in "${PATTERNS[@]}"; do
        grep -q -- "$p" "$W/out.txt" || { cat "$W/out.txt"; fail "error output lacks '$p'"; }
    done
    echo "ok [$CASE]: $(grep -m1 'error' "$W/out.txt")"
}

# flip_byte FILE OFFSET: xor one byte with 0x10.
flip_byte() {
    local b
    b=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
    printf "$(printf '\\%03o' $((b ^ 16)))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

# mount_tmpfs SIZE [NOTE]: a tmpfs of SIZE at D=$W/tmpfs, unmounted at exit; skips the
# case (exit 77, with NOTE) where this machine cannot mount one.
mount_tmpfs() {
    D="$W/tmpfs"
    mkdir -p "$D"
    if ! mount -t tmpfs -o size="$1" tmpfs "$D" 2>"$W/mount.err"; then
        echo "SKIP [$CASE]: cannot mount a tmpfs here ($(tr -d '\n' <"$W/mount.err"))${2:-}"
        exit 77
    fi
    trap 'umount "$D"' EXIT
}

case "$CASE" in
inspect)
    "$ZT" inspect "$RUN" >"$W/out.txt" 2>&1 || { cat "$W/out.txt"; fail "inspect exited non-zero"; }
    cat "$W/out.txt"
    for p in "checkpoint: $RUN/checkpoints/step-00000030" "^step: 30$" "world size at save: 4" "run id: test-run-30" \
             "hidden_size 48" "num_key_value_heads 2" "tie_word_embeddings false" "final: yes" \
             "model.layers.1.mlp.down_proj.weight *\[48, 80\]" "lm_head.weight *\[96, 48\]" \
             "/units/003/adam_v .*crc32c ok" "checksums: ok (.* chunks in 12 datasets verified)" \
             '"micro_batch":2'; do
        grep -q -- "$p" "$W/out.txt" || fail "inspect output lacks '$p'"
    done
    "$ZT" inspect "$RUN/checkpoints/step-00000020" | grep -q "^step: 20$" || fail "inspect of an explicit step dir"
    echo "ok [$CASE]"
    ;;
inspect_corrupt)
    cp -r "$RUN/checkpoints/step-00000030" "$W/step-00000030"
    off=$("$ZT" inspect "$W/step-00000030" | sed -n 's|.*/units/001/master .*file bytes \[\([0-9]*\),.*|\1|p')
    [ -n "$off" ] || fail "no offset for /units/001/master in the inspect output"
    flip_byte "$W/step-00000030/ckpt.h5" $((off + 4 * 123 + 1))
    PATTERNS=("/units/001/master *CRC32C MISMATCH in 1 of" "model.layers.0.self_attn.q_proj.weight"
              "checksums: FAILED (1 bad chunk" "zerotrain: error: .*checksum verification failed")
    expect_error "$ZT" inspect "$W/step-00000030"
    mkdir -p "$W/r/checkpoints/step-00000040.partial"
    PATTERNS=("incomplete checkpoint (.partial" "never loaded")
    expect_error "$ZT" inspect "$W/r/checkpoints/step-00000040.partial"
    PATTERNS=("latest is missing")
    expect_error "$ZT" inspect "$W/r"
    head -c 100000 "$RUN/checkpoints/step-00000030/ckpt.h5" >"$W/r/ckpt.h5"
    PATTERNS=("truncated")
    expect_error "$ZT" inspect "$W/r/ckpt.h5"
    ;;
export)
    "$ZT" export "$RUN" "$W/hf" --dtype fp32 --max-shard-size 20KB >"$W/out.txt" 2>&1 \
        || { cat "$W/out.txt"; fail "export exited non-zero"; }
    cat "$W/out.txt"
    grep -q "exported .*step-00000030 (step 30) to $W/hf: fp32, [0-9]* safetensors files + model.safetensors.index.json" \
        "$W/out.txt" || fail "export summary"
    n=$(ls "$W/hf" | grep -c '^model-.*-of-.*\.safetensors$')
    [ "$n" -ge 2 ] || fail "--max-shard-size 20KB should give several files, got $n"
    [ -s "$W/hf/model.safetensors.index.json" ] && [ -s "$W/hf/config.json" ] || fail "index.json / config.json"
    grep -q '"torch_dtype":[[:space:]]*"float32"' "$W/hf/config.json" || fail "config.json torch_dtype"
    grep -q '"model.layers.1.mlp.down_proj.weight":[[:space:]]*"model-' "$W/hf/model.safetensors.index.json" || fail "weight_map"
    "$ZT" export "$WORK/run_tied/checkpoints/step-00000030" "$W/hf_tied" >"$W/out2.txt" 2>&1 \
        || { cat "$W/out2.txt"; fail "tied bf16 export"; }
    grep -q "bf16, 1 safetensors file," "$W/out2.txt" || { cat "$W/out2.txt"; fail "bf16 single-file summary"; }
    [ -s "$W/hf_tied/model.safetensors" ] && [ ! -e "$W/hf_tied/model.safetensors.index.json" ] || fail "single file"
    echo "ok [$CASE]: $n shard files (fp32), one bf16 file for the tied model"
    ;;
export_bad)
    EXPECT_RC=2  # usage errors
    PATTERNS=("zerotrain export: error: --dtype fp16: expected bf16, bfloat16, fp32, float32 or f32")
    expect_error "$ZT" export --dtype fp16 "$RUN" "$W/o"
    PATTERNS=("zerotrain: error: --max-shard-size: '5XB' is not a size")
    expect_error "$ZT" export --max-shard-size 5XB "$RUN" "$W/o"
    PATTERNS=("export needs CKPT and OUT_DIR (got 1 argument" "usage: zerotrain export")
    expect_error "$ZT" export "$RUN"
    EXPECT_RC=1  # failed exports
    mkdir -p "$W/full" && touch "$W/full/x"
    PATTERNS=("$W/full exists and is not empty")
    expect_error "$ZT" export "$RUN" "$W/full"
    PATTERNS=("no such checkpoint, checkpoints or run directory")
    expect_error "$ZT" export "$W/nope" "$W/o"
    [ ! -e "$W/o" ] || fail "a failed export left $W/o behind"
    ;;
transformers)
    # Optional: the export loads in Hugging Face transformers as Qwen3ForCausalLM.
    command -v python3 >/dev/null || { echo "SKIP [$CASE]: python3 not found"; exit 77; }
    python3 -c "import torch, transformers, safetensors" 2>/dev/null \
        || { echo "SKIP [$CASE]: python torch/transformers/safetensors not installed"; exit 77; }
    for c in run run_tied; do
        "$ZT" export "$WORK/$c" "$W/$c" --dtype fp32 --max-shard-size 30KB >/dev/null || fail "export $c"
    done
    python3 - "$W/run" "$W/run_tied" <<'EOF' || fail "transformers could not load an export"
import glob, sys, torch
from safetensors.torch import load_file
from transformers import Qwen3ForCausalLM
for d in sys.argv[1:]:
  model, info = Qwen3ForCausalLM.from_pretrained(d, dtype=torch.float32, output_loading_info=True)
  missing = [k for k in info["missing_keys"] if not (model.config.tie_word_embeddings and k == "lm_head.weight")]
  assert not missing and not info["unexpected_keys"] and not info["mismatched_keys"], info
  sd = model.state_dict()
  n = 0
  for f in glob.glob(d + "/model*.safetensors"):
    for name, t in load_file(f).items():
      assert torch.equal(sd[name], t), name
      n += 1
  if model.config.tie_word_embeddings:
    assert torch.equal(sd["lm_head.weight"], sd["model.embed_tokens.weight"])
  with torch.no_grad():
    logits = model(torch.tensor([[1, 5, 7, 11, 2]])).logits
  assert torch.isfinite(logits).all()
  print(f"{d}: Qwen3ForCausalLM loaded {n} tensors bit-exactly, logits {tuple(logits.shape)} finite")
EOF
    echo "ok [$CASE]"
    ;;
fulldisk_start)
    # A run directory on a full file system at start: a clear error naming it, at 1 and 2
    # ranks — not a SIGBUS (exit 135) from the flight recorder's mapped file.
    shift 3
    mount_tmpfs 256k
    mkdir -p "$D/run"
    dd if=/dev/zero of="$D/fill" bs=4k 2>/dev/null  # until the file system is full
    SRC=$(cd "$(dirname "$0")/../.." && pwd)
    awk 'BEGIN{srand(3); for(d=0; d<8; d++){ line=""; for(i=0;i<16;i++) line=line int(rand()*90) " "; print line }}' >"$W/docs.txt"
    "$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 16 -o "$W/data" "$W/docs.txt" >/dev/null || fail "pack"
    for n in 1 2; do
        timeout 120 "$@" "$n" "$ZT" train --init "$SRC/tests/golden/tiny_untied_gqa" --data "$W/data" --steps 2 \
            --threads 1 --no-preflight --run-dir "$D/run" >"$W/out$n.txt" 2>&1
        rc=$?
        [ "$rc" -ne 0 ] && [ "$rc" -lt 128 ] || { cat "$W/out$n.txt"; fail "$n rank(s): exit $rc (want a clean error, not a signal)"; }
        grep -q "$D/run" "$W/out$n.txt" || { cat "$W/out$n.txt"; fail "$n rank(s): the error must name the run directory"; }
        grep -Eq "full|No space left" "$W/out$n.txt" || { cat "$W/out$n.txt"; fail "$n rank(s): the error must say the disk is full"; }
        echo "ok [$CASE]: $n rank(s), exit $rc: $(grep -m1 -E 'error' "$W/out$n.txt" | cut -c1-200)"
    done
    ;;
fulldisk_tmpfs)
    # Real ENOSPC: a 1 MiB tmpfs holds one tiny checkpoint but not two.
    shift 3
    TEST=$1
    shift
    mount_tmpfs 1m "; ckpt_fulldisk_inject covers the failure path with an injected write error"
    echo "using a 1 MiB tmpfs mounted at $D"
    timeout 120 "$@" "$TEST" fulldisk "$D" tmpfs || fail "full-disk test failed (rc $?)"
    echo "ok [$CASE]"
    ;;
*)
    fail "unknown case"
    ;;
esac
