#!/usr/bin/env bash
# Build the libFuzzer harnesses (clang, ASan + UBSan) in build-fuzz/ and run each for a
# fixed time on its seed corpus; exit 1 on any finding (crash, sanitizer report,
# violated property, leak, timeout), naming the saved input.
#   bash tests/fuzz/run.sh [--build-only] [--seconds N] [--runs N] [--jobs J] [--seed S] [--fresh] [TARGET ...]
# --seconds bounds each process's time (default 30), --runs its executions (whichever
# comes first); --jobs J runs J processes per target sharing the corpus; --seed S fixes
# libFuzzer's random seed (ctest uses 1 and a fixed --runs, so a CI finding replays the
# same way); --fresh starts from the checked-in seeds only (drops the corpus earlier runs grew).
# Targets: safetensors dataset config tokenizer tokenizer_split tokenizer_cache jsonl ckpt_meta flight watch
# jinja_parse jinja_render (default: all; ctest runs all but tokenizer_cache, which is slow: each input
# writes a cache file and loads it).
# New inputs found go to build-fuzz/corpus/TARGET (not the checked-in seeds);
# findings to build-fuzz/findings/. See tests/fuzz/README.
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
B=${ZT_FUZZ_BUILD:-$SRC/build-fuzz}
SECONDS_EACH=30 RUNS=-1 BUILD_ONLY=0 JOBS=1 SEED=0 FRESH=0 TARGETS=()
while [ $# -gt 0 ]; do
    case "$1" in
    --build-only) BUILD_ONLY=1 ;;
    --seconds) SECONDS_EACH=$2; shift ;;
    --runs) RUNS=$2; shift ;;
    --jobs) JOBS=$2; shift ;;
    --seed) SEED=$2; shift ;;
    --fresh) FRESH=1 ;;
    -h|--help) sed -n 2,14p "$0"; exit 0 ;;
    -*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    *) TARGETS+=("$1") ;;
    esac
    shift
done
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(safetensors dataset config tokenizer tokenizer_split tokenizer_cache jsonl ckpt_meta flight
                                     watch jinja_parse jinja_render)
CC=${ZT_FUZZ_CC:-$(command -v clang || command -v clang-14 || true)}
[ -n "$CC" ] || { echo "run.sh: clang not found (scripts/install-deps.sh installs it)" >&2; exit 1; }

mkdir -p "$B"
if [ ! -f "$B/build.ninja" ]; then
    CC=$CC cmake -S "$SRC" -B "$B" -G Ninja -DZT_FUZZ=ON -DZT_CUDA=OFF -DCMAKE_BUILD_TYPE=Debug >"$B/build.log" 2>&1 ||
        { cat "$B/build.log"; echo "run.sh: configure failed" >&2; exit 1; }
fi
cmake --build "$B" >>"$B/build.log" 2>&1 || { tail -40 "$B/build.log"; echo "run.sh: build failed" >&2; exit 1; }
[ "$BUILD_ONLY" = 1 ] && { echo "fuzz: built ${TARGETS[*]} in $B"; exit 0; }

mkdir -p "$B/findings"
# a short malloc stack and quarantine: allocation-heavy harnesses (HDF5) run ~2x faster
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1:malloc_context_size=8:quarantine_size_mb=32}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
fail=0
for t in "${TARGETS[@]}"; do
    exe="$B/fuzz_$t"
    [ -x "$exe" ] || { echo "run.sh: no harness fuzz_$t" >&2; exit 2; }
    [ "$FRESH" = 1 ] && rm -rf "$B/corpus/$t"
    mkdir -p "$B/corpus/$t"
    dict=()
    case $t in
    ckpt_meta) dict=(-dict="$SRC/tests/fuzz/ckpt_meta.dict") ;;
    config|dataset|jsonl|safetensors) dict=(-dict="$SRC/tests/fuzz/json.dict") ;;
    watch) dict=(-dict="$SRC/tests/fuzz/watch.dict") ;;
    jinja_parse|jinja_render) dict=(-dict="$SRC/tests/fuzz/jinja.dict") ;;
    esac
    # each target in its own directory: with --jobs, libFuzzer writes fuzz-N.log there
    wd="$B/run-$t"
    rm -rf "$wd" && mkdir -p "$wd"
    log="$wd/main.log"
    par=()
    [ "$JOBS" -gt 1 ] && par=(-jobs="$JOBS" -workers="$JOBS")
    start=$(date +%s)
    (cd "$wd" && "$exe" "$B/corpus/$t" "$SRC/tests/fuzz/corpus/$t" "${dict[@]}" -max_total_time="$SECONDS_EACH" \
        -runs="$RUNS" -seed="$SEED" -max_len=8192 -timeout=20 -rss_limit_mb=2560 -print_final_stats=1 \
        -artifact_prefix="$B/findings/$t-" "${par[@]}" >"$log" 2>&1)
    rc=$?
    took=$(( $(date +%s) - start ))
    logs=("$log"); [ "$JOBS" -gt 1 ] && logs=("$wd"/fuzz-*.log)
    execs=$(cat "${logs[@]}" | grep "stat::number_of_executed_units" | awk '{s+=$2} END{print s+0}')
    cov=$(cat "${logs[@]}" | grep -o "cov: [0-9]*" | cut -d' ' -f2 | sort -n | tail -1)
    ft=$(cat "${logs[@]}" | grep -o "ft: [0-9]*" | cut -d' ' -f2 | sort -n | tail -1)
    if [ $rc -ne 0 ] || cat "${logs[@]}" | grep -q "ERROR: libFuzzer\|ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error:\|fuzz property violated"; then
        log=$(grep -l "ERROR\|runtime error:\|fuzz property violated" "${logs[@]}" | head -1)
        log=${log:-${logs[0]}}
        echo "fuzz $t: FINDING (exit $rc) after $execs executions:"
        grep -m1 -A12 "ERROR:\|runtime error:\|fuzz property violated" "$log" | sed 's/^/    /'
        grep -h "Test unit written to" "$log" | sed 's/^/    /'
        fail=1
    else
        echo "fuzz $t: ok, $execs executions in $took s ($JOBS process(es)), coverage $cov edges, $ft features, 0 findings"
    fi
done
exit $fail
