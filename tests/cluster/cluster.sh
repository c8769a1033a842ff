#!/usr/bin/env bash
# A two-node test cluster on one machine, sourced by the tests/cluster/*_test.sh scripts:
# network namespaces node0, node1 (compute) and login (watcher, launch host, slurmctld),
# each with an interface zt0 on a veth link to a bridge in a fourth "switch" namespace,
# addressed only inside the loopback range (127.77.0.1 / .2 / .3, route_localnet=1), no
# route out, nothing on the host's interfaces, one shared file system (as nodes share NFS).
# Every namespace gets its own UTS namespace (hostname node0/node1/login) when entered.
# Entering is `nsenter --net` (the network namespace only): the mounts stay the host's,
# /sys/fs/cgroup included, which slurmd needs; `ip netns exec` would remount /sys.
# cluster_down (trapped on EXIT) kills the processes inside the namespaces it recorded
# and deletes those namespaces, which removes their links; it touches nothing else.
#
#   . tests/cluster/cluster.sh
#   cluster_up WORK_DIR          -> 0, or exit 77 with the reason (not root, no netns, ...)
#   on HOST CMD...               run CMD on node0 | node1 | login (foreground)
#   cluster_link HOST up|down    pull / replug HOST's cable (its switch port)
#   cluster_bytes HOST           "rx tx" bytes of HOST's zt0
#   cluster_down                 (automatic on exit)
# Variables set: ZC_DIR (state + agent map), ZC_AGENT (OpenMPI plm_rsh_agent),
# ZC_IP_node0/1/login, ZC_NS_<host>.
ZC_SKIP=77
ZC_HOSTS="node0 node1 login"
ZC_IP_node0=127.77.0.1 ZC_IP_node1=127.77.0.2 ZC_IP_login=127.77.0.3
ZC_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ZC_AGENT="$ZC_SRC/tests/cluster/netns-agent.sh"
ZC_DIR="" ZC_CREATED=()

zc_skip() { echo "SKIP: $*"; exit $ZC_SKIP; }

# Processes in one recorded namespace: TERM, up to 3 s, then KILL.
zc_kill_ns() {
    local ns=$1 pids
    pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
    [ -n "$pids" ] || return 0
    # shellcheck disable=SC2086
    kill -TERM $pids 2>/dev/null
    for _ in $(seq 1 30); do
        pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
        [ -n "$pids" ] || return 0
        sleep 0.1
    done
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null
    sleep 0.2
}

cluster_down() {
    local ns
    [ -n "${ZC_DOWN_HOOK:-}" ] && { $ZC_DOWN_HOOK || true; }
    # the ids recorded by cluster_up, nothing found by pattern
    for ns in "${ZC_CREATED[@]}"; do zc_kill_ns "$ns"; done
    for ns in "${ZC_CREATED[@]}"; do ip netns del "$ns" 2>/dev/null; done
    ZC_CREATED=()
    if [ -n "$ZC_DIR" ] && [ -d "$ZC_DIR" ] && [ "${ZT_KEEP_CLUSTER_DIR:-0}" != 1 ]; then rm -rf "$ZC_DIR"; fi
    ZC_DIR=""
}

zc_ns() { local v="ZC_NS_$1"; echo "${!v}"; }

# on HOST CMD...: CMD inside HOST's namespace with hostname HOST (its own UTS namespace).
on() {
    local h=$1; shift
    local ns; ns=$(zc_ns "$h")
    [ -n "$ns" ] || { echo "cluster: no host '$h'" >&2; return 2; }
    nsenter --net="/run/netns/$ns" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$h" "$@"
}

# cluster_link HOST up|down: the host's switch port. `up` returns once the port forwards
# again and both ends report carrier, with the hosts' stale neighbour entries flushed, so
# the next job does not race the bridge (a connect() to the other node failed that way once).
cluster_link() {
    ip netns exec "$ZC_NS_switch" ip link set "p-$1" "$2" || return 1
    [ "$2" = up ] || return 0
    local i st op peer h
    for i in $(seq 100); do
        st=$(ip netns exec "$ZC_NS_switch" cat "/sys/class/net/p-$1/brport/state" 2>/dev/null)
        op=$(ip netns exec "$ZC_NS_switch" cat "/sys/class/net/p-$1/operstate" 2>/dev/null)
        peer=$(ip netns exec "$(zc_ns "$1")" cat /sys/class/net/zt0/operstate 2>/dev/null)
        [ "$st" = 3 ] && [ "$op" = up ] && [ "$peer" = up ] && break
        sleep 0.1
    done
    [ "$st" = 3 ] && [ "$op" = up ] && [ "$peer" = up ] ||
        { echo "cluster: port p-$1 not forwarding 10 s after up (state $st, $op, peer $peer)" >&2; return 1; }
    for h in node0 node1 login; do ip -n "$(zc_ns "$h")" neigh flush dev zt0 2>/dev/null; done
    return 0
}

cluster_bytes() {
    # ip netns exec mounts a sysfs of the namespace: /sys/class/net/zt0 is this host's zt0
    ip netns exec "$(zc_ns "$1")" sh -c 'echo "$(cat /sys/class/net/zt0/statistics/rx_bytes) $(cat /sys/class/net/zt0/statistics/tx_bytes)"'
}

