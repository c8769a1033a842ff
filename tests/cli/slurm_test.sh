#!/usr/bin/env bash
# The Slurm batch script on a real one-node Slurm: installs slurm-wlm and munge when
# missing (Debian/Ubuntu, root), writes a private slurm.conf (no cgroups:
# proctrack/linuxproc, task/none; daemons as root; loopback address; its own ports,
# state and munge socket under a temp dir), starts munged, slurmctld and slurmd,
# submits launch/zerotrain.sbatch as a 4-rank CPU job of the tiny model (preflight
# step, srun --mpi=pmix training step, watcher on the batch host), waits, checks that
# it completed (exit 0, RUN/final and RUN/complete.json written, watcher COMPLETE),
# and stops everything it started. Where Slurm cannot run here it says why and exits
# 77 (ctest SKIP_RETURN_CODE).
#   slurm_test.sh ZEROTRAIN SOURCE_DIR WORK_DIR
set -u
ZT=$1 SRC=$2 WORK=$3
SKIP=77
mkdir -p "$WORK"
skip() { echo "SKIP: $*"; exit $SKIP; }
fail() { echo "FAIL: $*"; show_logs; exit 1; }
T="" PIDS=()
show_logs() {
    [ -n "$T" ] || return 0
    for f in "$T"/slurmctld.log "$T"/slurmd.log "$T"/munge/munged.log "$T"/job-*.out; do
        [ -f "$f" ] && { echo "---- $f (last 40 lines)"; tail -40 "$f"; }
    done
}
# Stop only what this test started, by the pids it recorded.
teardown() {
    for pf in "$T/slurmd.pid" "$T/slurmctld.pid" "$T/munge/munged.pid"; do
        [ -f "$pf" ] || continue
        pid=$(cat "$pf" 2>/dev/null)
        [ -n "$pid" ] && kill "$pid" 2>/dev/null
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
    done
    [ -n "$T" ] && [ -d "$T" ] && [ "${ZT_KEEP_SLURM_DIR:-0}" != 1 ] && rm -rf "$T"
}

[ "$(id -u)" -eq 0 ] || skip "not root: slurmd must run as root to start job steps"
need_install=0
for c in slurmctld slurmd sbatch srun scontrol munged; do command -v "$c" >/dev/null || need_install=1; done
if [ $need_install = 1 ]; then
    command -v apt-get >/dev/null || skip "slurm-wlm is not installed and there is no apt-get to install it"
    echo "installing slurm-wlm and munge (Debian packages)"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -qq slurm-wlm munge >"$WORK/apt.log" 2>&1; then
        apt-get update -qq >>"$WORK/apt.log" 2>&1
        apt-get install -y -qq slurm-wlm munge >>"$WORK/apt.log" 2>&1 || { tail -5 "$WORK/apt.log"; skip "apt-get install slurm-wlm munge failed"; }
    fi
    for c in slurmctld slurmd sbatch srun scontrol munged; do command -v "$c" >/dev/null || skip "$c missing after installing slurm-wlm"; done
fi
slurm_version=$(slurmd -V 2>/dev/null)
echo "using $slurm_version"
id munge >/dev/null 2>&1 || skip "no munge user (the munge package creates it)"

# Short path: the munge socket path must fit a Unix socket name; 0755 so munged
# accepts the directory.
T=$(mktemp -d /tmp/zt-slurm.XXXXXX) || skip "cannot make a temp dir"
chmod 755 "$T"
trap teardown EXIT
mkdir -p "$T/state" "$T/spool" "$T/munge"
chown munge: "$T/munge" && chmod 755 "$T/munge"

# munge key: the package's, else a new one for this test only
KEY=/etc/munge/munge.key
if [ ! -r $KEY ]; then
    KEY="$T/munge/munge.key"
    dd if=/dev/urandom of="$KEY" bs=1024 count=1 status=none && chown munge: "$KEY" && chmod 400 "$KEY"
fi
SOCK="$T/munge/munge.socket"
if command -v runuser >/dev/null; then AS_MUNGE=(runuser -u munge --); else AS_MUNGE=(su -s /bin/sh munge -c); fi
if [ "${AS_MUNGE[0]}" = runuser ]; then
    "${AS_MUNGE[@]}" munged --socket="$SOCK" --pid-file="$T/munge/munged.pid" --log-file="$T/munge/munged.log" \
        --seed-file="$T/munge/seed" --key-file="$KEY" || { show_logs; skip "munged does not start here"; }
