#!/usr/bin/env bash
# Launch zerotrain on two 8-GPU nodes with mpirun: the preflight gate on the job's own
# layout, then training, with `zerotrain watch` running in the background on this
# (launch) host and killing the job if it hangs. See docs/operations.md.
#
#   launch/zerotrain-2node.sh [--dry-run] [--no-preflight] [--no-watch] HOSTFILE TRAIN_ARGS...
#
# HOSTFILE: OpenMPI hostfile, one node per line ("node01 slots=8").
# TRAIN_ARGS: `zerotrain train` flags; they must include --run-dir RUN, on storage every
# node and this host see (heartbeat, liveness ticks and flight recorders live there).
#
# Environment (default):
#   ZT_BIN              zerotrain, same path on every node (../build/zerotrain beside this
#                       script, else `zerotrain` on PATH)
#   ZT_NODES            nodes (2)          ZT_GPUS_PER_NODE  ranks per node (8)
#   ZT_BIND             mpirun --bind-to: numa or core (numa)
#   NCCL_SOCKET_IFNAME  bootstrap/socket interface (placeholder "eth0": set it)
#   NCCL_IB_HCA         InfiniBand HCAs (placeholder "mlx5": set it, e.g. "=mlx5_0,mlx5_1")
#   NCCL_DEBUG          (WARN)
#   ZT_MPIRUN_ARGS      extra mpirun arguments (e.g. "--mca btl_tcp_if_include ib0")
#   ZT_PREFLIGHT_ARGS   extra preflight flags (e.g. "--expect-tokens 1010000000 --probe-bandwidth")
#   ZT_WATCH_ARGS       extra watch flags ("--interval 30")
#   ZT_ON_HANG          watch --on-hang command (default: kill this launch's mpirun)
#   ZT_ON_CRASH         watch --on-crash command (default: none)
#   ZT_WATCH_GRACE      seconds the watcher may take for its verdict after mpirun exits (60)
# Exit status: mpirun's (the preflight's when the gate fails). The watcher's verdict is
# printed at the end and kept in RUN/watch.json and RUN/watch.log.
set -u
dry=0 preflight=1 watch=1
while [ $# -gt 0 ]; do
    case "$1" in
    --dry-run) dry=1; shift ;;
    --no-preflight) preflight=0; shift ;;
    --no-watch) watch=0; shift ;;
    -h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) break ;;
    esac
done
if [ $# -lt 2 ]; then
    echo "usage: $0 [--dry-run] [--no-preflight] [--no-watch] HOSTFILE TRAIN_ARGS... (with --run-dir RUN)" >&2
    exit 2
fi
HOSTFILE=$1; shift
[ -r "$HOSTFILE" ] || { echo "zerotrain-2node: error: hostfile '$HOSTFILE' is not readable" >&2; exit 2; }

here=$(cd "$(dirname "$0")" && pwd)
ZT=${ZT_BIN:-}
if [ -z "$ZT" ]; then
    if [ -x "$here/../build/zerotrain" ]; then ZT="$(cd "$here/.." && pwd)/build/zerotrain"; else ZT=$(command -v zerotrain || true); fi
fi
[ -n "$ZT" ] && [ -x "$ZT" ] || { echo "zerotrain-2node: error: no zerotrain executable (set ZT_BIN)" >&2; exit 2; }

# --run-dir and the flags preflight shares with train
RUN="" pre=() model_given=0 init=""
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
    a=${args[i]} v=""
    case "$a" in
    --*=*) v=${a#*=}; a=${a%%=*} ;;
    esac
    case "$a" in
    --run-dir|--data|--model|--init|--micro-batch|--grad-accum|--device|--shard-group)
        if [ -z "$v" ]; then i=$((i + 1)); v=${args[i]:-}; fi
        case "$a" in
        --run-dir) RUN=$v; pre+=(--run-dir "$v") ;;
        --init) init=$v ;;
        --model) model_given=1; pre+=(--model "$v") ;;
        *) pre+=("$a" "$v") ;;
        esac ;;
    --no-evenfix) pre+=(--no-evenfix) ;;
    esac
done
[ -n "$RUN" ] || { echo "zerotrain-2node: error: TRAIN_ARGS need --run-dir RUN (on shared storage)" >&2; exit 2; }
[ "$model_given" = 1 ] || [ -z "$init" ] || pre+=(--model "$init")