# cluster_up WORK_DIR
cluster_up() {
    local work=$1 h ns i
    [ "$(id -u)" -eq 0 ] || zc_skip "not root: creating network namespaces needs CAP_NET_ADMIN"
    for c in ip unshare nsenter hostname; do command -v $c >/dev/null || zc_skip "'$c' is missing (apt-get install iproute2 util-linux)"; done
    mkdir -p "$work"
    ZC_DIR=$(mktemp -d "$work/cluster.XXXXXX") || zc_skip "cannot make a state directory under $work"
    chmod 755 "$ZC_DIR"
    trap cluster_down EXIT
    trap 'exit 130' INT TERM
    local tag="zt$$"
    for h in switch $ZC_HOSTS; do
        ns="$tag-$h"
        ip netns add "$ns" 2>"$ZC_DIR/netns.err" ||
            zc_skip "'ip netns add' fails here: $(head -1 "$ZC_DIR/netns.err") (needs CAP_NET_ADMIN and CAP_SYS_ADMIN, i.e. root outside a locked-down container)"
        ZC_CREATED+=("$ns")
        echo "$ns" >>"$ZC_DIR/namespaces"
        printf -v "ZC_NS_$h" '%s' "$ns"
    done
    ip -n "$ZC_NS_switch" link add ztbr type bridge || zc_skip "no bridge device in a namespace"
    ip -n "$ZC_NS_switch" link set ztbr up
    for h in $ZC_HOSTS; do
        ns=$(zc_ns "$h") i="ZC_IP_$h"
        ip link add zt0 netns "$ns" type veth peer name "p-$h" netns "$ZC_NS_switch" ||
            zc_skip "cannot create a veth pair between namespaces"
        ip -n "$ZC_NS_switch" link set "p-$h" master ztbr up
        # 127/8 is martian on a non-loopback device unless route_localnet; lo keeps 127.0.0.1
        # only (/32), so that 127.77.0.0/24 is not claimed as local by lo's /8.
        ip netns exec "$ns" sh -c 'for k in all default lo zt0; do echo 1 >/proc/sys/net/ipv4/conf/$k/route_localnet; done' ||
            zc_skip "cannot set route_localnet in a namespace"
        ip -n "$ns" link set lo up
        ip -n "$ns" addr del 127.0.0.1/8 dev lo 2>/dev/null
        ip -n "$ns" addr add 127.0.0.1/32 dev lo 2>/dev/null
        ip -n "$ns" addr add "${!i}/24" dev zt0
        ip -n "$ns" link set zt0 up
        # (a peer behind a dead link: TCP gives up after ~3 s of retransmissions instead of ~15 min)
        ip netns exec "$ns" sh -c "echo ${ZC_TCP_RETRIES2:-3} >/proc/sys/net/ipv4/tcp_retries2"
        echo "$h $ns ${!i}" >>"$ZC_DIR/hosts.map"
    done
    export ZT_CLUSTER_MAP="$ZC_DIR/hosts.map"
    # the links come up (carrier) and reach each other
    local ok=0
    for _ in $(seq 1 50); do
        if on node0 bash -c "exec 3<>/dev/tcp/$ZC_IP_node1/9 " 2>&1 | grep -q "refused"; then ok=1; break; fi
        sleep 0.1
    done
    [ $ok = 1 ] || zc_skip "node0 cannot reach node1 at $ZC_IP_node1 over zt0 (127/8 with route_localnet does not route on this kernel?)"
    echo "cluster: namespaces ${ZC_CREATED[*]}; node0 $ZC_IP_node0, node1 $ZC_IP_node1, login $ZC_IP_login on zt0 (bridge in $ZC_NS_switch)"
}

# OpenMPI across the cluster: the remote launcher is tests/cluster/netns-agent.sh, TCP
# only on zt0. As MCA environment variables so that what the user types stays the same.
cluster_mpi_env() {
    export OMPI_MCA_plm_rsh_agent="$ZC_AGENT"
    export OMPI_MCA_btl=self,vader,tcp
    export OMPI_MCA_btl_tcp_if_include=zt0 OMPI_MCA_oob_tcp_if_include=zt0
    export OMPI_MCA_btl_vader_single_copy_mechanism=none
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    # a daemon behind a dead link is noticed in seconds, not after TCP's 15-minute retries
    export OMPI_MCA_oob_tcp_keepalive_time=2 OMPI_MCA_oob_tcp_keepalive_intvl=1 OMPI_MCA_oob_tcp_keepalive_probes=3
}

# The test scripts' common start: a fresh WORK, the cluster up, OpenMPI's environment
# for it; W = the directory every node shares; fail() ends the test.
cluster_test_start() {
    rm -rf "$1" && mkdir -p "$1"
    cluster_up "$1"
    cluster_mpi_env
    W=$ZC_DIR
}
fail() { echo "FAIL: $*"; exit 1; }

# cluster_ids_data ZEROTRAIN SEED N DIR [PACK_ARGS...]: N random documents of one 16-token
# block each (ids < 90, for the 96-token golden configs) packed into DIR/data.
cluster_ids_data() {
    local zt=$1 seed=$2 n=$3 dir=$4
    shift 4
    awk -v n="$n" -v s="$seed" 'BEGIN{srand(s); for(d=0; d<n; d++){ line=""; for(i=0;i<16;i++) line=line int(rand()*90) " "; print line }}' \
        >"$dir/docs.txt"
    "$zt" pack --quiet --input ids --vocab-size 96 --seq-len 16 "$@" -o "$dir/data" "$dir/docs.txt" >/dev/null || fail "pack"
}
