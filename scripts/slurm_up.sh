#!/usr/bin/env bash
# A two-node SLURM cluster on this host (Debian's slurm-wlm + munge): node1 and node2 both at 127.0.0.1, one slurmd
# each on ports 17001/17002. Idempotent: installs what is missing (root + apt-get), rewrites slurm.conf only when it
# changed, starts only the daemons that are not running. `scripts/slurm_up.sh down [daemon...]` stops them (all, or
# the named ones: slurmd-node1 slurmd-node2 slurmctld munged).
# SLURM_DEBS=<dir>: on a machine without the registry (the GPU device), unpack Debian's .debs carried in <dir>
# (`make slurm-debs` downloads them) with dpkg -x instead of apt-get; libraries the system has are kept.
set -euo pipefail

CONF=/etc/slurm/slurm.conf
NODES=(node1 node2)
PORTS=(17001 17002)
PIDDIR=${SLURM_HARNESS_PIDDIR:-/run/slurm-harness}  # another directory only for the tests of `down`

# The daemons this script starts, each with a pid file in $PIDDIR (munged's only when this script started it):
# stopped in this order, slurmd before slurmctld, munged last.
DAEMONS=(slurmd-node1 slurmd-node2 slurmctld munged)

# running <daemon>: its pid file names a live process of that program (not a later process given the same pid, nor
# a zombie: where pid 1 reaps nothing a stopped daemon stays one)
running() {
  local status
  status=$(cat "/proc/$(cat "$PIDDIR/$1.pid" 2>/dev/null)/status" 2>/dev/null) || return 1
  [[ $status == "Name:"$'\t'"${1%%-*}"* ]] && ! grep -q '^State:[[:space:]]*Z' <<<"$status"
}

# down [daemon...]: stop the named daemons (all when none is named): SIGTERM, then SIGKILL after 10 s.
down() {
  local names=("$@") left=() stopped=()
  [ ${#names[@]} -gt 0 ] || names=("${DAEMONS[@]}")
  for name in "${names[@]}"; do
    if running "$name"; then
      pid=$(cat "$PIDDIR/$name.pid")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 100); do running "$name" || break; sleep 0.1; done
      if running "$name"; then kill -KILL "$pid" 2>/dev/null || true; sleep 0.5; fi
      if running "$name"; then left+=("$name ($pid)"); continue; fi
      stopped+=("$name")
    fi
    rm -f "$PIDDIR/$name.pid"
  done
  if [ ${#left[@]} -gt 0 ]; then echo "slurm: still running: ${left[*]}" >&2; return 1; fi
  echo "slurm: stopped ${stopped[*]:-nothing (none of ${names[*]} was running)}"
}

if [ "${1:-up}" = down ]; then shift; down "$@"; exit $?; fi

install_from_debs() {
  for deb in "$1"/*.deb; do
    pkg=$(dpkg-deb -f "$deb" Package)
    case "$pkg" in lib*) dpkg -s "$pkg" >/dev/null 2>&1 && continue;; esac
    dpkg -x "$deb" /
  done
  # the daemons are Debian alternatives (slurmd -> slurmd-wlm); dpkg -x runs no maintainer script
  for b in slurmctld slurmd slurmstepd; do [ -e "/usr/sbin/$b" ] || ln -s "/usr/sbin/$b-wlm" "/usr/sbin/$b"; done
  ldconfig 2>/dev/null || true
}

# A munged that answers before anything is installed is not this script's; one that runs later is (started below, or
# by the munge package's own start-up when apt-get installs it): `down` stops it.
munged_before=0
if command -v munge >/dev/null && munge -n >/dev/null 2>&1; then munged_before=1; fi

if { ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; } && [ -n "${SLURM_DEBS:-}" ]; then
  echo "slurm: unpacking $(ls "$SLURM_DEBS"/*.deb | wc -l) .debs from $SLURM_DEBS"
  install_from_debs "$SLURM_DEBS"
fi
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "slurm: slurm-wlm and munge are missing and this is not root with apt-get; install them" >&2; exit 3
  fi
  echo "slurm: installing slurm-wlm munge (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q --no-install-recommends slurm-wlm munge >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends slurm-wlm munge >/dev/null; }
fi

mkdir -p /etc/slurm /etc/munge /var/spool/slurmctld /var/log/slurm "$PIDDIR" /run/munge /var/lib/munge /var/log/munge
for n in "${NODES[@]}"; do mkdir -p "/var/spool/slurmd/$n"; done
cpus=$(nproc)
host=$(hostname 2>/dev/null || cat /proc/sys/kernel/hostname)
conf=$(cat <<CONF
# written by scripts/slurm_up.sh (dcp harness): two slurmd nodes on this host
ClusterName=harness
SlurmctldHost=localhost
SlurmUser=root
SlurmctldPort=16817
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd/%n
SlurmctldPidFile=$PIDDIR/slurmctld.pid
SlurmdPidFile=$PIDDIR/slurmd-%n.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
# a cancelled step gets SIGTERM, then SIGKILL after KillWait: vLLM stops in seconds
KillWait=10
MpiDefault=none
SchedulerType=sched/backfill
NodeName=node1 NodeAddr=127.0.0.1 NodeHostname=$host Port=17001 CPUs=$cpus State=UNKNOWN
NodeName=node2 NodeAddr=127.0.0.1 NodeHostname=$host Port=17002 CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=node1,node2 Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
)
if [ "$(cat "$CONF" 2>/dev/null)" != "$conf" ]; then
  printf '%s\n' "$conf" > "$CONF"
  restart=1
fi

if [ ! -s /etc/munge/munge.key ]; then
  (command -v mungekey >/dev/null && mungekey -c -f -k /etc/munge/munge.key) \
    || dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
fi
chown munge:munge /etc/munge/munge.key /run/munge /var/lib/munge /var/log/munge 2>/dev/null || true
chmod 400 /etc/munge/munge.key
if ! munge -n >/dev/null 2>&1; then
  # munged runs as the munge user; it writes its own pid file
  if id munge >/dev/null 2>&1; then su -s /bin/sh munge -c "munged --force"; else munged --force; fi
  for _ in $(seq 50); do munge -n >/dev/null 2>&1 && break; sleep 0.1; done
fi
if [ "$munged_before" = 0 ] && ! running munged && [ -s /run/munge/munged.pid ]; then
  cp /run/munge/munged.pid "$PIDDIR/munged.pid"
fi

if [ "${restart:-0}" = 1 ]; then down slurmd-node1 slurmd-node2 slurmctld >/dev/null; fi
if ! running slurmctld; then slurmctld -i; fi
for n in "${NODES[@]}"; do
  if ! running "slurmd-$n"; then slurmd -N "$n"; fi
done

# Ready when both nodes are idle (or mixed/allocated: a cluster already in use); a drained node is resumed.
for _ in $(seq 100); do
  states=$(sinfo -h -N -o '%N %t' 2>/dev/null || true)
  if echo "$states" | grep -q -E 'drain|down'; then
    scontrol update nodename=node1,node2 state=resume 2>/dev/null || true
  fi
  if [ "$(echo "$states" | grep -c -E ' (idle|mix|alloc)$')" = 2 ]; then
    echo "slurm: up (node1, node2 on 127.0.0.1; slurm.conf $CONF)"; exit 0
  fi
  sleep 0.2
done
echo "slurm: nodes did not become ready: $states (logs in /var/log/slurm)" >&2
exit 1
