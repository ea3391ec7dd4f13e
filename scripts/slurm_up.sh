#!/usr/bin/env bash
# A two-node SLURM cluster on this host (Debian's slurm-wlm + munge): node1 and node2 both at 127.0.0.1, one slurmd
# each on ports 17001/17002. Idempotent: installs what is missing (root + apt-get), rewrites slurm.conf/cgroup.conf
# only when they changed, starts only the daemons that are not running, and exits 0 only once both nodes are ready
# (idle, or in use) within SLURM_READY_S (30 s); otherwise it exits 1 with each slurmd's log tail.
#   scripts/slurm_up.sh down [daemon...]   stops them (all, or the named ones: slurmd-node1 slurmd-node2 slurmctld
#                                          munged)
#   scripts/slurm_up.sh check-libs [ELF...] the shared-library check below, alone (default: the installed daemons,
#                                          clients and plugins); exit 5 naming each missing library
# SLURM_DEBS=<dir>: on a machine without the registry (the GPU device), unpack Debian's .debs carried in <dir>
# (`make slurm-debs` downloads them) instead of apt-get: the programs into /, the library packages into
# /opt/slurm-harness/root -- never over the system's own libraries. Of those, only the sonames
# this system lacks are linked into /opt/slurm-harness/lib, which /etc/ld.so.conf.d/zz-slurm-harness.conf names.
# Before any daemon starts, every daemon, client and plugin must resolve its libraries (ldd): a missing one stops
# the script (exit 5) with its name and who needs it, instead of a slurmd that dies in its log.
#
# What is known, and from where (2026-11-30; Debian 12's slurm 22.05.8):
#   - On the 2-GPU device (its log, from a run of scripts/device_multinode.sh with the first carried set: slurm,
#     munge, libmunge2, libhwloc15, liblua5.1-0, libjson-c5, libyaml-0-2, libnuma1): slurmctld came up, both slurmd
#     failed -- "dlopen(.../cgroup_v2.so): libdbus-1.so.3: cannot open shared object file", "Unable to initialize
#     cgroup plugin" -- sinfo showed node1/node2 unk*, and this script went on regardless. So that host mounts
#     cgroup v2 only (CgroupPlugin=autodetect chose cgroup/v2) and lacks libdbus.
#   - Here, in a bare Debian 12 (debootstrap --variant=minbase) chroot: the ELF files of that set need
#     libdbus-1.so.3 (cgroup_v2.so) and libreadline.so.8 (scontrol) beyond what the image has; `make slurm-debs`
#     now carries every library of their closure beyond glibc (Makefile SLURM_DEB_PACKAGES), and with it this script
#     linked 10 sonames into /opt/slurm-harness/lib, brought both nodes up in 3 s and ran `srun -N2 hostname`.
#     `dpkg -x deb /` was found to replace that image's merged-/usr /lib link with a directory (then nothing runs):
#     the programs go in through tar --keep-directory-symlink instead.
#   - Not measured yet: cgroup/v2 with IgnoreSystemd=yes (no systemd or dbus daemon runs on the device: without it
#     cgroup/v2 asks systemd over dbus for slurmstepd's scope and fails). This CI host mounts cgroup v1 (hybrid), so
#     autodetect picks cgroup/v1 here; the first device run of this version shows it (slurmd's log tail on failure).
set -euo pipefail

CONF=/etc/slurm/slurm.conf
CGROUP_CONF=/etc/slurm/cgroup.conf
NODES=(node1 node2)
PORTS=(17001 17002)
PIDDIR=${SLURM_HARNESS_PIDDIR:-/run/slurm-harness}  # another directory only for the tests of `down`
LOGDIR=/var/log/slurm
PLUGINS=/usr/lib/x86_64-linux-gnu/slurm-wlm  # Debian's plugin directory (libslurmfull.so too)
LIBROOT=/opt/slurm-harness  # the carried library packages (root/) and the sonames used from them (lib/)
READY_S=${SLURM_READY_S:-30}

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

