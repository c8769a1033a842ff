#!/usr/bin/env bash
# The test cluster itself (tests/cluster/cluster.sh): three hosts on zt0, addresses only in
# 127/8, no route out, TCP between every pair, the host's own interfaces and namespaces
# untouched, and everything it created gone after it exits (also when it is killed).
#   setup_test.sh HOLD_PORT SOURCE_DIR WORK_DIR
set -u
HOLD=$1 SRC=$2 WORK=$3
rm -rf "$WORK" && mkdir -p "$WORK"
fail() { echo "FAIL: $*"; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "SKIP: not root: creating network namespaces needs CAP_NET_ADMIN"; exit 77; }
links_before=$(ip -o link | awk -F': ' '{ print $2 }' | sort | tr '\n' ' ')
ns_before=$(ip netns list | awk '{ print $1 }' | sort | tr '\n' ' ')
( . "$SRC/tests/cluster/cluster.sh"
  cluster_up "$WORK"
  echo "$ZC_DIR" >"$WORK/dir"; printf '%s\n' "${ZC_CREATED[@]}" >"$WORK/created"
  for h in node0 node1 login; do
      addrs=$(on "$h" ip -o -4 addr show | awk '{ print $2 "=" $4 }' | tr '\n' ' ')
      echo "$h: $addrs; routes: $(on "$h" ip route | tr '\n' ';')"
      on "$h" ip -o -4 addr show | awk '{ split($4, a, "."); if (a[1] != 127) { print "non-loopback address " $4; bad = 1 } } END { exit bad }' || exit 1
      on "$h" ip -6 -o addr show scope global | grep -q . && { echo "$h has a global IPv6 address"; exit 1; }
      on "$h" ip route | grep -q default && { echo "$h has a default route"; exit 1; }
      [ "$(on "$h" hostname)" = "$h" ] || { echo "hostname is not $h"; exit 1; }
  done
  # TCP between every pair over zt0 (a listener on each host, a connection from each other)
  for dst in node0 node1 login; do
      ip="ZC_IP_$dst"
      # hold_port listens (backlog: connects succeed without accept) while it sleeps
      nsenter --net="/run/netns/$(zc_ns "$dst")" "$HOLD" 7777 sleep 4 &
      srv=$!
      sleep 0.5
      for src in node0 node1 login; do
          [ "$src" = "$dst" ] && continue
          on "$src" timeout 5 bash -c "exec 3<>/dev/tcp/${!ip}/7777" || { echo "$src cannot reach $dst at ${!ip}"; exit 1; }
          echo "$src -> $dst (${!ip}:7777) ok"
      done
      kill $srv 2>/dev/null; wait $srv 2>/dev/null
  done
  # the host cannot reach the cluster, the cluster cannot reach the host's loopback
  timeout 2 bash -c "exec 3<>/dev/tcp/$ZC_IP_node0/22" 2>/dev/null && { echo "the host reaches node0"; exit 1; }
  echo "byte counters of node1's zt0: $(cluster_bytes node1)"
  # a daemon left running inside a node must be cleaned up too
  on node1 sleep 300 &
  sleep 0.3
  exit 0
) || fail "cluster checks"
[ -s "$WORK/created" ] || exit 77  # cluster_up skipped (the reason is printed above)
for ns in $(cat "$WORK/created"); do ip netns list | grep -qw "$ns" && fail "namespace $ns left behind"; done
[ ! -e "$(cat "$WORK/dir")" ] || fail "state directory left behind"
# killed from outside: the trap still cleans up
( . "$SRC/tests/cluster/cluster.sh"; cluster_up "$WORK" >/dev/null; printf '%s\n' "${ZC_CREATED[@]}" >"$WORK/created2"
  sleep 60 >/dev/null 2>&1 & echo $! >"$WORK/sleeper"; wait $! ) &
p=$!
for _ in $(seq 1 100); do [ -s "$WORK/created2" ] && break; sleep 0.1; done
kill -TERM $p; wait $p
kill "$(cat "$WORK/sleeper")" 2>/dev/null
for ns in $(cat "$WORK/created2"); do ip netns list | grep -qw "$ns" && fail "namespace $ns left behind after SIGTERM"; done
links_after=$(ip -o link | awk -F': ' '{ print $2 }' | sort | tr '\n' ' ')
ns_after=$(ip netns list | awk '{ print $1 }' | sort | tr '\n' ' ')
[ "$links_before" = "$links_after" ] || fail "host interfaces changed: '$links_before' -> '$links_after'"
[ "$ns_before" = "$ns_after" ] || fail "namespaces changed: '$ns_before' -> '$ns_after'"
echo "ok: cluster up (127/8 only, no route out, TCP between all hosts), torn down on exit and on SIGTERM"
