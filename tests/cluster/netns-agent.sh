#!/bin/sh
# OpenMPI's remote launcher for the test cluster (tests/cluster/cluster.sh), in place of
# ssh: `netns-agent.sh HOST COMMAND...` runs COMMAND (one shell string, as ssh would)
# inside HOST's network namespace with hostname HOST, with a fresh minimal environment
# as an ssh login would have, so nothing reaches the remote side except what mpirun
# passes on the orted command line. HOST -> namespace comes from $ZT_CLUSTER_MAP
# ("HOST NAMESPACE ADDRESS" lines). Used as `--mca plm_rsh_agent` / OMPI_MCA_plm_rsh_agent.
while [ $# -gt 0 ]; do  # ssh-style options OpenMPI may add (-x, -T, -o X)
    case "$1" in -o) shift 2 ;; -*) shift ;; *) break ;; esac
done
host=$1; shift
map=${ZT_CLUSTER_MAP:?netns-agent: ZT_CLUSTER_MAP is not set}
ns=$(awk -v h="$host" '$1 == h || $3 == h { print $2; exit }' "$map")
[ -n "$ns" ] || { echo "netns-agent: unknown host '$host' (not in $map)" >&2; exit 255; }
exec nsenter --net="/run/netns/$ns" unshare --uts env -i PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    HOME="${HOME:-/root}" USER="${USER:-root}" LOGNAME="${USER:-root}" SHELL=/bin/sh ZT_CLUSTER_MAP="$map" \
    sh -c 'hostname "$0" && exec sh -c "$1"' "$host" "$*"
