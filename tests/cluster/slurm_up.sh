#!/usr/bin/env bash
# Bring up a single-node SLURM cluster on this machine, for tests/cluster/test_slurm.py.
#
#   sudo tests/cluster/slurm_up.sh     # idempotent: a second call finds it running and returns
#   sudo tests/cluster/slurm_down.sh   # stops only what this script started
#
# What it starts (all on 127.0.0.1, state under $RETRACE_SLURM_STATE, default /tmp/retrace-slurm):
#   munged (unless one already answers), a private MariaDB (own datadir, port 3307),
#   slurmdbd (job accounting: the executor plugin polls job states with `sacct`, and without
#   accounting a workflow hangs after submission), slurmctld and slurmd (one node, CPUs=2).
# Debian packages it needs are installed when missing (apt-get; needs root and a mirror).
# It refuses to overwrite an /etc/slurm/slurm.conf it did not write (a real cluster's).
set -euo pipefail

STATE="${RETRACE_SLURM_STATE:-/tmp/retrace-slurm}"
CPUS="${RETRACE_SLURM_CPUS:-2}"
MEM_MB="${RETRACE_SLURM_MEM_MB:-8000}"   # declared to SLURM, not enforced (no cgroups here)
DB_PORT=3307
MARK="# written by retrace tests/cluster/slurm_up.sh"
CONF=/etc/slurm/slurm.conf
DBD_CONF=/etc/slurm/slurmdbd.conf
PKGS=(slurmctld slurmd slurmdbd slurm-client munge mariadb-server)

log() { echo "slurm_up: $*" >&2; }

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local limit=$1 what=$2; shift 2
  for _ in $(seq $((limit * 4))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.25; done
  log "timed out after ${limit}s waiting for $what"; return 1
}

alive() { [[ -f "$STATE/$1.pid" ]] && kill -0 "$(cat "$STATE/$1.pid")" 2>/dev/null; }

install_packages() {
  local missing=()
  for p in "${PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  ((${#missing[@]} == 0)) && return 0
  log "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

write_configs() {
  for f in "$CONF" "$DBD_CONF"; do
    if [[ -f "$f" ]] && ! grep -qF "$MARK" "$f"; then
      log "$f exists and was not written by this script: refusing to touch a real cluster"; exit 1
    fi
  done
  mkdir -p /etc/slurm "$STATE"/{ctld,spool}
  cat >"$CONF" <<EOF
$MARK
ClusterName=retrace
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdLogFile=$STATE/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
JobAcctGatherType=jobacct_gather/linux
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
MinJobAge=300
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
  cat >"$DBD_CONF" <<EOF
$MARK
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
SlurmUser=root
PidFile=$STATE/slurmdbd.pid
LogFile=$STATE/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=retrace-test-only
StorageLoc=slurm_acct_db
EOF
  chmod 600 "$DBD_CONF"
}

start_munge() {
  if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then return 0; fi
  [[ -f /etc/munge/munge.key ]] || { mungekey --create 2>/dev/null || create-munge-key -f; }
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge /etc/munge/munge.key
  chmod 0755 /run/munge
  runuser -u munge -- /usr/sbin/munged
  wait_for 20 munged bash -c 'munge -n | unmunge'
  cp /run/munge/munged.pid "$STATE/munged.pid"  # ours to stop (slurm_down.sh)
}

start_mariadb() {
  alive mariadb && return 0
  local data="$STATE/mysql" run="$STATE/mysqlrun"  # both owned by the mysql user
  mkdir -p "$data" "$run" && chown mysql:mysql "$data" "$run"
  if [[ ! -d "$data/mysql" ]]; then
    mariadb-install-db --user=mysql --datadir="$data" --auth-root-authentication-method=socket \
      >"$STATE/mariadb-install.log" 2>&1
  fi
  setsid /usr/sbin/mariadbd --no-defaults --user=mysql --datadir="$data" --bind-address=127.0.0.1 \
    --port=$DB_PORT --socket="$run/mysqld.sock" --pid-file="$run/mariadb.pid" \
    --innodb-buffer-pool-size=64M --log-error="$run/mariadb.log" </dev/null >/dev/null 2>&1 &
  wait_for 60 mariadb mariadb --socket="$run/mysqld.sock" -e 'SELECT 1'
  cp "$run/mariadb.pid" "$STATE/mariadb.pid"
  mariadb --socket="$run/mysqld.sock" <<'SQL'
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'retrace-test-only';
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'retrace-test-only';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
SQL
}

start_slurm() {
  alive slurmdbd || { /usr/sbin/slurmdbd; wait_for 60 slurmdbd sacctmgr -n show cluster; }
  sacctmgr -i add cluster retrace >/dev/null 2>&1 || true
  alive slurmctld || { /usr/sbin/slurmctld; wait_for 60 slurmctld scontrol ping; }
  alive slurmd || /usr/sbin/slurmd -N localhost
  sacctmgr -i add account retrace Cluster=retrace Description=tests Organization=retrace >/dev/null 2>&1 || true
  sacctmgr -i add user "$(id -un)" Account=retrace DefaultAccount=retrace >/dev/null 2>&1 || true
  wait_for 60 "the node to be idle" bash -c \
    'scontrol update NodeName=localhost State=RESUME >/dev/null 2>&1; sinfo -h -N -o %T | grep -qx idle'
}

if [[ $EUID -ne 0 ]]; then log "run as root (it starts system daemons)"; exit 1; fi
install_packages
mkdir -p "$STATE"
write_configs
start_munge
start_mariadb
start_slurm
log "up: $(sinfo -h -N -o '%N %T %c CPUs %m MB') (state in $STATE)"
