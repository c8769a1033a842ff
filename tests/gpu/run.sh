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
# (in the order: correctness first — ops, train_tiny, the engine, NCCL world 1 — then the
# layer benchmark and PyTorch's, then the optional extras while time is left)
# and prints a short summary table last. Budget: under 8 minutes on an H200 with
# 16 cores. Logs go to $OUT (the device tool's folder) when set, else build-gpu/logs: the
# programs' logs, summary.txt and build-logs.tgz (configure/build logs and the extras'
# logs), 8 files at most (what the device tool returns).
#   bash tests/gpu/run.sh            (from the repository root or anywhere)
# Environment: ZT_BUILD_DIR (default build-gpu), ZT_SKIP_SANITIZER=1, ZT_ARCH (default 90),
# ZT_STEPS (a comma list of the steps to run: ops, train_tiny, qwen3_5, fsdp, comm_nccl, bench, torch,
# bench_tiled, bench_cudnn, bench_fsdp, memcheck; default all),
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
# ZT_STEPS=ops,bench,...: run only these steps (configure and build always run; a step's
# _sync rerun goes with it); for a second call that reruns what failed.
want() { [ -z "${ZT_STEPS:-}" ] || [[ ",configure,build,build_nccl,$ZT_STEPS," == *",${1%_sync},"* ]]; }
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
        timeout --kill-after=10 "$limit" "$@" >"$LOGDIR/$name.log" 2>&1
        RC=$?
        tail -n 25 "$LOGDIR/$name.log"
    else
        timeout --kill-after=10 "$limit" "$@" 2>&1 | tee ${APPEND:+-a} "$LOGDIR/$name.log"
        RC=$?
    fi
    set +o pipefail
    [ "$RC" = 124 ] && echo "$name: TIMED OUT after ${limit}s" | tee -a "$LOGDIR/$name.log"
    say "$name: exit $RC"
}

OPS_RC=? TRAIN_RC=? BENCH_RC=? TORCH_RC=? NCCL_RC="not run" MEMCHECK="not run" FSDP_RC="not built"
CUDNN_RC="not run" BENCH8_RC="not run" BFSDP_RC="not run" TILED_RC="not run" Q35_RC="not run"
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
    NCCL_BUILD_RC=none
    grep -h "NCCL" "$BLOGS/configure.log" | tail -2
fi
BIN=$BUILD/tests
LOGDIR=$LOGS
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
run bench 180 "$BIN/bench_layer" --seq 2048
BENCH_RC=$RC
if needs_sync_rerun "$BENCH_RC" "$LOGS/bench.log" '^RESULT layer_ms'; then
    LOGDIR=$BLOGS run bench_sync 120 env ZT_CUDA_SYNC=1 "$BIN/bench_layer" --smoke
fi
# The same layer at 8,192 tokens, into the same log (each section starts "RESULT seq=S").
APPEND=1 run bench 180 "$BIN/bench_layer" --seq 8192
BENCH8_RC=$RC
# PyTorch's layer right after ours, both lengths in one process: the ratio is a target of
# the issue, so it goes before the optional extras below.
run torch 200 env PYTHONUNBUFFERED=1 python3 "$ROOT/tests/gpu/bench_layer_torch.py" --seq 2048,8192
TORCH_RC=$RC
# The same layer with the tiled attention (no S x S scratch; tensor cores at head_dim 128,
# attention_tc.cu). Its log goes to $BLOGS (the returned-files budget is taken); RESULT lines
# echoed. Then the scalar tiles (attention_tiled.cu) at 2048 beside it, when time is left.
rm -f "$BLOGS/bench_tiled.log" "$BLOGS/bench_tiled_scalar.log"
if [ "$(elapsed)" -lt 360 ]; then
    LOGDIR=$BLOGS
    run bench_tiled 120 "$BIN/bench_layer" --attn tiled --seq 2048
    TILED_RC="exit $RC"
    if [ "$RC" = 0 ]; then
        APPEND=1 run bench_tiled 150 "$BIN/bench_layer" --attn tiled --seq 8192
        TILED_RC="$TILED_RC; seq 8192 exit $RC"
    fi
    if [ "$(elapsed)" -lt 400 ]; then
        run bench_tiled_scalar 120 "$BIN/bench_layer" --attn tiled-scalar --seq 2048
        grep -h '^RESULT' "$BLOGS/bench_tiled_scalar.log" 2>/dev/null | sed 's/^/bench_tiled_scalar: /'
    fi
    LOGDIR=$LOGS
    grep -h '^RESULT' "$BLOGS/bench_tiled.log" 2>/dev/null | sed 's/^/bench_tiled: /'
