#!/usr/bin/env bash
# Bit-for-bit check of a refactor of the GPU passes (test tool, not a ctest entry): the same
# `zerotrain train --device cuda` runs on the CPU execution of CUDA with an OLD and a NEW
# zerotrain_cudaemu (build the old one from the commit before the change, copy it aside):
# Qwen3 (tiny_untied_gqa) with GEMM and tiled attention and --recompute, Qwen3.5 (q35_mix,
# q35_tied, q35_mix's config at head_dim 256) likewise, 3 steps of 2 micro-batches each with
# clipping active. Every step's loss, grad_norm and clip_coef in metrics.jsonl and RUN/final's fp32
# model.safetensors must be byte-identical; exit 1 naming the runs that differ. ~45 s here.
#   tests/cudaemu/bit_compare.sh OLD_ZEROTRAIN_CUDAEMU NEW_ZEROTRAIN_CUDAEMU ZEROTRAIN SOURCE_DIR WORK_DIR
set -u
OLD=$1 NEW=$2 ZT=$3 SRC=$4 W=$5
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
rm -rf "$W" && mkdir -p "$W"
GOLD=$SRC/tests/golden
# documents of 3..14 tokens packed into blocks of 32 (isolated documents: positions restart)
awk 'BEGIN{srand(7); for(d=0; d<120; d++){ n=3+int(rand()*12); line=""; for(i=0;i<n;i++) line=line int(rand()*78) " "; print line }}' >"$W/docs.txt"
"$ZT" pack --quiet --input ids --vocab-size 80 --seq-len 32 -o "$W/data" "$W/docs.txt" >/dev/null || exit 1
sed 's/"head_dim": 16,/"head_dim": 256,/' "$GOLD/q35_mix/config.json" >"$W/hd256.json"
mkdir -p "$W/hd256" && cp "$W/hd256.json" "$W/hd256/config.json"
bad=0 n=0
run_pair() {  # NAME ARGS...
    local name=$1; shift
    for v in old new; do
        local bin=$OLD; [ $v = new ] && bin=$NEW
        "$bin" train --data "$W/data" --lr 1e-3 --threads 1 --log-every 1 --no-preflight --device cuda --steps 3 \
            --grad-accum 2 --save-dtype fp32 --run-dir "$W/$name.$v" "$@" >"$W/$name.$v.txt" 2>&1 ||
            { tail -5 "$W/$name.$v.txt"; echo "FAIL $name $v run"; bad=1; return; }
    done
    n=$((n + 1))
    local a b
    a=$(grep -o '"\(loss\|grad_norm\|clip_coef\|step\)":[^,]*' "$W/$name.old/metrics.jsonl" | md5sum)
    b=$(grep -o '"\(loss\|grad_norm\|clip_coef\|step\)":[^,]*' "$W/$name.new/metrics.jsonl" | md5sum)
    local fa fb
    fa=$(md5sum <"$W/$name.old/final/model.safetensors") fb=$(md5sum <"$W/$name.new/final/model.safetensors")
    local att; att=$(grep -o "cuda backend: [^;]*" "$W/$name.new.txt" | head -1)
    if [ "$a" = "$b" ] && [ "$fa" = "$fb" ]; then
        echo "same   $name: metrics and final weights byte-identical ($(grep -c loss "$W/$name.new/metrics.jsonl") steps; $att)"
    else
        echo "DIFFER $name (metrics $([ "$a" = "$b" ] && echo same || echo differ), final $([ "$fa" = "$fb" ] && echo same || echo differ))"
        bad=1
    fi
}
run_pair q3_gemm --init "$GOLD/tiny_untied_gqa" --attention gemm
run_pair q3_tiled --init "$GOLD/tiny_untied_gqa" --attention tiled
run_pair q3_tiled_recompute --init "$GOLD/tiny_untied_gqa" --attention tiled --recompute
run_pair q35_gemm --init "$GOLD/q35_mix" --attention gemm
run_pair q35_tiled --init "$GOLD/q35_mix" --attention tiled
run_pair q35_tied_recompute --init "$GOLD/q35_tied" --attention tiled --recompute
run_pair q35_hd256 --model "$W/hd256/config.json" --attention tiled
echo "$n pairs, bad=$bad"
exit $bad
