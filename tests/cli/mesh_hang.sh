#!/usr/bin/env bash
# A hang inside a shard group under hybrid sharding (W = 4, --shard-group 2: shard groups
# {0,1} {2,3}, replica groups {0,2} {1,3}), named by the watcher and by the deadline report.
# The field deadlock (--no-evenfix, rank 3 has one block fewer than the others) puts rank 3
# in the world's barrier("epoch-end save") after step 30, while rank 2 starts step 31 and
# waits in shard group 1's all-gather of unit 0 for rank 3; ranks 0 and 1 finish their
# micro-batch in shard group 0 and wait in the replica groups' all-reduces. Before the mesh,
# the sub-comms' flight recorders lived in memory only: the watcher saw rank 2 "in no
# collective", and rank 2's deadline report called it "rank 0" (its rank in the sub-comm).
#   mesh_hang.sh ZEROTRAIN SOURCE_DIR WORK_DIR
set -u
ZT=$1 SRC=$2 W=$3
rm -rf "$W" && mkdir -p "$W"
GOLD="$SRC/tests/golden"
MPIRUN=(mpirun --oversubscribe --allow-run-as-root --bind-to none --mca btl self,vader,tcp
        --mca btl_vader_single_copy_mechanism none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1)
fail() { echo "FAIL [mesh_hang]: $*"; exit 1; }
has() { grep -q -- "$2" "$1" || fail "$(basename "$1") lacks: $2"; }

# 123 documents of one block each over 4 rank files: 31, 31, 31 and 30 blocks.
awk 'BEGIN{srand(11); for(d=0; d<123; d++){ line=""; for(i=0;i<16;i++) line=line int(rand()*90) " "; print line }}' >"$W/docs.txt"
"$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 16 --per-rank 4 -o "$W/data" "$W/docs.txt" >/dev/null || fail "pack"
"${MPIRUN[@]}" -n 4 "$ZT" train --init "$GOLD/tiny_untied_gqa" --data "$W/data" --run-dir "$W/run" \
    --epochs 1 --lr 1e-3 --shard-group 2 --no-evenfix --no-preflight --collective-timeout 15 \
    --first-collective-timeout 120 --alive-interval 0.5 --log-every 10 >"$W/train.txt" 2>&1 &
job=$!
# The watcher first (the deadline is 15 s away): HUNG, exit 4.
timeout 100 "$ZT" watch --interval 0.5 --min-stall 6 --stall-factor 5 --startup-grace 60 "$W/run" >"$W/watch.txt" 2>&1
wrc=$?
cat "$W/watch.txt"
wait "$job"; jrc=$?
cat "$W/train.txt" | grep -v '^step' | tail -60
[ "$wrc" -eq 4 ] || fail "watch exited $wrc, expected 4 (HUNG)"
[ "$jrc" -ne 0 ] || fail "the hung job exited 0; the deadline must abort it"

# The watcher's diagnosis names the group, its ranks and the waiting rank's collective.
diag=$(grep '^  diagnosis:' "$W/watch.txt")
[ -n "$diag" ] || fail "no diagnosis line"
echo "$diag" | grep -Eq 'rank 2: shard group 1 \(ranks 2-3\): allgather\("unit 0 params"\) seq [0-9]+' ||
    fail "the diagnosis does not put rank 2 in shard group 1's all-gather of unit 0"
echo "$diag" | grep -q 'rank 3: barrier("epoch-end save")' || fail "the diagnosis does not put rank 3 in the barrier"
echo "$diag" | grep -Eq 'rank 0: replica group 0 \(ranks 0,2\): allreduce\("unit [0-9]+ grads over replicas"\)' ||
    fail "the diagnosis does not put rank 0 in replica group 0's all-reduce"
has "$W/watch.txt" "shard group 1 (ranks 2-3), RUN/groups/shard-1:"
# The group's flight recorders are on disk, with the member list.
[ -s "$W/run/groups/shard-1/ranks/rank-00000.flight" ] && [ -s "$W/run/groups/shard-1/ranks/rank-00001.flight" ] ||
    fail "no flight recorders in RUN/groups/shard-1/ranks"
grep -q '"ranks": \[2, 3\]' "$W/run/groups/shard-1/group.json" || fail "RUN/groups/shard-1/group.json lacks the members"

# The deadline report: rank 2 (its world rank) names the group and where it is stuck, and
# the group's recorders name the waiting rank (2) and the missing one (3) by world rank.
has "$W/train.txt" 'zerotrain: rank 2: collective deadline exceeded after 15 s in shard group 1 (ranks 2-3), as its rank 0 of 2: stuck in allgather("unit 0 params")'
has "$W/train.txt" 'zerotrain: rank 2: 1 rank in allgather("unit 0 params") seq [0-9]*: 2$'
has "$W/train.txt" 'zerotrain: rank 2: 1 rank in no collective: 3$'
has "$W/train.txt" 'zerotrain: rank 2: rank 3: no collective in flight'
[ -s "$W/run/groups/shard-1/ranks/rank-00000.flight.json" ] || fail "no flight dump of rank 2 in shard group 1"
echo "ok [mesh_hang]"