else
    TILED_RC="not run (time: $(elapsed) s elapsed)"
fi
# The same layer with cuDNN's fused flash attention (not the default path). Its logs go
# to $BLOGS (the returned-files budget is taken); its RESULT lines are echoed below.
rm -f "$BLOGS/bench_cudnn.log" "$BLOGS/bench_cudnn_sync.log"  # no stale numbers in the summary
if ! grep -q "building the cuDNN SDPA attention path" "$BLOGS/configure.log" 2>/dev/null; then
    CUDNN_RC="not built ($(grep -h 'cuDNN' "$BLOGS/configure.log" 2>/dev/null | tail -1 | sed 's/^-- //'))"
elif [ "$(elapsed)" -lt 360 ]; then
    LOGDIR=$BLOGS
    run bench_cudnn 120 "$BIN/bench_layer" --attn cudnn --seq 2048
    CUDNN_RC="exit $RC"
    if [ "$RC" != 0 ] && [ "$RC" != 124 ] && [ "$RC" != 77 ]; then
        run bench_cudnn_sync 90 env ZT_CUDA_SYNC=1 "$BIN/bench_layer" --smoke --attn cudnn
    elif [ "$RC" = 0 ]; then
        APPEND=1 run bench_cudnn 120 "$BIN/bench_layer" --attn cudnn --seq 8192
        CUDNN_RC="$CUDNN_RC; seq 8192 exit $RC"
    fi
    LOGDIR=$LOGS
    grep -h '^RESULT' "$BLOGS/bench_cudnn.log" 2>/dev/null | sed 's/^/bench_cudnn: /'
else
    CUDNN_RC="not run (time: $(elapsed) s elapsed)"
fi
BFSDP_RC="not run"
if [ "$NCCL_BUILD_RC" = 0 ] && [ "$(elapsed)" -lt 390 ]; then
    run bench_fsdp 150 env NCCL_SOCKET_IFNAME=lo "$BIN/bench_fsdp_cuda" --layers 2
    BFSDP_RC="exit $RC"
fi
if [ "${ZT_SKIP_SANITIZER:-0}" != 1 ] && command -v compute-sanitizer >/dev/null && [ "$(elapsed)" -lt 300 ]; then
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
echo "memcheck: $MEMCHECK"
if [ -s "$BLOGS/power.csv" ]; then
    awk -F', *' '$2 + 0 > p { p = $2 + 0 } $3 + 0 > c { c = $3 + 0 } END {
        printf "board power: max %.0f W, SM clock max %d MHz over %d samples (build-logs/power.csv)\n", p, c, NR }' \
        "$BLOGS/power.csv"
fi
echo "total $(elapsed) s; logs: $LOGS"
}
summary 2>&1 | tee "$LOGS/summary.txt.tmp"
mv -f "$LOGS/summary.txt.tmp" "$LOGS/summary.txt"
# the configure/build logs and the extras' logs, one file (the device tool returns 8)
[ -z "${SKIP_RUN:-}" ] && tar -czf "$LOGS/build-logs.tgz" -C "$BUILD" build-logs 2>/dev/null
[ "$OPS_RC" = 0 ] && [ "$TRAIN_RC" = 0 ] && [ "$BENCH_RC" = 0 ]
