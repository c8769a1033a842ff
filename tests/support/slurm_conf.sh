# The slurm.conf lines the Slurm tests share (tests/cli/slurm_test.sh on one node,
# tests/cluster/slurm_test.sh on the two-node test cluster): root daemons, munge, no
# accounting, no cgroups, cores as the unit. Sourced; prints them.
#   slurm_conf_policy MUNGE_SOCKET
slurm_conf_policy() {
    cat <<EOF2
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$1
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
MinJobAge=600
SlurmdParameters=config_overrides
EOF2
}
