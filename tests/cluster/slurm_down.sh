#!/usr/bin/env bash
# Stop the single-node SLURM cluster that tests/cluster/slurm_up.sh started, and only that:
# daemons are stopped through the pid files slurm_up.sh wrote under $RETRACE_SLURM_STATE
# (munged only if slurm_up.sh started it), and the /etc/slurm configs are removed only when
# they carry slurm_up.sh's mark. Idempotent: with nothing running it does nothing.
set -uo pipefail

STATE="${RETRACE_SLURM_STATE:-/tmp/retrace-slurm}"
MARK="# written by retrace tests/cluster/slurm_up.sh"

stop() {  # stop NAME: TERM the pid in $STATE/NAME.pid, wait up to 30 s, then KILL
  local f="$STATE/$1.pid" pid
  [[ -f "$f" ]] || return 0
  pid=$(cat "$f")
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 120); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
    echo "slurm_down: stopped $1 ($pid)" >&2
  fi
  rm -f "$f"
}

command -v scancel >/dev/null && [[ -f "$STATE/slurmctld.pid" ]] && scancel --full -u "$(id -un)" 2>/dev/null
for name in slurmd slurmctld slurmdbd mariadb munged; do stop "$name"; done
for f in /etc/slurm/slurm.conf /etc/slurm/slurmdbd.conf; do
  [[ -f "$f" ]] && grep -qF "$MARK" "$f" && rm -f "$f"
done
exit 0
