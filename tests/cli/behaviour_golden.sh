#!/usr/bin/env bash
# Behaviour held fixed across a refactor: fixed runs (W = 1 and 2 on the CPU, W = 2 on the
# CPU execution of the CUDA code, a supervised run with evaluation, a stop + resume) reduced
# to what must not change: run.json's train settings, every metrics.jsonl loss (training and
# evaluation, as written), every checkpoint dataset's bytes (sha256 of the byte range inspect
# names) and the exported safetensors (sha256). `record` writes the digest to the golden
# file; `check` compares and prints the first differences.
#   behaviour_golden.sh record|check ZEROTRAIN ZEROTRAIN_CUDAEMU|- SOURCE_DIR WORK_DIR GOLDEN
# The CPU backend's products (kernels/cpu/gemm.c) round the same way with each of its sgemm
# kernels, so its sections do not depend on which one the machine runs: the W = 1 run is
# repeated with each narrower kernel this CPU runs (ZT_CPU_GEMM=avx2, generic) and must give
# the same digest. (The other ops call glibc's libm, which picks its own variants per CPU.) The CUDA
# emulation's cuBLASLt runs on OpenBLAS, whose kernel choice is pinned (OPENBLAS_CORETYPE=
# Haswell: AVX2, which every x86-64 CI machine of this project has); every run uses one thread.
# The cuda section is skipped (and not compared) without the cudaemu binary.
set -u
MODE=$1 ZT=$2 ZH=$3 SRC=$4 WORK=$5 GOLDEN=$6
case "$WORK" in /*) ;; *) WORK="$PWD/$WORK" ;; esac
W="$WORK/behaviour"
rm -rf "$W" && mkdir -p "$W"
GOLD="$SRC/tests/golden"
export OPENBLAS_CORETYPE=Haswell OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
MPIRUN=(mpirun --oversubscribe --allow-run-as-root --bind-to none --mca btl self,vader,tcp
        --mca btl_vader_single_copy_mechanism none -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS -x OPENBLAS_CORETYPE)
fail() { echo "FAIL [behaviour]: $*"; exit 1; }
OUT="$W/digest.txt"
: >"$OUT"

# digest NAME RUN: the run's fixed facts, appended to $OUT
digest() {
    local name=$1 run=$2
    {
        echo "== $name"
        # run.json's train object (cJSON's layout, member order included)
        awk '/^\t"train":/ { on = 1 } on { print } on && /^\t}/ { exit }' "$run/run.json" | sha256sum | sed 's/ .*/ train/'
        # every loss as written (training lines: step and loss; evaluation lines: step and eval_loss)
        sed -nE 's/^\{"step":([0-9]+),.*"loss":([^,]+),.*/step \1 loss \2/p; s/^\{"step":([0-9]+),"eval_loss":([^,]+),.*/step \1 eval_loss \2/p' \
            "$run/metrics.jsonl"
        for ck in "$run"/checkpoints/step-????????; do
            [ -d "$ck" ] || continue
            "$ZT" inspect "$ck" | sed -nE 's|^  (/units/[0-9]+/[a-z_]+) .*file bytes \[([0-9]+), ([0-9]+)\).*|\1 \2 \3|p' |
                while read -r ds a b; do
                    echo "$(basename "$ck") $ds $(tail -c +$((a + 1)) "$ck/ckpt.h5" | head -c $((b - a)) | sha256sum | cut -c1-16)"
                done
        done
        for f in "$run"/final/*.safetensors; do
            [ -f "$f" ] && echo "final $(basename "$f") $(sha256sum <"$f" | cut -c1-16)"
        done
    } >>"$OUT"
}

awk 'BEGIN{srand(31); for(d=0; d<64; d++){ line=""; for(i=0;i<16;i++) line=line int(rand()*78) " "; print line }}' >"$W/docs.txt"
"$ZT" pack --quiet --input ids --vocab-size 80 --seq-len 16 -o "$W/data" "$W/docs.txt" >/dev/null || fail "pack"
C=(--init "$GOLD/tiny_untied_gqa" --data "$W/data" --lr 1e-3 --warmup 2 --threads 1 --log-every 0 --save-dtype fp32
   --eval-data "$W/data" --eval-every 3 --eval-batches 2)

"$ZT" train "${C[@]}" --run-dir "$W/cpu_w1" --steps 6 --grad-accum 2 --save-every 3 >"$W/cpu_w1.out" 2>&1 ||
    { cat "$W/cpu_w1.out"; fail "cpu_w1"; }
digest cpu_w1 "$W/cpu_w1"
# the same run with the narrower kernels: the same facts, bit for bit
awk '/^== cpu_w1/ { on = 1; next } /^== / { on = 0 } on' "$OUT" >"$W/cpu_w1.digest"
for isa in avx2 generic; do
    if ! ZT_CPU_GEMM=$isa "$ZT" train "${C[@]}" --run-dir "$W/cpu_w1_$isa" --steps 6 --grad-accum 2 --save-every 3 \
        >"$W/cpu_w1_$isa.out" 2>&1; then
        grep -q "ZT_CPU_GEMM=$isa: not one of" "$W/cpu_w1_$isa.out" && { echo "skip: this CPU does not run $isa"; continue; }
        cat "$W/cpu_w1_$isa.out"; fail "cpu_w1 with ZT_CPU_GEMM=$isa"
    fi
    grep -q "($( [ $isa = avx2 ] && echo AVX2 || echo portable C) sgemm kernel)" "$W/cpu_w1_$isa.out" ||
        { cat "$W/cpu_w1_$isa.out"; fail "ZT_CPU_GEMM=$isa: the start line does not name the $isa kernel"; }
    mv "$OUT" "$OUT.keep"
    digest cpu_w1 "$W/cpu_w1_$isa"
    awk '/^== cpu_w1/ { on = 1; next } /^== / { on = 0 } on' "$OUT" >"$W/cpu_w1_$isa.digest"
    mv "$OUT.keep" "$OUT"
    diff "$W/cpu_w1.digest" "$W/cpu_w1_$isa.digest" >"$W/isa.diff" ||
        { head -20 "$W/isa.diff"; fail "cpu_w1 with the $isa sgemm kernel differs from the default kernel's"; }
    echo "ok [behaviour]: cpu_w1 with the $isa kernel: $(grep -c '' "$W/cpu_w1.digest") facts equal to the default kernel's"
done
timeout 300 "${MPIRUN[@]}" -n 2 "$ZT" train "${C[@]}" --run-dir "$W/cpu_w2" --steps 6 --save-every 3 \
    >"$W/cpu_w2.out" 2>&1 || { cat "$W/cpu_w2.out"; fail "cpu_w2"; }
digest cpu_w2 "$W/cpu_w2"
# a stop at step 4 and a resume to 8 (the tied model)
R=(--init "$GOLD/tiny_tied" --data "$W/data" --lr 1e-3 --threads 1 --log-every 0 --save-dtype fp32 --steps 8)
"$ZT" train "${R[@]}" --run-dir "$W/resume" --debug-signal-at-step 4 >"$W/resume.out" 2>&1 || fail "resume part 1"
"$ZT" train "${R[@]}" --run-dir "$W/resume" --resume >>"$W/resume.out" 2>&1 || { cat "$W/resume.out"; fail "resume"; }
digest resume "$W/resume"
# supervised: conversations, loss masks, isolated documents, evaluation
head -24 "$SRC/examples/sft/conversations.jsonl" >"$W/conv.jsonl"
"$ZT" pack --quiet --input chat --seq-len 128 "$W/conv.jsonl" -o "$W/sft" >/dev/null 2>&1 || fail "pack chat"
"$ZT" train --model "$SRC/examples/tiny-qwen3-chat" --data "$W/sft" --eval-data "$W/sft" --eval-every 2 --steps 3 \
    --threads 1 --log-every 0 --lr 1e-3 --seed 5 --run-dir "$W/sft_run" >"$W/sft.out" 2>&1 || { cat "$W/sft.out"; fail "sft"; }
digest sft "$W/sft_run"
if [ "$ZH" != "-" ] && [ -x "$ZH" ]; then
    timeout 600 "${MPIRUN[@]}" -n 2 "$ZH" train --init "$GOLD/tiny_untied_gqa" --data "$W/data" --lr 1e-3 --threads 1 \
        --log-every 0 --save-dtype fp32 --device cuda --no-preflight --steps 3 --run-dir "$W/cuda_w2" >"$W/cuda.out" 2>&1 ||
        { cat "$W/cuda.out"; fail "cuda_w2"; }
    digest cuda_w2 "$W/cuda_w2"
fi

case "$MODE" in
record)
    cp "$OUT" "$GOLDEN"
    echo "recorded $(grep -c '' "$GOLDEN") lines in $GOLDEN"
    ;;
check)
    # compare the sections this machine ran (the cuda one only with the cudaemu binary)
    want="$W/golden.txt"
    if grep -q '^== cuda_w2' "$OUT"; then cp "$GOLDEN" "$want"
    else awk '/^== / { keep = $2 != "cuda_w2" } keep' "$GOLDEN" >"$want"; fi
    if ! diff "$want" "$OUT" >"$W/diff.txt"; then
        head -40 "$W/diff.txt"
        fail "behaviour differs from $GOLDEN ($(grep -c '^[<>]' "$W/diff.txt") lines; < golden, > now)"
    fi
    echo "ok [behaviour]: $(grep -c '' "$OUT") facts equal to the golden ($(grep -c '^== ' "$OUT") runs)"
    ;;
*) fail "mode must be record or check" ;;
esac
