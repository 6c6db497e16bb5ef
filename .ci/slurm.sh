#!/usr/bin/env bash
# A single-node Slurm on 127.0.0.1 (Debian's slurm-wlm + munge), everything under one folder:
# its own munge key, socket and pid file, slurm.conf with its own state, spool, pid and log paths
# and ports, no accounting storage. Needs root (slurmd runs jobs as their user).
#
#   .ci/slurm.sh start DIR   # prints SLURM_CONF=DIR/slurm.conf once the node answers
#   .ci/slurm.sh stop DIR    # stops slurmd, slurmctld and munged by their pid files
#
# Used by .ci/run, by tests/engine/test_matrix_run.py (when no SLURM_CONF is given) and by
# benchmarks/bench_matrix.py; docs/cluster.md starts a Slurm to try the kit on the same way.
set -euo pipefail

usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[[ $# -eq 2 ]] || usage
action=$1
dir=$(realpath -m "$2")

stop_pid() {  # stop_pid FILE: SIGTERM the pid in FILE, wait up to 20 s, then SIGKILL
  local file=$1 pid
  [[ -s $file ]] || return 0
  pid=$(cat "$file")
  kill "$pid" 2>/dev/null || { rm -f "$file"; return 0; }
  for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$file"
}

if [[ $action == stop ]]; then
  stop_pid "$dir/slurmd.pid"
  stop_pid "$dir/slurmctld.pid"
  stop_pid "$dir/munged.pid"
  exit 0
fi
[[ $action == start ]] || usage

for binary in munged slurmctld slurmd sinfo; do
  command -v "$binary" >/dev/null || { echo "slurm.sh: $binary missing (fix: apt-get install slurm-wlm munge)" >&2; exit 1; }
done
[[ $(id -u) -eq 0 ]] || { echo "slurm.sh: needs root (fix: run it with sudo)" >&2; exit 1; }

# munged wants its key private and the folder of its socket open to everyone (clients connect).
mkdir -p "$dir/state" "$dir/spool" "$dir/munge" "$dir/key"
chmod 755 "$dir" "$dir/munge"
chmod 700 "$dir/key"
if [[ ! -s $dir/key/munge.key ]]; then
  dd if=/dev/urandom of="$dir/key/munge.key" bs=1024 count=1 status=none
fi
chmod 400 "$dir/key/munge.key"
munged --key-file "$dir/key/munge.key" --socket "$dir/munge/munge.sock" \
  --pid-file "$dir/munged.pid" --log-file "$dir/key/munged.log" --seed-file "$dir/key/munged.seed"

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
host=$(hostname -s)
cat >"$dir/slurm.conf" <<EOF
# Written by .ci/slurm.sh: one node, $(nproc) CPUs, no accounting storage.
ClusterName=xpukit
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.sock
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
SlurmdTimeout=30
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$dir/slurm.conf
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
for _ in $(seq 60); do
  if sinfo -h -o '%t' 2>/dev/null | grep -qE '^(idle|mix|alloc)'; then
    echo "SLURM_CONF=$SLURM_CONF"
    exit 0
  fi
  sleep 0.5
done
echo "slurm.sh: the node did not come up within 30 s; slurmctld.log:" >&2
tail -20 "$dir/slurmctld.log" >&2 || true
tail -20 "$dir/slurmd.log" >&2 || true
exit 1
