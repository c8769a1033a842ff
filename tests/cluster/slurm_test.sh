#!/usr/bin/env bash
# Slurm across the two nodes of the test cluster (tests/cluster/cluster.sh): munged and
# slurmctld in the login namespace, one slurmd per node namespace (NodeName node0/node1,
# NodeAddr 127.77.0.1/.2; proctrack/linuxproc, task/none, daemons as root, as
# tests/cli/slurm_test.sh does on one node). Each slurmd reads its own copy of slurm.conf
# beside an mpi.conf whose PMIxCliTmpDirBase is node-local: the nodes share /tmp here,
# and Slurm's pmix plugin names its per-step directory by job and step only.
# `sbatch -N 2 launch/zerotrain.sbatch ...` as a user types it: preflight and training
# steps under `srun --mpi=pmix` spanning both nodes, the watcher on the batch host
# (node0). Preemption: `scontrol requeue` mid-training -> SIGTERM -> the ranks agree on a
# stop and checkpoint -> the requeued job resumes with --resume auto and finishes with
# the same final loss as an uninterrupted run. Skips (77) with the reason where Slurm
# cannot run.
#   slurm_test.sh ZEROTRAIN SOURCE_DIR WORK_DIR
set -u
ZT=$1 SRC=$2 WORK=$3
GOLD="$SRC/tests/golden"
. "$SRC/tests/cluster/cluster.sh"
rm -rf "$WORK" && mkdir -p "$WORK"
for c in slurmctld slurmd sbatch srun scontrol sinfo munged munge unmunge runuser; do
    command -v $c >/dev/null || zc_skip "$c is missing (scripts/install-deps.sh installs slurm-wlm and munge)"
done
id munge >/dev/null 2>&1 || zc_skip "no munge user (the munge package creates it)"
cluster_up "$WORK"
T=$ZC_DIR
show_logs() {
    for f in "$T"/slurmctld.log "$T"/slurmd-node0.log "$T"/slurmd-node1.log "$T"/munge/munged.log; do
        [ -f "$f" ] && { echo "---- $f (last 25 lines)"; tail -n 25 "$f"; }
    done
}
fail() { echo "FAIL: $*"; show_logs; exit 1; }
skip_logs() { show_logs; zc_skip "$*"; }
mkdir -p "$T/state" "$T/munge"
chown munge: "$T/munge" && chmod 755 "$T/munge"
# the socket path must fit a Unix socket name (108 bytes)
SOCK="$T/munge/munge.socket"
[ ${#SOCK} -lt 100 ] || zc_skip "work directory too deep for a munge socket path ($SOCK)"
KEY="$T/munge/munge.key"
dd if=/dev/urandom of="$KEY" bs=1024 count=1 status=none && chown munge: "$KEY" && chmod 400 "$KEY"
on login runuser -u munge -- munged --socket="$SOCK" --pid-file="$T/munge/munged.pid" --log-file="$T/munge/munged.log" \
    --seed-file="$T/munge/seed" --key-file="$KEY" 2>/dev/null || skip_logs "munged does not start here"
on node1 munge -n -S "$SOCK" | on node0 unmunge -S "$SOCK" >/dev/null 2>&1 || skip_logs "munge credentials do not round-trip between the nodes"

. "$SRC/tests/support/slurm_conf.sh"
cat >"$T/slurm.conf" <<EOC
ClusterName=ztcluster
SlurmctldHost=login($ZC_IP_login)
SlurmctldPort=6817
SlurmdPort=6818
$(slurm_conf_policy "$SOCK")
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool-%n
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd-%n.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd-%n.log
KillWait=30
JobRequeue=1
NodeName=node0 NodeAddr=$ZC_IP_node0 CPUs=4 RealMemory=1000 State=UNKNOWN
NodeName=node1 NodeAddr=$ZC_IP_node1 CPUs=4 RealMemory=1000 State=UNKNOWN
PartitionName=zt Nodes=node0,node1 Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOC
for n in node0 node1; do
    mkdir -p "$T/etc-$n" "$T/tmp-$n" "$T/spool-$n"
    cp "$T/slurm.conf" "$T/etc-$n/slurm.conf"
    echo "PMIxCliTmpDirBase=$T/tmp-$n" >"$T/etc-$n/mpi.conf"
done
export SLURM_CONF="$T/slurm.conf"
on login slurmctld -f "$SLURM_CONF" || skip_logs "slurmctld does not start in a namespace here"
on node0 slurmd -N node0 -f "$T/etc-node0/slurm.conf" || skip_logs "slurmd does not start in node0's namespace"
on node1 slurmd -N node1 -f "$T/etc-node1/slurm.conf" || skip_logs "slurmd does not start in node1's namespace"
st=""
for _ in $(seq 1 60); do
    st=$(on login sinfo -h -N -o '%N=%T' 2>/dev/null | sort | tr '\n' ' ')
    case "$st" in "node0=idle node1=idle ") break ;; esac
    sleep 0.5
done
[ "$st" = "node0=idle node1=idle " ] || skip_logs "the Slurm nodes did not come up (sinfo: '$st')"
echo "slurm up: $(on login sinfo -h -o '%P %D %N %T'), $(slurmd -V)"
on login srun --mpi=list 2>&1 | grep -qw pmix && echo "srun has --mpi=pmix" || echo "srun has no pmix: the batch script falls back to mpirun"

# data and the uninterrupted reference: the same global batch (4 blocks) as W = 1 x grad-accum 4
cluster_ids_data "$ZT" 9 800 "$T"
STEPS=150
COMMON=(--init "$GOLD/tiny_untied_gqa" --data "$T/data" --steps $STEPS --lr 1e-3 --adam-eps 1e-4 --threads 1 --log-every 0)
on node0 "$ZT" train "${COMMON[@]}" --grad-accum 4 --run-dir "$T/ref" >"$T/ref.out" 2>&1 || { cat "$T/ref.out"; fail "reference run"; }

# the job as a user submits it, from the login host. Open MPI's TCP transport excludes
# 127.0.0.0/8 by default (btl_tcp_if_exclude), so the node interface is named, as a user
# names theirs (ib0, bond0); sbatch exports the environment to the job (--export=ALL).
R="$T/run"
job=$(on login env ZT_BIN="$ZT" NCCL_SOCKET_IFNAME=zt0 OMPI_MCA_btl_tcp_if_include=zt0 OMPI_MCA_oob_tcp_if_include=zt0 \
      OMPI_MCA_btl_vader_single_copy_mechanism=none ZT_WATCH_ARGS="--interval 1" ZT_WATCH_GRACE=30 OMP_NUM_THREADS=1 \
      sbatch --parsable -N 2 --ntasks-per-node=2 --gpus-per-node=0 --time=10 --requeue --open-mode=append \
      --output="$T/job-%j.out" "$SRC/launch/zerotrain.sbatch" "${COMMON[@]}" --run-dir "$R" --resume auto) ||
    fail "sbatch refused the job"
echo "submitted job $job"
jstate() { on login scontrol show job "$job" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'; }
for _ in $(seq 1 600); do
    [ -f "$R/metrics.jsonl" ] && [ "$(wc -l <"$R/metrics.jsonl")" -ge 20 ] && break
    case "$(jstate)" in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL) break ;; esac
    grep -q "Your MPI job is now going to abort" "$T/job-$job.out" 2>/dev/null && break
    sleep 0.1
done
[ -f "$R/metrics.jsonl" ] && [ "$(wc -l <"$R/metrics.jsonl")" -ge 20 ] || { cat "$T"/job-*.out; fail "training did not reach step 20 (state $(jstate))"; }
[ "$(wc -l <"$R/metrics.jsonl")" -lt $STEPS ] || fail "the job finished before the preemption"
echo "preempting at step $(wc -l <"$R/metrics.jsonl"): scontrol requeue $job"
t0=$(date +%s)
on login scontrol requeue "$job" || fail "scontrol requeue refused"
state=""
for _ in $(seq 1 240); do
    state=$(jstate)
    # a requeued job waits (BeginTime) before it may start again: let it start now
    case "$state" in PENDING) on login scontrol update jobid="$job" StartTime=now >/dev/null 2>&1 ;; esac
    case "$state" in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE) break ;; esac
    sleep 0.5
