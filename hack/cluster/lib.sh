# shellcheck shell=bash
# shellcheck disable=SC2034 # the settings here are used by up.sh and down.sh
# Shared settings and helpers for hack/cluster/up.sh and down.sh. Sourced, never run.
# Every value can be overridden from the environment; up.sh records the values it used in
# $STATE/cluster.env so that down.sh tears down exactly what up.sh set up.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
STATE="${CLUSTER_STATE:-$ROOT/bin/cluster}"
# A relative CLUSTER_STATE would break the paths handed to the daemons.
[[ "$STATE" == /* ]] || STATE="$PWD/$STATE"

# settings computes every setting from the CLUSTER_* environment (defaults otherwise).
settings() {
  KUBE_VERSION="${KUBE_VERSION:-v1.37.2}"
  ETCD_VERSION="${ETCD_VERSION:-v3.7.3}"
  ASSETS_DIR="${CLUSTER_ASSETS:-${ASSETS_DIR:-$ROOT/bin/k8s/${KUBE_VERSION}-etcd${ETCD_VERSION}}}"
  NODE_NAME="${CLUSTER_NODE_NAME:-registrar-node}"
  BRIDGE="${CLUSTER_BRIDGE:-regbr0}"
  # Pod network: a /24; the host (bridge, node IP) takes .1, pods get .2-.254.
  POD_CIDR="${CLUSTER_POD_CIDR:-10.88.77.0/24}"
  # Service ClusterIPs. Nothing implements them (no kube-proxy); the host gets an "unreachable"
  # route for the range so that a stray connection fails at once instead of leaving the machine.
  SERVICE_CIDR="${CLUSTER_SERVICE_CIDR:-10.88.78.0/24}"
  APISERVER_PORT="${CLUSTER_APISERVER_PORT:-6443}"
  ETCD_PORT="${CLUSTER_ETCD_PORT:-23790}"
  ETCD_PEER_PORT="${CLUSTER_ETCD_PEER_PORT:-23800}"
  CM_PORT="${CLUSTER_CM_PORT:-10257}"
  SCHED_PORT="${CLUSTER_SCHEDULER_PORT:-10259}"
  KUBELET_PORT="${CLUSTER_KUBELET_PORT:-10250}"
  KUBELET_HEALTHZ_PORT="${CLUSTER_KUBELET_HEALTHZ_PORT:-10248}"
  # kubelet puts pods under <hierarchy>$CGROUP_ROOT/kubepods; a root of our own keeps them apart
  # from anything else on the machine and makes teardown unambiguous.
  CGROUP_ROOT="${CLUSTER_CGROUP_ROOT:-/registrar-cluster}"
  CNI_NETWORK="${CLUSTER_CNI_NETWORK:-registrar-cluster}"
  PAUSE_IMAGE="${CLUSTER_PAUSE_IMAGE:-registrar.dev/pause:local}"
  LOG_LEVEL="${CLUSTER_LOG_LEVEL:-1}"

  PKI="$STATE/pki"
  LOGS="$STATE/logs"
  PIDS="$STATE/pids"
  CTRD_DIR="$STATE/containerd"
  CTRD_SOCK="$CTRD_DIR/containerd.sock"
  RUNC_ROOT="$STATE/runc"
  CNI_CONF_DIR="$STATE/cni/net.d"
  CNI_BIN_DIR="/usr/lib/cni"
  CNI_CACHE_DIR="/var/lib/cni/results"
  KUBELET_DIR="$STATE/kubelet"
  HOSTS_TAG="# added by registrar hack/cluster"
  # Host directories the daemons create when missing; up.sh notes those it saw missing in
  # $CREATED_DIRS and down.sh removes them again when empty.
  # (The kubelet's device-plugin socket is always /var/lib/kubelet/device-plugins/kubelet.sock.)
  HOST_DIRS=(/var/log/containers /run/netns /var/lib/cni /run/containerd /var/lib/kubelet)
  CREATED_DIRS="$STATE/created-dirs"

  # Values derived from POD_CIDR (validated by check_cidr).
  POD_PREFIX="${POD_CIDR%.0/24}"
  BRIDGE_IP="${POD_PREFIX}.1"
}
settings

# The CLUSTER_* values this file reads; up.sh records them in $STATE/cluster.env.
SETTINGS_VARS=(CLUSTER_ASSETS CLUSTER_NODE_NAME CLUSTER_BRIDGE CLUSTER_POD_CIDR CLUSTER_SERVICE_CIDR
  CLUSTER_APISERVER_PORT CLUSTER_ETCD_PORT CLUSTER_ETCD_PEER_PORT CLUSTER_CM_PORT CLUSTER_SCHEDULER_PORT
  CLUSTER_KUBELET_PORT CLUSTER_KUBELET_HEALTHZ_PORT CLUSTER_CGROUP_ROOT CLUSTER_CNI_NETWORK
  CLUSTER_PAUSE_IMAGE CLUSTER_LOG_LEVEL)

# record_settings writes the settings in use to $STATE/cluster.env.
record_settings() {
  {
    echo "# written by hack/cluster/up.sh: the settings of the cluster in this directory"
    printf 'CLUSTER_ASSETS=%q\n' "$ASSETS_DIR"
    printf 'CLUSTER_NODE_NAME=%q\n' "$NODE_NAME"
    printf 'CLUSTER_BRIDGE=%q\n' "$BRIDGE"
    printf 'CLUSTER_POD_CIDR=%q\n' "$POD_CIDR"
    printf 'CLUSTER_SERVICE_CIDR=%q\n' "$SERVICE_CIDR"
    printf 'CLUSTER_APISERVER_PORT=%q\n' "$APISERVER_PORT"
    printf 'CLUSTER_ETCD_PORT=%q\n' "$ETCD_PORT"
    printf 'CLUSTER_ETCD_PEER_PORT=%q\n' "$ETCD_PEER_PORT"
    printf 'CLUSTER_CM_PORT=%q\n' "$CM_PORT"
    printf 'CLUSTER_SCHEDULER_PORT=%q\n' "$SCHED_PORT"
    printf 'CLUSTER_KUBELET_PORT=%q\n' "$KUBELET_PORT"
    printf 'CLUSTER_KUBELET_HEALTHZ_PORT=%q\n' "$KUBELET_HEALTHZ_PORT"
    printf 'CLUSTER_CGROUP_ROOT=%q\n' "$CGROUP_ROOT"
    printf 'CLUSTER_CNI_NETWORK=%q\n' "$CNI_NETWORK"
    printf 'CLUSTER_PAUSE_IMAGE=%q\n' "$PAUSE_IMAGE"
    printf 'CLUSTER_LOG_LEVEL=%q\n' "$LOG_LEVEL"
  } >"$STATE/cluster.env"
}

# load_recorded_settings: take the settings up.sh recorded for the cluster in $STATE, so that
# down.sh (and a repeated up.sh) act on exactly what is there whatever their environment says.
load_recorded_settings() {
  [[ -f "$STATE/cluster.env" ]] || return 0
  local line
  while IFS= read -r line; do
    [[ "$line" =~ ^(CLUSTER_[A-Z_]+)=(.*)$ ]] || continue
    # Values were written with printf %q; eval only assignments to known names.
    case " ${SETTINGS_VARS[*]} " in *" ${BASH_REMATCH[1]} "*) eval "export ${BASH_REMATCH[1]}=${BASH_REMATCH[2]}" ;; esac
  done <"$STATE/cluster.env"
  settings
}

log() { printf '[cluster] %s\n' "$*" >&2; }
die() { printf '[cluster] ERROR: %s\n' "$*" >&2; exit 1; }
# cannot_run: the machine cannot host the cluster at all (exit 2, so callers can fall back).
cannot_run() { printf '[cluster] CANNOT RUN: %s\n' "$*" >&2; exit 2; }

check_cidr() {
  local name="$1" cidr="$2"
  [[ "$cidr" =~ ^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})\.0/24$ ]] ||
    cannot_run "$name=$cidr: only a.b.c.0/24 ranges are supported"
  local o
  for o in "${BASH_REMATCH[@]:1:3}"; do ((o <= 255)) || cannot_run "$name=$cidr is not an IPv4 range"; done
}

# proc_matches PID: the process is alive (not a zombie) and its command line names our state
# dir, which every process the harness starts does; protects against PID reuse.
proc_matches() {
  local pid="$1" stat
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  stat="$(cat "/proc/$pid/stat" 2>/dev/null)" || return 1
  stat="${stat##*) }"
  [[ "${stat%% *}" != Z ]] || return 1
  local cmd
  cmd="$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline")" || return 1
  [[ "$cmd" == *"$STATE/"* ]]
}

# running NAME: the process recorded in $PIDS/NAME is alive and ours.
running() {
  local f="$PIDS/$1"
  [[ -f "$f" ]] && proc_matches "$(<"$f")"
}

# alive PID: the process exists and is not a zombie (pid 1 here need not reap orphans).
alive() {
  local stat
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
  stat="${stat##*) }"
  [[ "${stat%% *}" != Z ]]
}

# stop_pid PID NAME [TIMEOUT]: TERM, then KILL after TIMEOUT seconds (default 10).
stop_pid() {
  local pid="$1" name="$2" timeout="${3:-10}" i
  alive "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < timeout * 10; i++)); do
    alive "$pid" || { log "stopped $name (pid $pid)"; return 0; }
    sleep 0.1
  done
  log "$name (pid $pid) ignored TERM for ${timeout}s; killing"
  kill -KILL "$pid" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do alive "$pid" || return 0; sleep 0.1; done
  log "WARNING: $name (pid $pid) still alive after KILL"
}

# now: seconds since the epoch with microseconds; elapsed START: seconds since START.
now() { echo "${EPOCHREALTIME/,/.}"; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