else
    "${AS_MUNGE[@]}" "munged --socket=$SOCK --pid-file=$T/munge/munged.pid --log-file=$T/munge/munged.log --seed-file=$T/munge/seed --key-file=$KEY" \
        || { show_logs; skip "munged does not start here"; }
fi
munge -n -S "$SOCK" | unmunge -S "$SOCK" >/dev/null 2>&1 || { show_logs; skip "munge credentials do not round-trip"; }

free_port() {
    local p
    for _ in $(seq 1 50); do
        p=$((20000 + RANDOM % 20000))
        (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null || { echo $p; return; }
    done
    echo 0
}
CTLD_PORT=$(free_port) SLURMD_PORT=$(free_port)
[ "$CTLD_PORT" != 0 ] && [ "$SLURMD_PORT" != 0 ] && [ "$CTLD_PORT" != "$SLURMD_PORT" ] || skip "no free TCP ports"
H=$(hostname -s)
. "$SRC/tests/support/slurm_conf.sh"
cat >"$T/slurm.conf" <<EOF
ClusterName=zttest
SlurmctldHost=$H(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
$(slurm_conf_policy "$SOCK")
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
NodeName=$H NodeAddr=127.0.0.1 CPUs=4 RealMemory=1000 State=UNKNOWN
PartitionName=zt Nodes=$H Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
export SLURM_CONF="$T/slurm.conf"
slurmctld -f "$SLURM_CONF" || { show_logs; skip "slurmctld does not start here"; }
slurmd -f "$SLURM_CONF" || { show_logs; skip "slurmd does not start here"; }
up=0
for _ in $(seq 1 60); do
    st=$(sinfo -h -n "$H" -o %T 2>/dev/null)
    case "$st" in idle*|mixed*|alloc*) up=1; break ;; esac
    sleep 0.5
done
[ $up = 1 ] || { show_logs; skip "the Slurm node did not come up (state '$st')"; }
echo "slurm up: node $H ($st), slurmctld :$CTLD_PORT, slurmd :$SLURMD_PORT"

# A tiny packed dataset and the batch script as a 4-rank CPU job
awk 'BEGIN{srand(5); for(d=0; d<24; d++){ line=""; for(i=0;i<16;i++) line=line int(rand()*90) " "; print line }}' >"$T/docs.txt"
"$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 16 -o "$T/data" "$T/docs.txt" >/dev/null || fail "pack"
export ZT_BIN="$ZT" NCCL_SOCKET_IFNAME=lo ZT_WATCH_ARGS="--interval 1" ZT_WATCH_GRACE=30
job=$(sbatch --parsable --nodes=1 --ntasks-per-node=4 --gpus-per-node=0 --time=10 --output="$T/job-%j.out" \
      --export=ALL "$SRC/launch/zerotrain.sbatch" \
      --init "$SRC/tests/golden/tiny_untied_gqa" --data "$T/data" --run-dir "$T/run" --steps 4 --threads 1 --log-every 1) \
    || fail "sbatch refused the job"
echo "submitted job $job"
state=""
for _ in $(seq 1 240); do
    state=$(scontrol show job "$job" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
    case "$state" in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE|PREEMPTED) break ;; esac
    sleep 0.5
done
info=$(scontrol show job "$job")
echo "$info" | grep -E "JobState|ExitCode|NodeList=|NumTasks" | sed 's/^ */  /'
echo "---- job output"
cat "$T/job-$job.out"
echo "----"
[ "$state" = COMPLETED ] || fail "job $job ended in state '$state'"
echo "$info" | grep -q "ExitCode=0:0" || fail "job exit code not 0:0"
grep -q "srun --mpi=pmix" "$T/job-$job.out" || fail "the training step did not use srun --mpi=pmix"
grep -q "preflight: all checks passed" "$T/job-$job.out" || fail "the preflight step did not pass"
[ -f "$T/run/final/model.safetensors" ] || fail "RUN/final/model.safetensors missing"
[ -f "$T/run/complete.json" ] || fail "RUN/complete.json missing"
grep -q "watcher: .*COMPLETE" "$T/job-$job.out" || fail "the watcher did not report COMPLETE"
[ "$(wc -l <"$T/run/metrics.jsonl")" -eq 4 ] || fail "expected 4 steps in metrics.jsonl"
echo "ok: Slurm job $job ran preflight + 4 training ranks under srun --mpi=pmix and completed"
