# Sourced by tests/gpu/run.sh (and tests/gpu/test_rerun.sh): when to rerun a GPU program
# with ZT_CUDA_SYNC=1 to name the op that failed.
#   needs_sync_rerun RC LOG SUMMARY_REGEX
# Yes (status 0) for a fatal CUDA error (exit 4, ZT_EXIT_CUDA in kernels/cuda/zt_cuda.h)
# and for any other failure whose log lacks the program's summary line (it died before
# reporting: a crash, an abort, an exit from inside a library). No for a pass (0), a skip
# (77), a time-out (124: the rerun would only time out again), or a test that ran to its
# summary and reported its own failures.
needs_sync_rerun() {
    local rc=$1 log=$2 summary=$3
    case "$rc" in
    0 | 77 | 124) return 1 ;;
    4) return 0 ;;
    esac
    if [ -f "$log" ] && grep -Eq "$summary" "$log"; then return 1; fi
    return 0
}
