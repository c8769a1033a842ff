#!/usr/bin/env bash
# tests/gpu/run.sh's trainer steps (tests/gpu/trainer.sh) on the CPU execution of CUDA at tiny
# sizes: run.sh itself with ZT_STEPS=STEPS, ZT_ZEROTRAIN=zerotrain_cudaemu (the real CLI with
# the GPU code on tests/cudaemu) and ZT_TINY=1, the stand-in NVML of tests/fakenvml for the
# power check; no GPU-only build. Passes when run.sh exits 0, its summary reports every step
# passed (exit 0) and trainer.log holds each step's RESULT lines with numbers in them. The
# times mean nothing here: what is proven is the steps' logic (data, weights, plan's fit, the
# kill after the measured steps, the checks, the PyTorch scripts, the summary), before a GPU
# lease is spent on it. 77 without python3's torch and transformers (the reference scripts').
#   test_trainer_steps.sh ZEROTRAIN_CUDAEMU FAKENVML_DIR WORK STEPS
set -u
EMU=$1 NVML=$2 WORK=$3 STEPS=$4
SRC=$(cd "$(dirname "$0")/../.." && pwd)
fail() { echo "FAIL: $*"; exit 1; }
python3 -c "import torch, transformers" 2>/dev/null ||
    { echo "SKIP: python3 has no torch and transformers (make_weights.py, hf_eval.py, train_torch.py need them)"; exit 77; }
rm -rf "$WORK" && mkdir -p "$WORK"
env ZT_BUILD_DIR="$WORK" ZT_STEPS="$STEPS" ZT_ZEROTRAIN="$EMU" ZT_TINY=1 LD_LIBRARY_PATH="$NVML" \
    OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    bash "$SRC/tests/gpu/run.sh" >"$WORK/run.out" 2>&1
rc=$?
S=$WORK/logs/summary.txt L=$WORK/logs/trainer.log
[ "$rc" = 0 ] || { tail -40 "$WORK/run.out"; fail "run.sh exited $rc"; }
[ -s "$S" ] && [ -s "$L" ] || { tail -20 "$WORK/run.out"; fail "no summary.txt or trainer.log"; }
grep -q "no GPU-only build" "$WORK/run.out" || fail "run.sh built the GPU-only variant for trainer steps"
# each step: its exit in the summary, its RESULT lines in trainer.log (a number where a time is)
declare -A want=([trainer]="trainer_resume_identical=8_steps|trainer_export_equal_tensors=[0-9]+ differing=0|trainer_eval_loss=[0-9.]+ hf_eval_loss=[0-9.]+ rel=|trainer_power_samples=[1-9]"
                 [trainer_32b]="q3_32b seq=16 layers=1 step_ms=[0-9.]+|q3_32b seq=32 layers=2 step_ms=[0-9.]+"
                 [torch_32b]="torch_32b seq=16 layers=1 step_ms=[0-9.]+|torch_32b seq=32 layers=2 step_ms=[0-9.]+"
                 [trainer_q35]="q35 seq=32 layers=4 step_ms=[0-9.]+"
                 [torch_q35]="torch_q35 seq=32 layers=4 step_ms=[0-9.]+")
for st in ${STEPS//,/ }; do
    grep -q "trainer steps:.* $st 0[;]*\( \|$\)" "$S" || { grep "trainer steps" "$S"; fail "$st: not reported passed"; }
    IFS='|' read -ra pats <<<"${want[$st]}"
    for p in "${pats[@]}"; do
        grep -Eq "^RESULT $p" "$L" || { grep '^RESULT' "$L"; fail "$st: no line matching 'RESULT $p'"; }
    done
done
grep -A30 "^the trainer on the GPU" "$S"
echo "ok: run.sh's steps $STEPS ran on the CPU execution of CUDA and reported"