# The programs whose libraries must resolve: the daemons, the clients the harness runs, every plugin.
programs() {
  local f
  for f in /usr/sbin/slurmctld /usr/sbin/slurmd /usr/sbin/slurmstepd /usr/sbin/munged /usr/bin/munge \
           /usr/bin/sinfo /usr/bin/squeue /usr/bin/scontrol /usr/bin/salloc /usr/bin/srun /usr/bin/scancel \
           "$PLUGINS"/*.so; do
    [ -e "$f" ] && echo "$f"
  done
  return 0
}

# check_libs [ELF...]: every library each one needs (transitively, as the loader resolves it) is found; else say which
# are missing and who needs them, and return 5.
check_libs() {
  local files=("$@") missing
  [ ${#files[@]} -gt 0 ] || mapfile -t files < <(programs)
  missing=$(for f in "${files[@]}"; do
    LC_ALL=C ldd "$f" 2>&1 | awk -v f="$f" '/=> not found/ {print "  " $1 ", needed by " f; next}
                                            /not found/ {sub(/^[ \t]+/, ""); print "  " $0}'
  done | sort -u)
  [ -z "$missing" ] && return 0
  echo "slurm: shared libraries missing on this machine:"
  echo "$missing"
  echo "slurm: add the Debian package that ships each to SLURM_DEB_PACKAGES in the Makefile and run \`make slurm-debs\`" \
       "where apt-get works, then carry .slurm-debs again (or apt-get install it here)"
  return 5
}

if [ "${1:-up}" = down ]; then shift; down "$@"; exit $?; fi
if [ "${1:-up}" = check-libs ]; then shift; check_libs "$@" >&2; exit $?; fi

# The library packages' sonames that this system lacks, linked into $LIBROOT/lib (in the loader's path through
# ld.so.conf.d): a library the system has is never shadowed by the carried one. ldconfig -n names each carried file by
# its real soname (a package's other links, e.g. libbz2.so.1 beside libbz2.so.1.0, are no sonames).
link_missing_libs() {
  local f name have
  rm -rf "${LIBROOT:?}/lib" "${LIBROOT:?}/sonames" /etc/ld.so.conf.d/zz-slurm-harness.conf
  ldconfig
  have=$(ldconfig -p | awk '/x86-64/ {print $1}')  # the system's own, without the carried ones of an earlier run
  mkdir -p "$LIBROOT/lib" "$LIBROOT/sonames"
  for f in "$LIBROOT"/root/lib/x86_64-linux-gnu/*.so.* "$LIBROOT"/root/usr/lib/x86_64-linux-gnu/*.so.*; do
    if [ -f "$f" ] && [ ! -L "$f" ]; then ln -s "$f" "$LIBROOT/sonames/"; fi
  done
  ldconfig -n "$LIBROOT/sonames"  # adds soname -> file links beside them
  for f in "$LIBROOT"/sonames/*; do
    name=${f##*/}
    [[ $(readlink "$f") == /* ]] && continue  # a file, not a soname link
    grep -qxF "$name" <<<"$have" || ln -s "$(readlink -f "$f")" "$LIBROOT/lib/$name"
  done
  echo "$LIBROOT/lib" > /etc/ld.so.conf.d/zz-slurm-harness.conf
  ldconfig
  echo "slurm: carried libraries this system lacks: $(ls "$LIBROOT/lib" | tr '\n' ' ')"
}

# The programs into / -- through tar, keeping the system's directory links: `dpkg -x deb /` replaces a merged-/usr
# system's /lib link with a directory (slurmd and munge ship ./lib/systemd), and then nothing finds its loader --;
# the library packages apart, in $LIBROOT/root.
install_from_debs() {
  local deb
  mkdir -p "$LIBROOT/root"
  for deb in "$1"/*.deb; do
    if [ "$(dpkg-deb -f "$deb" Section)" = libs ]; then
      dpkg -x "$deb" "$LIBROOT/root"
    else
      dpkg-deb --fsys-tarfile "$deb" | tar -x -C / --keep-directory-symlink
    fi
  done
  # the daemons are Debian alternatives (slurmd -> slurmd-wlm); dpkg -x runs no maintainer script
  for b in slurmctld slurmd slurmstepd; do [ -e "/usr/sbin/$b" ] || ln -s "/usr/sbin/$b-wlm" "/usr/sbin/$b"; done
  link_missing_libs
}

# A munged that answers before anything is installed is not this script's; one that runs later is (started below, or
# by the munge package's own start-up when apt-get installs it): `down` stops it.
munged_before=0
if command -v munge >/dev/null && munge -n >/dev/null 2>&1; then munged_before=1; fi

installed() { command -v slurmctld >/dev/null && command -v munged >/dev/null; }
if [ -n "${SLURM_DEBS:-}" ] && { ! installed || ! check_libs >/dev/null; }; then
  echo "slurm: unpacking $(ls "$SLURM_DEBS"/*.deb | wc -l) .debs from $SLURM_DEBS"
  install_from_debs "$SLURM_DEBS"
fi
if ! installed; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "slurm: slurm-wlm and munge are missing and this is not root with apt-get; install them" >&2; exit 3
  fi
  echo "slurm: installing slurm-wlm munge (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q --no-install-recommends slurm-wlm munge >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends slurm-wlm munge >/dev/null; }
fi
check_libs >&2 || { echo "slurm: no daemon was started" >&2; exit 5; }

mkdir -p /etc/slurm /etc/munge /var/spool/slurmctld "$LOGDIR" "$PIDDIR" /run/munge /var/lib/munge /var/log/munge
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
SlurmctldLogFile=$LOGDIR/slurmctld.log
SlurmdLogFile=$LOGDIR/slurmd-%n.log
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
# slurmd 22.05 always loads a cgroup plugin (even with proctrack/linuxproc and task/none). Where this cluster runs --
# containers, the GPU device -- no systemd and no dbus daemon run: cgroup/v2 builds its hierarchy itself
# (IgnoreSystemd) instead of asking systemd for slurmstepd's scope; cgroup/v1 (a v1 or hybrid host) ignores it.
cgroup=$(cat <<CGROUP
# written by scripts/slurm_up.sh (dcp harness): no systemd, no dbus daemon on this host
CgroupPlugin=autodetect
IgnoreSystemd=yes
CGROUP
)
# write_if_changed <file> <content>: a changed configuration restarts the slurm daemons below
write_if_changed() {
  if [ "$(cat "$1" 2>/dev/null)" != "$2" ]; then printf '%s\n' "$2" > "$1"; restart=1; fi
}
write_if_changed "$CONF" "$conf"
write_if_changed "$CGROUP_CONF" "$cgroup"

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
declare -A log_from  # where the log of each slurmd started here stood before: its tail on failure is this start's
fresh=()  # the nodes whose slurmd this run starts
started_at=$(date +%s)
for n in "${NODES[@]}"; do
  log_from[$n]=0
  if ! running "slurmd-$n"; then
    fresh+=("$n")
    log_from[$n]=$(stat -c %s "$LOGDIR/slurmd-$n.log" 2>/dev/null || echo 0)
    slurmd -N "$n" || true  # a slurmd that fails is reported below with its log
  fi
done

# registered <node>: its slurmd registered with slurmctld since this run started it. Until then slurmctld may still
# show the node idle from a slurmd stopped a moment ago (it notices a silent node only after SlurmdTimeout).
registered() {
  local t
  t=$(scontrol -o show node "$1" 2>/dev/null | grep -o 'SlurmdStartTime=[^ ]*' | cut -d= -f2)
  [ -n "$t" ] && [ "$(date -d "$t" +%s 2>/dev/null || echo 0)" -ge $((started_at - 1)) ]
}

# not_ready <why>: the nodes' states and each slurmd's log since this start (its last lines), on stderr; exit 1.
not_ready() {
  echo "slurm: $1; sinfo: $(sinfo -h -N -o '%N %T' 2>&1 | sort -u | tr '\n' ' ')" >&2
  for n in "${NODES[@]}"; do
    echo "--- $LOGDIR/slurmd-$n.log (slurmd-$n $(running "slurmd-$n" && echo running || echo "not running")," \
         "$([ "${log_from[$n]}" = 0 ] && echo "its last lines" || echo "the last lines of this start")):" >&2
    tail -c +"$((log_from[$n] + 1))" "$LOGDIR/slurmd-$n.log" 2>/dev/null | tail -n 15 >&2 || true
  done
  echo "slurm: see $LOGDIR; \`scripts/slurm_up.sh down\` stops what runs" >&2
  exit 1
}

# Ready when both nodes are idle (or mixed/allocated: a cluster already in use) and each slurmd started here has
# registered; a drained or down node is resumed. A slurmd that is gone after its start-up (it daemonizes, then
# initializes) fails at once, not after READY_S.
started=$SECONDS
while :; do
  states=$(sinfo -h -N -o '%N %t' 2>/dev/null | sort -u || true)
  if echo "$states" | grep -q -E 'drain|down'; then
    scontrol update nodename=node1,node2 state=resume 2>/dev/null || true
  fi
  unregistered=()
  for n in "${fresh[@]}"; do registered "$n" || unregistered+=("$n"); done
  if [ "$(echo "$states" | grep -c -E ' (idle|mix|alloc)$')" = 2 ] && [ ${#unregistered[@]} = 0 ]; then
    echo "slurm: up (node1, node2 on 127.0.0.1; slurm.conf $CONF)"; exit 0
  fi
  gone=()
  for n in "${NODES[@]}"; do running "slurmd-$n" || gone+=("slurmd-$n"); done
  if [ ${#gone[@]} -gt 0 ] && [ $((SECONDS - started)) -ge 3 ]; then not_ready "${gone[*]} exited"; fi
  if [ $((SECONDS - started)) -ge "$READY_S" ]; then not_ready "nodes not ready after ${READY_S} s"; fi
  sleep 0.2
done