NODES=${ZT_NODES:-2} GPN=${ZT_GPUS_PER_NODE:-8}
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-eth0}
export NCCL_IB_HCA=${NCCL_IB_HCA:-mlx5}
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
# shellcheck disable=SC2206
MPIRUN=(mpirun -np $((NODES * GPN)) --hostfile "$HOSTFILE" --map-by "ppr:${GPN}:node" --bind-to "${ZT_BIND:-numa}"
        -x NCCL_SOCKET_IFNAME -x NCCL_IB_HCA -x NCCL_DEBUG -x OMP_NUM_THREADS ${ZT_MPIRUN_ARGS:-})

run() {
    echo "+ $*"
    [ "$dry" = 1 ] || "$@"
}

echo "zerotrain-2node: $NODES nodes x $GPN ranks, run directory $RUN, $("$ZT" --version)"
[ "$dry" = 1 ] || mkdir -p "$RUN" || exit 1
train_extra=()
if [ "$preflight" = 1 ]; then
    if "$ZT" preflight --help >/dev/null 2>&1; then
        # shellcheck disable=SC2086
        run "${MPIRUN[@]}" "$ZT" preflight "${pre[@]}" ${ZT_PREFLIGHT_ARGS:-}
        rc=$?
        if [ $rc -ne 0 ]; then
            echo "zerotrain-2node: preflight failed (exit $rc): not launching; fix what it reports or pass --no-preflight" >&2
            exit $rc
        fi
        # the gate just passed on this layout: train need not run it again
        "$ZT" train --help 2>/dev/null | grep -q -- --no-preflight && train_extra+=(--no-preflight)
    else
        echo "zerotrain-2node: this zerotrain has no preflight command; skipping the gate"
    fi
fi

echo "+ ${MPIRUN[*]} $ZT train $* ${train_extra[*]:-}"
if [ "$dry" = 1 ]; then
    [ "$watch" = 1 ] && echo "+ $ZT watch $RUN ${ZT_WATCH_ARGS:---interval 30} --on-hang '${ZT_ON_HANG:-kill -TERM <mpirun pid>}' &"
    exit 0
fi
mark=""
[ "$watch" = 1 ] && [ -f "$RUN/heartbeat.json" ] && mark=$(mktemp "${TMPDIR:-/tmp}/zt-launch.XXXXXX")
"${MPIRUN[@]}" "$ZT" train "$@" "${train_extra[@]}" &
job=$!
watcher=""
if [ "$watch" = 1 ]; then
    hook=${ZT_ON_HANG:-"kill -TERM $job"}
    wargs=(--on-hang "$hook")
    [ -n "${ZT_ON_CRASH:-}" ] && wargs+=(--on-crash "$ZT_ON_CRASH")
    # shellcheck disable=SC2086
    (   # a resumed run (requeue, --resume): RUN/heartbeat.json is still the last job's
        # ("stopped" at its checkpoint) until this job writes its own; watching that would
        # give this job the old verdict, so wait for the new heartbeat (or the job's end)
        if [ -n "$mark" ]; then
            while kill -0 "$job" 2>/dev/null && ! [ "$RUN/heartbeat.json" -nt "$mark" ]; do sleep 0.5; done
            rm -f "$mark"
        fi
        exec "$ZT" watch "$RUN" ${ZT_WATCH_ARGS:---interval 30} "${wargs[@]}"
    ) >"$RUN/watch.log" 2>&1 &
    watcher=$!
    echo "zerotrain-2node: watcher pid $watcher, log $RUN/watch.log"
fi
wait "$job"
rc=$?
if [ -n "$watcher" ]; then
    # COMPLETE is seen at once; CRASHED needs the ticks to go stale (15 s or more)
    for ((s = 0; s < ${ZT_WATCH_GRACE:-60}; s++)); do
        kill -0 "$watcher" 2>/dev/null || break
        sleep 1
    done
    if kill -0 "$watcher" 2>/dev/null; then
        kill "$watcher" 2>/dev/null
        wait "$watcher" 2>/dev/null
        echo "zerotrain-2node: the watcher reached no verdict within ${ZT_WATCH_GRACE:-60} s"
    else
        wait "$watcher"
        wrc=$?
        echo "zerotrain-2node: watcher: $(grep -E '\] (COMPLETE|CRASHED|HUNG|FAILED|STOPPED):' "$RUN/watch.log" | tail -1) (exit $wrc)"
    fi
fi
echo "zerotrain-2node: mpirun exited with $rc"
exit $rc