done
info=$(on login scontrol show job "$job")
echo "$info" | grep -E "JobState|Restarts|ExitCode|NodeList=|NumTasks" | sed 's/^ */  /'
echo "---- job output (both runs of job $job)"
cat "$T/job-$job.out"
echo "----"
[ "$state" = COMPLETED ] || fail "job $job ended in state '$state'"
echo "$info" | grep -q "Restarts=1" || fail "the job was not restarted once"
grep -q "srun --mpi=pmix" "$T/job-$job.out" || echo "note: the steps did not use srun --mpi=pmix"
grep -q "preflight: all checks passed" "$T/job-$job.out" || fail "the preflight step did not pass"
grep -q "job $job on node\[0-1\], 4 ranks" "$T/job-$job.out" || fail "the job did not span node[0-1] with 4 ranks"
grep -q "stopped: .*checkpoint of step [0-9]* committed" "$T/job-$job.out" || fail "no agreed stop + checkpoint on the requeue's SIGTERM"
grep -E "stopped: |resume: " "$T/job-$job.out"
grep -q "resume: .*saved by 4 ranks, loaded by 4" "$T/job-$job.out" || fail "the requeued job did not resume from the checkpoint"
grep -q "watcher: .*COMPLETE" "$T/job-$job.out" || fail "the watcher did not report COMPLETE"
[ -f "$R/complete.json" ] || fail "RUN/complete.json missing"
ref=$(tail -1 "$T/ref/metrics.jsonl" | sed 's/.*"loss":\([0-9.]*\).*/\1/')
got=$(tail -1 "$R/metrics.jsonl" | sed 's/.*"loss":\([0-9.]*\).*/\1/')
last=$(tail -1 "$R/metrics.jsonl" | sed 's/.*"step":\([0-9]*\).*/\1/')
echo "final loss at step $last: uninterrupted $ref, preempted + requeued $got ($(( $(date +%s) - t0 )) s from the requeue to the end)"
[ "$last" = $STEPS ] || fail "the requeued job ended at step $last"
awk -v a="$ref" -v b="$got" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-5 * a) }' ||
    fail "final loss $got differs from the uninterrupted run's $ref"
echo "ok: sbatch -N 2 -> srun steps on node[0-1] -> scontrol requeue -> stop + checkpoint -> --resume auto -> same final loss"
