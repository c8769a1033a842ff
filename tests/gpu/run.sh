#!/usr/bin/env bash
# One script for a GPU machine (nvcc 13, cmake, ninja, PyTorch; no MPI, HDF5,
# OpenBLAS or cJSON): builds the CUDA kernels and the GPU tests with
# ZT_GPU_ONLY=ON for sm_90, then runs
#   1. tests/gpu/test_cuda_ops   every op vs the CPU reference (errors vs tolerances)
#   2. tests/gpu/train_tiny      20 training steps, GPU vs CPU losses (tiny config)
#   2a. tests/gpu/test_cuda_ops_qwen3_5, test_qwen3_5_cuda   Qwen3.5's kernels vs the CPU ops and
#       its GPU passes unit by unit vs its CPU passes (logs in build-logs), among them a config with
#       head_dim 256 (Qwen3.5-27B's full-attention head); the tiled attention's own head_dim-256
#       checks are in step 1's op test, and the summary gives both
#   2b. tests/gpu/test_fsdp_cuda the GPU FSDP engine (NCCL world 1) vs the CPU reference
#       trainer, 20 steps untied + tied, schedule, no per-step allocation, determinism
#       (built when NCCL is found: toolkit, NCCL_ROOT or PyTorch's nvidia-nccl wheel)
#   3. tests/gpu/bench_layer     Qwen3-32B layer fwd+bwd at seq 2048 and 8192, TFLOP/s, % of
#       the measured matmul peak
#   4. tests/gpu/bench_layer_torch.py   transformers' Qwen3DecoderLayer, same shapes, both lengths
#   5. bench_layer --attn tiled the same layer with the tiled attention (the trainer's default
#       where cuDNN cannot serve): at head_dim 128 the tensor-core kernels (kernels/cuda/
#       attention_tc.cu, RESULT attn=tiled-tc), both lengths; then --attn tiled-scalar (the fp32
#       CUDA-core tiles, attention_tiled.cu) at 2048 for the comparison, time permitting
#   5b. bench_layer --attn cudnn the same layer with cuDNN's fused flash attention, both lengths
#       (only when configure found cuDNN and time permits)
#   6. tests/gpu/bench_fsdp_cuda the GPU engine end to end at 32B shapes (2 layers), vs the
#       same ops without the engine, and its MFU by the trainer's formula (when NCCL was found
#       and time permits)
#   7. (time permitting) compute-sanitizer memcheck on a quick op test
# and, with the bundle of the full zerotrain (tests/gpu/bundle.sh: zerotrain, its CUDA module
# and the MPI/HDF5/... libraries the image lacks, carried as gpu-bundle/; tests/gpu/README.md),
# `zerotrain train --device cuda` itself (tests/gpu/trainer.sh, issue 51; the times are
# estimates for an H200: none of these steps has run on a GPU yet):
#   T1. trainer      tiny Qwen3: train, SIGUSR1 stop, resume with --async-save (identical
#                    losses), export (= RUN/final), transformers' loss of RUN/final = the trainer's
#                    eval_loss, board power in RUN/ranks/*.power.csv, --attention auto's choice  (~40 s)
#   T2. trainer_32b  Qwen3-32B shapes cut to 2 layers and to the deepest (<= 6) `plan` fits, at
#                    2,048 and 8,192 tokens: step time, TFLOP/s, MFU from metrics.jsonl    (~110 s)
#   T3. torch_32b    PyTorch (transformers, fp32 master + bf16 autocast, fused AdamW, SDPA,
#                    torch.compile per layer) on the same shapes                           (~100 s)
#   T4. trainer_q35  Qwen3.5-27B shapes cut to 4 layers (3 DeltaNet + 1 full) at 8,192, --attention
#                    auto (cuDNN at head_dim 256 where it serves), then the other of cuDNN / GEMM:
#                    losses compared to 1e-2, both step times                               (~80 s)
#   T5. torch_q35    transformers' Qwen3.5 with flash-linear-attention (the bundle's wheels) (~90 s)
#   D1. delta_tc     the delta rule at the 27B's linear-layer shape, 8,192 tokens, fwd + bwd:
#                    fp32 chunked kernels vs tensor-core ones (tests/gpu/bench_delta.c) vs fla's
#                    chunk_gated_delta_rule (bench_delta_fla.py, the bundle's wheels)  (~60 s)
# In the order: correctness first (ops, train_tiny, qwen3_5, the engine, NCCL world 1, T1),
# then speed (the layer benchmark with GEMM, tiled and cuDNN attention, PyTorch's layer, T2-T5),
# then the extras (bench_fsdp, memcheck), each speed step only while the call's budget
# (ZT_BUDGET_S, default 480 s: one device call of 8 minutes) leaves it room, and prints a
# short summary last. Logs go to $OUT (the device tool's folder) when set, else
# build-gpu/logs: the programs' logs, trainer.log (T1-T5), summary.txt and build-logs.tgz
# (every log, the trainer runs' logs and power.csv), 8 files at most (what the device tool
# returns: the least important logs stay only in build-logs.tgz when there are more).
#   bash tests/gpu/run.sh            (from the repository root or anywhere)
# Environment: ZT_BUILD_DIR (default build-gpu), ZT_SKIP_SANITIZER=1, ZT_ARCH (default 90),
# ZT_STEPS (a comma list of the steps to run: ops, train_tiny, qwen3_5, fsdp, comm_nccl, trainer,
# bench, torch, bench_tiled, bench_cudnn, trainer_32b, torch_32b, trainer_q35, torch_q35,
# delta_tc, bench_fsdp, memcheck; default all; q35_cp only when named (2 GPUs: tests/gpu/q35_cp.sh); the
# GPU-only build runs only for the steps that need it:
# the bench steps take the bundle's bench_layer when it has one),
# ZT_BUNDLE_DIR (default ROOT/gpu-bundle: bundle.tgz, wheels/), ZT_ZEROTRAIN (a zerotrain to run
# instead of the bundle's: zerotrain_cudaemu for the CPU proof, with ZT_TINY=1),
# ZT_SUMMARY_ONLY=1 (only re-print the summary from the logs in $OUT or build-gpu/logs).
set -u
T0=$(date +%s)
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${ZT_BUILD_DIR:-$ROOT/build-gpu}
LOGS=${OUT:-$BUILD/logs}    # test logs (at most 6 files + summary.txt + build-logs.tgz: the device tool returns 8)
BLOGS=$BUILD/build-logs     # configure/build logs stay on the machine (shown on failure)
mkdir -p "$LOGS" "$BLOGS"
elapsed() { echo $(( $(date +%s) - T0 )); }
. "$ROOT/tests/gpu/rerun.sh"  # needs_sync_rerun
say() { echo "[run.sh $(elapsed)s] $*"; }
# run NAME TIMEOUT CMD...: output to the terminal and $LOGDIR/NAME.log (appended with APPEND=1); sets RC
LOGDIR=$LOGS
# ZT_STEPS=ops,bench,...: run only these steps (a step's _sync rerun goes with it; configure and
# build run when a listed step needs them); for a second call that reruns what failed.
want() {
    case "$1" in configure | build | build_nccl) [ "$NEED_BUILD" = 1 ]; return ;; esac
    [ -z "${ZT_STEPS:-}" ] || [[ ",$ZT_STEPS," == *",${1%_sync},"* ]]
}
# listed ",a,b,": one of these steps is wanted
listed() {
    local s
    [ -z "${ZT_STEPS:-}" ] && return 0
    for s in ${ZT_STEPS//,/ }; do [[ $1 == *",$s,"* ]] && return 0; done
    return 1
}
BUDGET=${ZT_BUDGET_S:-480}
time_left() { [ $(($(elapsed) + $1)) -le "$BUDGET" ]; }  # NEED seconds still fit in the call's budget
cap() {  # a step's time limit: LIMIT, or what is left of the budget (at least 30 s)
    local left=$((BUDGET - $(elapsed)))
    [ "$left" -lt 30 ] && left=30
    [ "$1" -lt "$left" ] && echo "$1" || echo "$left"
}
BUNDLE_DIR=${ZT_BUNDLE_DIR:-$ROOT/gpu-bundle}
# The GPU-only build: for the steps that test kernels and the engine; the layer benchmark's steps
# use the bundle's bench_layer when it has one (no build needed).
BUILD_STEPS=",ops,train_tiny,qwen3_5,delta_tc,fsdp,comm_nccl,bench_fsdp,memcheck,"
BENCH_STEPS=",bench,bench_tiled,bench_cudnn,"
TRAINER_STEPS=",trainer,trainer_32b,torch_32b,trainer_q35,torch_q35,"
NEED_BUILD=0
if listed "$BUILD_STEPS"; then
    NEED_BUILD=1
elif listed "$BENCH_STEPS" && ! tar -tzf "$BUNDLE_DIR/bundle.tgz" zt/usr/bin/bench_layer >/dev/null 2>&1; then
    NEED_BUILD=1
fi
run() {
    local name=$1 limit=$2
    shift 2
    if ! want "$name"; then
        say "$name: skipped (not in ZT_STEPS=$ZT_STEPS)"
        RC=skipped
        return
    fi
    say "$name: $*"
    set -o pipefail
    if [ -n "${QUIET:-}" ]; then  # log only, then the last lines (sanitizer reports can be long)
        timeout --kill-after=10 "$limit" "$@" >"$LOGDIR/${LOGAS:-$name}.log" 2>&1
        RC=$?
        tail -n 25 "$LOGDIR/${LOGAS:-$name}.log"
    else
        timeout --kill-after=10 "$limit" "$@" 2>&1 | tee ${APPEND:+-a} "$LOGDIR/${LOGAS:-$name}.log"
        RC=$?
    fi
    set +o pipefail
    [ "$RC" = 124 ] && echo "$name: TIMED OUT after ${limit}s" | tee -a "$LOGDIR/${LOGAS:-$name}.log"
    say "$name: exit $RC"
}

OPS_RC=? TRAIN_RC=? BENCH_RC=? TORCH_RC=? NCCL_RC="not run" MEMCHECK="not run" FSDP_RC="not built"
CUDNN_RC="not run" BENCH8_RC="not run" BFSDP_RC="not run" TILED_RC="not run" Q35_RC="not run"
T1_RC="not run" T2_RC="not run" T3_RC="not run" T4_RC="not run" T5_RC="not run" BUNDLE_NOTE="not used"
if [ "${ZT_SUMMARY_ONLY:-0}" = 1 ]; then  # re-print the summary from logs already in $LOGS
    SKIP_RUN=1
fi
if [ -z "${SKIP_RUN:-}" ]; then
say "host $(hostname), $(nproc) cores; logs in $LOGS"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.draw,temperature.gpu \
    --format=csv 2>&1
nvcc --version | tail -2

# ---- build ----------------------------------------------------------------------------
LOGDIR=$BLOGS
# The python3 on the PATH (PyTorch's, with the nvidia-nccl/-cudnn wheels) finds the wheels;
# CMake's own search could pick another interpreter.
PYARG=()
command -v python3 >/dev/null && PYARG=(-DPython3_EXECUTABLE="$(command -v python3)")
NCCL_BUILD_RC=none
if [ "$NEED_BUILD" = 1 ]; then
    run configure 120 cmake -S "$ROOT" -B "$BUILD" -G Ninja -DZT_GPU_ONLY=ON -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_CUDA_ARCHITECTURES="${ZT_ARCH:-90}" "${PYARG[@]}"
    [ "$RC" = 0 ] || { echo "configure failed"; exit 2; }
    run build 300 cmake --build "$BUILD" -j "$(nproc)" --target test_cuda_ops train_tiny bench_layer
    [ "$RC" = 0 ] || { echo "build failed"; exit 2; }
    # NCCL-dependent programs: only when configure found NCCL (a failure here is reported, not fatal)
    if grep -q "test_fsdp_cuda" "$BUILD/build.ninja" 2>/dev/null; then
        run build_nccl 240 cmake --build "$BUILD" -j "$(nproc)" --target test_fsdp_cuda test_comm_nccl bench_fsdp_cuda
        NCCL_BUILD_RC=$RC
    else
        grep -h "NCCL" "$BLOGS/configure.log" | tail -2
    fi
else
    say "no GPU-only build: no step in ZT_STEPS=$ZT_STEPS needs it"
fi
BIN=$BUILD/tests
LOGDIR=$LOGS

# ---- the bundle: the full zerotrain, its CUDA module and the libraries the image lacks --------
# Unpacked under the build folder (never over /); run through in-bundle, which sources its env.sh
# (loader, Open MPI, PMIx) and adds the image's CUDA libraries: PyTorch's nvidia-* wheels (cuDNN,
# NCCL, cuBLASLt, NVRTC), then the toolkit's. ZT_ZEROTRAIN instead: that binary as it is.
ZT_CMD='' BENCH_BUNDLE=()
setup_bundle() {
    if [ -n "${ZT_ZEROTRAIN:-}" ]; then
        ZT_CMD=$ZT_ZEROTRAIN BUNDLE_NOTE="ZT_ZEROTRAIN=$ZT_ZEROTRAIN"
        return 0
    fi
    [ -f "$BUNDLE_DIR/bundle.tgz" ] ||
        { BUNDLE_NOTE="no $BUNDLE_DIR/bundle.tgz (tests/gpu/bundle.sh here, then carry gpu-bundle)"; return 1; }
    local B=$BUILD/bundle cuda_libs d
    rm -rf "$B" && mkdir -p "$B" && tar -xzf "$BUNDLE_DIR/bundle.tgz" -C "$B" ||
        { BUNDLE_NOTE="bundle.tgz did not unpack"; return 1; }
    cuda_libs=$(python3 - 2>/dev/null <<'EOF'
import importlib, os
dirs = []
for n in ("nvidia.cudnn", "nvidia.nccl", "nvidia.cu13", "nvidia.cublas", "nvidia.cuda_nvrtc", "nvidia.cuda_runtime"):
    try:
        m = importlib.import_module(n)
    except Exception:
        continue
    for p in m.__path__:
        d = os.path.join(p, "lib")
        if os.path.isdir(d) and d not in dirs:
            dirs.append(d)
print(":".join(dirs))
EOF
    )
    for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
        [ -d "$d" ] && cuda_libs="$cuda_libs${cuda_libs:+:}$d"
    done
    cat >"$B/in-bundle" <<EOF
#!/usr/bin/env bash
# a command with the bundle's libraries, Open MPI and PMIx, and the image's CUDA libraries
. "$B/zt/env.sh"
export LD_LIBRARY_PATH="\$LD_LIBRARY_PATH:$cuda_libs"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NCCL_SOCKET_IFNAME=\${NCCL_SOCKET_IFNAME:-lo}  # world 1 on one machine, as the engine tests run NCCL there
exec "\$@"
EOF
    printf '#!/bin/sh\nexec "%s" "%s" "$@"\n' "$B/in-bundle" "$B/zt/usr/bin/zerotrain" >"$B/zerotrain"
    chmod +x "$B/in-bundle" "$B/zerotrain"
    head -2 "$BUNDLE_DIR/MANIFEST.txt" 2>/dev/null
    # the module's libraries as the loader finds them: a missing one is named here, once
    "$B/in-bundle" ldd "$B/zt/usr/bin/libzerotrain_cuda.so" >"$BLOGS/bundle-ldd.txt" 2>&1
    grep -E "not found|libcudnn\.|libnccl|libcublasLt|libnvrtc\.|libmpi\." "$BLOGS/bundle-ldd.txt" | sed 's/^/  /'
    if grep -q "not found" "$BLOGS/bundle-ldd.txt"; then
        BUNDLE_NOTE="the CUDA module's libraries are not all found (build-logs/bundle-ldd.txt)"
        return 1
    fi
    ZT_CMD=$B/zerotrain
    [ -x "$B/zt/usr/bin/bench_layer" ] && BENCH_BUNDLE=("$B/in-bundle" "$B/zt/usr/bin/bench_layer")
    BUNDLE_NOTE="$BUNDLE_DIR/bundle.tgz, $("$ZT_CMD" --version 2>&1 | head -1)"
}
if listed "$TRAINER_STEPS" || { listed "$BENCH_STEPS" && [ "$NEED_BUILD" = 0 ]; }; then
    setup_bundle || say "bundle: $BUNDLE_NOTE"
    say "bundle: $BUNDLE_NOTE"
fi
# the layer benchmark: this build's, else the bundle's (sm_90 and sm_100, built with the bundle)
BENCH_BIN=("$BIN/bench_layer")
[ ! -x "$BIN/bench_layer" ] && [ ${#BENCH_BUNDLE[@]} -gt 0 ] && BENCH_BIN=("${BENCH_BUNDLE[@]}")
# Board power, SM clock and utilisation every 500 ms while the tests run (health by power,
# not utilisation): build-logs/power.csv, its maximum in the summary.
POWER_PID=
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=timestamp,power.draw,clocks.sm,utilization.gpu,temperature.gpu,memory.used \
        --format=csv,noheader,nounits -lms 500 >"$BLOGS/power.csv" 2>/dev/null &
    POWER_PID=$!
fi

# ---- tests and benchmarks ------------------------------------------------------------------
run ops 150 "$BIN/test_cuda_ops"
OPS_RC=$RC
if needs_sync_rerun "$OPS_RC" "$LOGS/ops.log" '^[0-9]+ passed, [0-9]+ failed'; then
    # a fatal CUDA error (exit 4) or died before its summary: rerun with a sync after every op to name it
    LOGDIR=$BLOGS run ops_sync 120 env ZT_CUDA_SYNC=1 "$BIN/test_cuda_ops" --quick
fi
run train_tiny 90 "$BIN/train_tiny"
TRAIN_RC=$RC
# Qwen3.5 (issue 38): its kernels vs the CPU ops and its GPU passes unit by unit vs its CPU
# passes. Logs stay on the machine in build-logs (the returned-files budget is taken); the
# summary gives the exit codes and the pass counts.
if want qwen3_5; then
    LOGDIR=$BLOGS
    ZT_STEPS= run build_qwen3_5 240 cmake --build "$BUILD" -j "$(nproc)" --target test_cuda_ops_qwen3_5 test_qwen3_5_cuda
    if [ "$RC" = 0 ]; then
        ZT_STEPS= run qwen3_5_ops 120 "$BIN/test_cuda_ops_qwen3_5"
        Q35_RC="ops exit $RC"
        ZT_STEPS= run qwen3_5_passes 120 "$BIN/test_qwen3_5_cuda"
        Q35_RC="$Q35_RC, passes exit $RC"
    else
        Q35_RC="build failed (exit $RC; build-logs/build_qwen3_5.log)"
    fi
    LOGDIR=$LOGS
fi
if [ "$NCCL_BUILD_RC" = 0 ]; then
    run fsdp 120 env NCCL_SOCKET_IFNAME=lo "$BIN/test_fsdp_cuda"
    FSDP_RC="exit $RC"
    if needs_sync_rerun "$RC" "$LOGS/fsdp.log" '^(all checks passed|FAILED)$'; then
        LOGDIR=$BLOGS
        run fsdp_sync 90 env ZT_CUDA_SYNC=1 NCCL_SOCKET_IFNAME=lo "$BIN/test_fsdp_cuda"
        LOGDIR=$LOGS
    fi
elif [ "$NCCL_BUILD_RC" != none ]; then
    FSDP_RC="build failed (exit $NCCL_BUILD_RC; see the build_nccl output above)"
fi
# The NCCL process group at world 1 (no MPI; built above by CMake). Its log stays on
# the machine (the returned-files budget is taken); the terminal shows its output.
if [ "$NCCL_BUILD_RC" = 0 ]; then
    LOGDIR=$BLOGS
    run comm_nccl 60 env NCCL_SOCKET_IFNAME=lo "$BUILD/test_comm_nccl" --run-dir "$BUILD/comm_nccl_w1"
    NCCL_RC="exit $RC (0 = pass, 77 = no device)"
    LOGDIR=$LOGS
fi
# ---- T1: the trainer itself, correctness (tests/gpu/trainer.sh; its log: trainer.log) --------------
TW=$BUILD/trainer-work  # weights, data and run folders (tens of GB at 32B shapes; stays on the machine)
trainer_step() {  # STEP LIMIT [VAR=VALUE...]: trainer.sh STEP with the bundle's zerotrain, appended to trainer.log
    local step=$1 limit=$2
    shift 2
    if [ -z "$ZT_CMD" ]; then
        RC="not run ($BUNDLE_NOTE)"
        want "$step" && say "$step: $RC"
        return
    fi
    LOGAS=trainer APPEND=1 run "$step" "$(cap "$limit")" env ZT="$ZT_CMD" ZT_WORK="$TW" "$@" \
        bash "$ROOT/tests/gpu/trainer.sh" "$step"
}
rm -f "$LOGS/trainer.log"
trainer_step trainer 150
T1_RC=$RC

# ---- speed: the layer benchmark (this build's bench_layer, or the bundle's) ----------------------
run bench 180 "${BENCH_BIN[@]}" --seq 2048
BENCH_RC=$RC
if needs_sync_rerun "$BENCH_RC" "$LOGS/bench.log" '^RESULT layer_ms'; then
    LOGDIR=$BLOGS run bench_sync 120 env ZT_CUDA_SYNC=1 "${BENCH_BIN[@]}" --smoke
fi
# The same layer at 8,192 tokens, into the same log (each section starts "RESULT seq=S").
APPEND=1 run bench 180 "${BENCH_BIN[@]}" --seq 8192
BENCH8_RC=$RC
# The same layer with the tiled attention (no S x S scratch; tensor cores at head_dim 128,
# attention_tc.cu). Its log goes to $BLOGS (the returned-files budget is taken); RESULT lines
# echoed. Then the scalar tiles (attention_tiled.cu) at 2048 beside it, when time is left.
rm -f "$BLOGS/bench_tiled.log" "$BLOGS/bench_tiled_scalar.log"
if time_left 120; then
    LOGDIR=$BLOGS
    run bench_tiled 120 "${BENCH_BIN[@]}" --attn tiled --seq 2048
    TILED_RC="exit $RC"
    if [ "$RC" = 0 ]; then
        APPEND=1 run bench_tiled 150 "${BENCH_BIN[@]}" --attn tiled --seq 8192
        TILED_RC="$TILED_RC; seq 8192 exit $RC"
    fi
    if time_left 80 && want bench_tiled; then
        ZT_STEPS='' run bench_tiled_scalar 120 "${BENCH_BIN[@]}" --attn tiled-scalar --seq 2048  # part of bench_tiled
        grep -h '^RESULT' "$BLOGS/bench_tiled_scalar.log" 2>/dev/null | sed 's/^/bench_tiled_scalar: /'
    fi
    LOGDIR=$LOGS
    grep -h '^RESULT' "$BLOGS/bench_tiled.log" 2>/dev/null | sed 's/^/bench_tiled: /'
else
    TILED_RC="not run (time: $(elapsed) s elapsed)"
fi
# The same layer with cuDNN's fused flash attention. Its logs go to $BLOGS (the returned-files
# budget is taken); its RESULT lines are echoed below. The bundle's bench_layer was built with
# cuDNN (it says so, and falls back to GEMM, where not).
rm -f "$BLOGS/bench_cudnn.log" "$BLOGS/bench_cudnn_sync.log"  # no stale numbers in the summary
if [ "${BENCH_BIN[0]}" = "$BIN/bench_layer" ] && ! grep -q "building the cuDNN SDPA attention path" "$BLOGS/configure.log" 2>/dev/null; then
    CUDNN_RC="not built ($(grep -h 'cuDNN' "$BLOGS/configure.log" 2>/dev/null | tail -1 | sed 's/^-- //'))"
elif time_left 120; then
    LOGDIR=$BLOGS
    run bench_cudnn 120 "${BENCH_BIN[@]}" --attn cudnn --seq 2048
    CUDNN_RC="exit $RC"
    if [ "$RC" != 0 ] && [ "$RC" != 124 ] && [ "$RC" != 77 ] && [ "$RC" != skipped ]; then
        run bench_cudnn_sync 90 env ZT_CUDA_SYNC=1 "${BENCH_BIN[@]}" --smoke --attn cudnn
    elif [ "$RC" = 0 ]; then
        APPEND=1 run bench_cudnn 120 "${BENCH_BIN[@]}" --attn cudnn --seq 8192
        CUDNN_RC="$CUDNN_RC; seq 8192 exit $RC"
    fi
    LOGDIR=$LOGS
    grep -h '^RESULT' "$BLOGS/bench_cudnn.log" 2>/dev/null | sed 's/^/bench_cudnn: /'
else
    CUDNN_RC="not run (time: $(elapsed) s elapsed)"
fi
# PyTorch's layer, both lengths in one process: the layer ratios of the summary.
if time_left 60; then
    run torch 200 env PYTHONUNBUFFERED=1 python3 "$ROOT/tests/gpu/bench_layer_torch.py" --seq 2048,8192
    TORCH_RC=$RC
else
    TORCH_RC="not run (time: $(elapsed) s elapsed)"
fi

# ---- T2-T5: the trainer's speed against PyTorch's, while the budget lasts -------------------------
# (each step's time in tests/gpu/trainer.sh's header; a step that would not fit is not started)
guard() {  # STEP NEED: the step is wanted but would not fit: say so
    want "$1" || return 0
    time_left "$2" && return 0
    RC="not run (time: $(elapsed) s elapsed, ~$2 s needed)"
    say "$1: $RC"
    return 1
}
guard trainer_32b 120 && trainer_step trainer_32b 240
T2_RC=$RC
guard torch_32b 90 && trainer_step torch_32b 200 ZT_TORCH_BUDGET=$((BUDGET - $(elapsed) - 60))
T3_RC=$RC
guard trainer_q35 90 && trainer_step trainer_q35 240
T4_RC=$RC
# flash-linear-attention for transformers' Qwen3.5: the bundle's wheels (pure Python over the
# image's Triton), installed into a folder of their own for this step alone
FLA_SITE=$BUILD/pysite
if want torch_q35 && ls "$BUNDLE_DIR"/wheels/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$FLA_SITE" \
        "$BUNDLE_DIR"/wheels/*.whl 2>&1 | tail -3
fi
guard torch_q35 60 && trainer_step torch_q35 200 PYTHONPATH="$FLA_SITE${PYTHONPATH:+:$PYTHONPATH}" \
    ZT_TORCH_BUDGET=$((BUDGET - $(elapsed) - 45))
T5_RC=$RC
# Qwen3.5's chunked delta rule at the 27B's linear-layer shape (16 key / 48 value heads x 128,
# 8,192 tokens), forward + backward: the fp32 chunked kernels vs the tensor-core ones
# (bench_delta, with their outputs' differences) and fla's chunk_gated_delta_rule (the bundle's
# wheels) in the same call. Logs in build-logs; RESULT lines echoed and in the summary.
DTC_RC="not run"
if want delta_tc && time_left 60; then
    LOGDIR=$BLOGS
    ZT_STEPS= run build_delta_tc 180 cmake --build "$BUILD" -j "$(nproc)" --target bench_delta
    if [ "$RC" = 0 ]; then
        ZT_STEPS= run delta_tc 120 "$BIN/bench_delta" --seq 8192
        DTC_RC="bench_delta exit $RC"
        if [ ! -d "$FLA_SITE/fla" ] && ls "$BUNDLE_DIR"/wheels/*.whl >/dev/null 2>&1; then
            python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$FLA_SITE" \
                "$BUNDLE_DIR"/wheels/*.whl 2>&1 | tail -3
        fi
        ZT_STEPS= APPEND=1 run delta_tc 120 env PYTHONPATH="$FLA_SITE${PYTHONPATH:+:$PYTHONPATH}" \
            python3 "$ROOT/tests/gpu/bench_delta_fla.py" --seq 8192
        DTC_RC="$DTC_RC, fla exit $RC"
    else
        DTC_RC="build failed (exit $RC; build-logs/build_delta_tc.log)"
    fi
    LOGDIR=$LOGS
    grep -h '^RESULT delta_bench' "$BLOGS/delta_tc.log" 2>/dev/null | sed 's/^/delta_tc: /'
fi
# Qwen3.5 under --context-parallel 2 (model/qwen3_5_cuda_context.c) against W = 1 (tests/gpu/q35_cp.sh):
# only when ZT_STEPS names q35_cp (never in the default "all": NCCL takes one rank per GPU, so it needs
# a lease with 2 GPUs or more) and the bundle is set up. Never run on a GPU yet.
Q35CP_RC="not run (ZT_STEPS without q35_cp)"
if [[ ",${ZT_STEPS:-}," == *",q35_cp,"* ]]; then
    NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
    if [ "$NGPU" -lt 2 ]; then
        Q35CP_RC="not run ($NGPU GPU: it needs 2)"
    elif [ -z "$ZT_CMD" ] && ! setup_bundle; then
        Q35CP_RC="not run ($BUNDLE_NOTE)"
    elif time_left 120; then
        LOGAS=trainer APPEND=1 run q35_cp 300 bash "$ROOT/tests/gpu/q35_cp.sh" "$BUILD/bundle/zt/usr/bin/zerotrain" \
            "$BUILD/bundle/in-bundle" mpirun --allow-run-as-root -- "$TW/q35_cp"
        Q35CP_RC="exit $RC"
    fi
    say "q35_cp: $Q35CP_RC"
fi
# the trainer runs' own logs and the tiny run's power.csv, for build-logs.tgz
if [ -d "$TW" ]; then
    mkdir -p "$BLOGS/trainer-runs"
    cp "$TW"/*.log "$TW"/tiny/*.txt "$BLOGS/trainer-runs/" 2>/dev/null
    cp "$TW"/tiny/r/ranks/rank-00000.power.csv "$BLOGS/trainer-runs/tiny-power.csv" 2>/dev/null
fi
BFSDP_RC="not run"
if [ "$NCCL_BUILD_RC" = 0 ] && time_left 90; then
    run bench_fsdp 150 env NCCL_SOCKET_IFNAME=lo "$BIN/bench_fsdp_cuda" --layers 2
    BFSDP_RC="exit $RC"
fi
if [ "${ZT_SKIP_SANITIZER:-0}" != 1 ] && command -v compute-sanitizer >/dev/null && [ "$NEED_BUILD" = 1 ] &&
    time_left 180; then
    LOGDIR=$BLOGS QUIET=1 run memcheck 90 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 "$BIN/test_cuda_ops" --quick
    MEMCHECK="exit $RC (0 = clean, 9 = errors found, 124 = timed out)"
else
    MEMCHECK="not run"
fi
[ -n "$POWER_PID" ] && kill "$POWER_PID" 2>/dev/null
fi  # SKIP_RUN

# ---- summary -----------------------------------------------------------------------------------
val() { grep -h "^RESULT $1=" "$LOGS"/$2.log 2>/dev/null | tail -1 | sed "s/^RESULT $1=//; s/ .*//"; }
# valseq KEY FILE SEQ: KEY's value in the section of FILE that follows "RESULT seq=SEQ"
valseq() {
    awk -v k="RESULT $1=" -v s="$3" '/^RESULT seq=/ { cur = substr($0, 12) }
        index($0, k) == 1 && cur == s { v = substr($0, length(k) + 1); sub(/ .*/, "", v) } END { print v }' "$2" 2>/dev/null
}
summary() {
echo
echo "================================ summary ================================"
echo "NCCL process group, world 1: $NCCL_RC"
echo "Qwen3.5 kernels and GPU passes: $Q35_RC; $(grep -h ' passed, ' "$BLOGS/qwen3_5_ops.log" 2>/dev/null | tail -1)" \
    "$(tail -n 1 "$BLOGS/qwen3_5_passes.log" 2>/dev/null)"
echo "head_dim 256: tiled attention $(grep -hc '^RESULT op=tiled_attention.*_D256.* ok=1' "$LOGS/ops.log" 2>/dev/null)" \
    "of $(grep -hc '^RESULT op=tiled_attention.*_D256' "$LOGS/ops.log" 2>/dev/null) checks ok (ops.log); Qwen3.5 passes:" \
    "$(grep -h '^RESULT qwen3_5_cuda_hd256' "$BLOGS/qwen3_5_passes.log" 2>/dev/null | sed 's/^RESULT qwen3_5_cuda_//' | tr '\n' ' ')"
echo "op test (exit $OPS_RC): max-norm relative error vs tolerance, worst shape per op"
if [ -f "$LOGS/ops.log" ]; then
    grep -h '^RESULT op=' "$LOGS/ops.log" | sed 's/RESULT //' | awk '
        / SKIPPED/ { split($1, kv, "="); sub(/^[^ ]* [^ ]* /, ""); skip = skip sprintf("  %-30s %s\n", kv[2], $0); next }
        { delete f; for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
          op = f["op"]; e = f["err"] + 0; t = f["tol"] + 0
          r = (e == 0) ? 0 : ((t > 0) ? e / t : 1e30)
          if (f["err"] ~ /inf|nan/) r = 1e30
          if (!(op in worst) || r > worst[op]) { worst[op] = r; err[op] = f["err"]; tol[op] = f["tol"]; sh[op] = f["shape"] }
          if (f["ok"] != 1) bad[op] = 1; order[op] = ++n }
        END { for (op in order) list[order[op]] = op
              for (i = 1; i <= n; i++) if ((op = list[i]) != "")
                  printf "  %-30s %10s  tol %-8s %-4s %s\n", op, err[op], tol[op], (op in bad) ? "FAIL" : "ok", sh[op]
              printf "%s", skip }'
    grep -h ' passed, ' "$LOGS/ops.log" | tail -1 | sed 's/^/  /'
fi
echo "train_tiny (exit $TRAIN_RC): step-1 loss rel diff $(val train_tiny_step1_rel train_tiny)," \
    "max over 20 steps $(val train_tiny_max_loss_rel train_tiny) (tol 3e-2)," \
    "GPU loss $(grep -h '^RESULT train_tiny_loss_first=' "$LOGS/train_tiny.log" 2>/dev/null | sed 's/RESULT train_tiny_loss_//')"
echo "GPU FSDP engine, NCCL world 1, vs CPU reference trainer ($FSDP_RC):" \
    "$(grep -h '^RESULT fsdp_cuda_' "$LOGS/fsdp.log" 2>/dev/null | sed 's/RESULT fsdp_cuda_//' | tr '\n' ' ')"
grep -h '^FAIL' "$LOGS/fsdp.log" 2>/dev/null | sed 's/^/  /'
B=$LOGS/bench.log C=$BLOGS/bench_cudnn.log T=$LOGS/torch.log X=$BLOGS/bench_tiled.log
for S in 2048 8192; do
    LMS=$(valseq layer_ms "$B" $S) CMS=$(valseq layer_ms "$C" $S) TMS=$(valseq torch_layer_ms "$T" $S)
    XMS=$(valseq layer_ms "$X" $S)
    [ $S = 2048 ] && RCS=$BENCH_RC || RCS=$BENCH8_RC
    echo "layer (Qwen3-32B shapes, S=$S, B=1, bf16) fwd+bwd, exit $RCS; $(valseq layer_tflop "$B" $S) TFLOP per pass:"
    echo "  zerotrain GEMM attn: ${LMS:-?} ms (fwd $(valseq layer_fwd_ms "$B" $S), bwd $(valseq layer_bwd_ms "$B" $S))," \
        "$(valseq layer_tflops "$B" $S) TFLOP/s = $(valseq pct_peak "$B" $S)% of measured matmul peak" \
        "$(valseq peak_tflops "$B" $S) TFLOP/s"
    echo "  zerotrain cuDNN attn: ${CMS:-?} ms (fwd $(valseq layer_fwd_ms "$C" $S), bwd $(valseq layer_bwd_ms "$C" $S))," \
        "$(valseq layer_tflops "$C" $S) TFLOP/s = $(valseq pct_peak "$C" $S)% of peak ($CUDNN_RC)"
    echo "  zerotrain tiled attn ($(valseq attn "$X" $S)): ${XMS:-?} ms (fwd $(valseq layer_fwd_ms "$X" $S), bwd $(valseq layer_bwd_ms "$X" $S))," \
        "$(valseq layer_tflops "$X" $S) TFLOP/s = $(valseq pct_peak "$X" $S)% of peak ($TILED_RC)"
    echo "  PyTorch:    ${TMS:-?} ms (fwd $(valseq torch_layer_fwd_ms "$T" $S), bwd $(valseq torch_layer_bwd_ms "$T" $S))," \
        "$(valseq torch_impl "$T" $S), exit $TORCH_RC"
    for Z in "GEMM:$LMS" "cuDNN:$CMS" "tiled:$XMS"; do
        if [ -n "${Z#*:}" ] && [ -n "$TMS" ]; then
            awk -v n="${Z%%:*}" -v a="${Z#*:}" -v b="$TMS" \
                'BEGIN { printf "  ratio zerotrain (%s attn) / PyTorch time: %.2f  (< 1: zerotrain faster)\n", n, a / b }'
        fi
    done
done
echo "  FLOPs counted: 6 N (d*H*D + 2 d*Hkv*D + H*D*d + 3 d*F) + 3 * 4 B S^2 H D / 2 per pass"
echo "GPU engine end to end (32B shapes, $(val fsdp_layers bench_fsdp) layers, 1 x 2048 tokens, world 1; $BFSDP_RC):" \
    "step $(val fsdp_step_ms bench_fsdp) ms vs compute only $(val fsdp_compute_ms bench_fsdp) ms" \
    "(overhead x$(val fsdp_overhead bench_fsdp)), $(val fsdp_tflops bench_fsdp) TFLOP/s;" \
    "MFU by the trainer's formula $(grep -h '^RESULT fsdp_mfu=' "$LOGS/bench_fsdp.log" 2>/dev/null | sed 's/RESULT fsdp_mfu=//')"
echo "Qwen3.5 --context-parallel 2 vs W = 1 (q35_cp): $Q35CP_RC"
echo "delta rule at the 27B's linear layer (S=8192, 16/48 heads x 128) fwd+bwd ($DTC_RC):"
grep -h '^RESULT delta_bench' "$BLOGS/delta_tc.log" 2>/dev/null | sed 's/^RESULT delta_bench/ /'
awk '/^RESULT delta_bench form=/ { for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] } t[f["form"]] = f["total_ms"] }
     END { if (t["chunk_tc"] > 0 && t["fla"] > 0) printf "  ratio tensor-core / fla time: %.2f (target <= 1.0); fp32 chunked / fla: %.2f\n", t["chunk_tc"] / t["fla"], t["chunk_fp32"] / t["fla"] }' \
    "$BLOGS/delta_tc.log" 2>/dev/null
echo "memcheck: $MEMCHECK"
echo "bundle: $BUNDLE_NOTE"
echo "trainer steps: trainer $T1_RC; trainer_32b $T2_RC; torch_32b $T3_RC; trainer_q35 $T4_RC; torch_q35 $T5_RC"
python3 "$ROOT/tests/gpu/trainer_summary.py" "$LOGS/trainer.log"
if [ -s "$BLOGS/power.csv" ]; then
    awk -F', *' '$2 + 0 > p { p = $2 + 0 } $3 + 0 > c { c = $3 + 0 } END {
        printf "board power: max %.0f W, SM clock max %d MHz over %d samples (build-logs/power.csv)\n", p, c, NR }' \
        "$BLOGS/power.csv"
fi
echo "total $(elapsed) s; logs: $LOGS"
}
summary 2>&1 | tee "$LOGS/summary.txt.tmp"
mv -f "$LOGS/summary.txt.tmp" "$LOGS/summary.txt"
# Every log in one file, build-logs.tgz: the configure/build logs, the extras' and the trainer runs'
# logs, and a copy of each log of $LOGS. The device tool returns 8 files: past that, the least
# telling logs of $LOGS are left only in the archive.
if [ -z "${SKIP_RUN:-}" ]; then
    cp "$LOGS"/*.log "$BLOGS/" 2>/dev/null
    tar -czf "$LOGS/build-logs.tgz" -C "$BUILD" build-logs 2>/dev/null
    for f in comm_nccl train_tiny bench_fsdp fsdp torch bench ops; do
        [ "$(find "$LOGS" -maxdepth 1 -type f | wc -l)" -le 8 ] && break
        [ -f "$LOGS/$f.log" ] && rm -f "$LOGS/$f.log" && echo "$f.log: only in build-logs.tgz (8 files come back)"
    done
fi
# exit 0 when no step that ran failed (a skipped step, 77 (no device) and "not run" are not failures)
bad=''
for v in "ops:$OPS_RC" "train_tiny:$TRAIN_RC" "bench:$BENCH_RC" "trainer:$T1_RC" "trainer_32b:$T2_RC" \
    "torch_32b:$T3_RC" "trainer_q35:$T4_RC" "torch_q35:$T5_RC"; do
    case "${v#*:}" in 0 | 77 | skipped | "?" | not\ run*) ;; *) bad="$bad ${v%%:*}" ;; esac
done
[ -z "$bad" ] || echo "failed:$bad"
[ -z "$bad" ]
