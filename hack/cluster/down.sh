#!/usr/bin/env bash
# Tears down what hack/cluster/up.sh set up, and only that: its own processes (by the PIDs it
# recorded, checked against their command lines), the containerd shims, runc processes and
# containers of its containerd, the mounts under its state dir, the pods' network namespaces,
# veths and the bridge, the kubelet's cgroups, the route and /etc/hosts entry it added, and the
# state dir itself (kept with KEEP_STATE=1). Safe to run twice, and after a failed up.sh.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
load_recorded_settings

((EUID == 0)) || cannot_run "needs root"

# procs_by ARGV0-GLOB NEEDLE: pids whose argv[0] basename matches the glob and whose command
# line contains NEEDLE.
procs_by() {
  local glob="$1" needle="$2" d pid cmd argv0
  for d in /proc/[0-9]*; do
    pid="${d#/proc/}"
    cmd="$(tr '\0' ' ' 2>/dev/null <"$d/cmdline")" || continue
    [[ -n "$cmd" && "$cmd" == *"$needle"* ]] || continue
    argv0="${cmd%% *}"
    # shellcheck disable=SC2053 # the glob is meant to match
    [[ "${argv0##*/}" == $glob ]] || continue
    if alive "$pid"; then echo "$pid"; fi
  done
}

# cgroup_dirs: our kubelet's cgroup roots, one per hierarchy ("" for CLUSTER_CGROUP_ROOT=/).
cgroup_dirs() {
  local h root="${CGROUP_ROOT%/}"
  for h in /sys/fs/cgroup/*/ /sys/fs/cgroup/; do
    if [[ -d "${h%/}$root/kubepods" || ( -n "$root" && -d "${h%/}$root" ) ]]; then echo "${h%/}$root"; fi
  done
}

# kill_pods: SIGKILL every process in the kubelet's cgroups (the containers), until none is left.
kill_pods() {
  local i dir pids
  for ((i = 0; i < 50; i++)); do
    # Only the pods' cgroups: with CLUSTER_CGROUP_ROOT=/ the root is the whole hierarchy.
    pids="$(for dir in $(cgroup_dirs); do
      # Cgroups vanish while their processes die: find may then fail, which is not an error here.
      [[ ! -d "$dir/kubepods" ]] || find "$dir/kubepods" -name cgroup.procs -exec cat {} + 2>/dev/null || true
    done | sort -u)"
    pids="$(for p in $pids; do alive "$p" && echo "$p"; done)" || true
    [[ -n "$pids" ]] || return 0
    ((i > 0)) || log "killing container processes: $(echo "$pids" | wc -l)"
    # shellcheck disable=SC2086 # a list of pids
    kill -KILL $pids 2>/dev/null || true
    sleep 0.1
  done
  log "WARNING: container processes survive: $pids"
}

stop_named() { # NAME [TIMEOUT]
  local f="$PIDS/$1"
  [[ -f "$f" ]] || return 0
  if running "$1"; then stop_pid "$(<"$f")" "$1" "${2:-10}"; fi
  rm -f "$f"
}

# our_mounts: mount points at or under $1, deepest first (mountinfo escapes spaces as \040).
our_mounts() {
  local prefix="$1" m
  awk '{print $5}' /proc/self/mountinfo | while IFS= read -r m; do
    m="$(printf '%b' "$m")"
    if [[ "$m" == "$prefix" || "$m" == "$prefix"/* ]]; then echo "$m"; fi
  done | awk '{print length($0) "\t" $0}' | sort -rn | cut -f2-
}

unmount_under() {
  local prefix="$1" m i
  for ((i = 0; i < 5; i++)); do
    local mounts
    mounts="$(our_mounts "$prefix")"
    [[ -n "$mounts" ]] || return 0
    while IFS= read -r m; do
      umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "WARNING: cannot unmount $m"
    done <<<"$mounts"
  done
  [[ -z "$(our_mounts "$prefix")" ]] || log "WARNING: mounts remain under $prefix"
}

main() {
  local t0 netns=() shim_pids=() shim_socks=() p f
  t0="$(now)"
  log "tearing down the cluster in $STATE"

  # What to clean later, gathered while it can still be seen: the pods' network namespaces
  # (from the CNI result cache and from the veths on our bridge), our shims and their sockets.
  if compgen -G "$CNI_CACHE_DIR/$CNI_NETWORK-*" >/dev/null; then
    while IFS= read -r p; do netns+=("$p"); done < <(
      grep -ho '"sandbox":"[^"]*"' "$CNI_CACHE_DIR/$CNI_NETWORK"-* 2>/dev/null | cut -d'"' -f4 | sort -u)
  fi
  if ip link show "$BRIDGE" >/dev/null 2>&1; then
    # A veth's peer namespace shows as "link-netns NAME", or "link-netnsid N" when it has no
    # name in /run/netns ("ip netns list" prints "NAME (id: N)" for the named ones).
    local peer id name
    while read -r peer id; do
      if [[ "$peer" == link-netns ]]; then
        netns+=("/run/netns/$id")
      else
        name="$(ip netns list 2>/dev/null | awk -v id="$id)" '$2 == "(id:" && $3 == id {print $1}')"
        [[ -z "$name" ]] || netns+=("/run/netns/$name")
      fi
    done < <(ip -d -o link show master "$BRIDGE" 2>/dev/null | grep -oE 'link-netns(id)? [^ ]+' | sort -u)
  fi
  while IFS= read -r p; do [[ -z "$p" ]] || shim_pids+=("$p"); done < <(procs_by 'containerd-shim*' "-address $CTRD_SOCK")
  if ((${#shim_pids[@]})) && command -v ss >/dev/null; then
    for p in "${shim_pids[@]}"; do
      while IFS= read -r f; do [[ -z "$f" ]] || shim_socks+=("$f"); done < <(
        ss -xlpn 2>/dev/null | awk -v pat="pid=$p," 'index($0, pat) {print $5}' | grep '^/run/containerd/' || true)
    done
  fi

  # The kubelet first, so that nothing restarts containers; then the containers themselves.
  stop_named kubelet 15
  kill_pods
  for p in "${shim_pids[@]}"; do stop_pid "$p" containerd-shim 3; done
  while IFS= read -r p; do [[ -z "$p" ]] || stop_pid "$p" runc 2; done < <(procs_by 'runc*' "$RUNC_ROOT")
  stop_named kube-scheduler
  stop_named cluster-dns
  stop_named kube-controller-manager
  stop_named kube-apiserver 15
  stop_named containerd 15
  stop_named etcd 15
  # Shims that started while we were stopping things.
  while IFS= read -r p; do [[ -z "$p" ]] || stop_pid "$p" containerd-shim 3; done < <(procs_by 'containerd-shim*' "-address $CTRD_SOCK")
  kill_pods

  # Network: the pods' namespaces, their veths, the bridge, the ClusterIP route.
  for p in "${netns[@]}"; do
    [[ "$p" == /var/run/netns/* || "$p" == /run/netns/* ]] || continue
    [[ -e "$p" ]] || continue
    umount "$p" 2>/dev/null || umount -l "$p" 2>/dev/null || true
    rm -f "$p"
  done
  if ip link show "$BRIDGE" >/dev/null 2>&1; then
    local veth
    for veth in $(ip -o link show master "$BRIDGE" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
      ip link del "$veth" 2>/dev/null || true
    done
    if [[ "$(ip -4 addr show dev "$BRIDGE")" == *" $BRIDGE_IP/24 "* ]]; then
      ip link del "$BRIDGE" && log "removed bridge $BRIDGE"
    else
      log "WARNING: $BRIDGE has not our address $BRIDGE_IP/24; left alone"
    fi
  fi
  if ip -4 route show table main type unreachable | grep -E "^unreachable $SERVICE_CIDR( |$)" >/dev/null; then
    ip route del unreachable "$SERVICE_CIDR"
  fi
  # The CNI result cache: our network's entries and the loopback entries of the same sandboxes.
  for f in "$CNI_CACHE_DIR/$CNI_NETWORK"-*-eth0; do
    [[ -e "$f" ]] || continue
    p="${f#"$CNI_CACHE_DIR/$CNI_NETWORK"-}"
    rm -f "$f" "$CNI_CACHE_DIR/cni-loopback-${p%-eth0}-lo"
  done

  # Mounts: everything under the state dir (container rootfs, sandbox shm, pod volumes, the
  # kubelet's rshared self-mount).
  unmount_under "$STATE"
  for f in "${shim_socks[@]}"; do rm -f "$f"; done

  # Cgroups: the kubelet's tree under each hierarchy, deepest first; rmdir leaves busy ones.
  local dir
  for dir in $(cgroup_dirs); do
    [[ ! -d "$dir/kubepods" ]] || find "$dir/kubepods" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    # With CLUSTER_CGROUP_ROOT=/ the root is a hierarchy itself: only kubepods is ours.
    [[ -n "${CGROUP_ROOT%/}" ]] || continue
    rmdir "$dir" 2>/dev/null || true
    [[ ! -d "$dir" ]] || log "WARNING: cgroup $dir not empty; left in place"
  done

  # The kubelet's /var/log/containers links into our pod-logs dir.
  if [[ -d /var/log/containers ]]; then
    find /var/log/containers -maxdepth 1 -type l -lname "$STATE/*" -delete 2>/dev/null || true
  fi

  # /etc/hosts: only the line up.sh added (tagged). Rewritten in place: it may be a bind mount.
  if grep -qF -- "$HOSTS_TAG" /etc/hosts 2>/dev/null; then
    local hosts
    hosts="$(grep -vF -- " $NODE_NAME $HOSTS_TAG" /etc/hosts || true)"
    printf '%s\n' "$hosts" >/etc/hosts
  fi

  # The kubelet's device-plugin socket, which ignores --root-dir; left alone while listened on.
  local dp_sock=/var/lib/kubelet/device-plugins/kubelet.sock
  if [[ -S "$dp_sock" ]] && ! ss -xlnH 2>/dev/null | awk '{print $5}' | grep -qxF "$dp_sock"; then
    rm -f "$dp_sock"
  fi

  # Host directories that did not exist before up.sh, when nothing else uses them.
  if [[ -f "$CREATED_DIRS" ]]; then
    while IFS= read -r dir; do
      case " ${HOST_DIRS[*]} " in *" $dir "*) ;; *) continue ;; esac
      [[ ! -d "$dir" ]] || find "$dir" -depth -type d -empty -delete 2>/dev/null || true
    done <"$CREATED_DIRS"
    rm -f "$CREATED_DIRS"
  fi

  if [[ "${KEEP_STATE:-0}" == 1 ]]; then
    rm -rf "$PIDS"
    log "kept $STATE (KEEP_STATE=1)"
  elif [[ -d "$STATE" ]]; then
    if [[ -n "$(our_mounts "$STATE")" ]]; then
      log "WARNING: mounts remain under $STATE; not removing it"
    else
      rm -rf --one-file-system "$STATE"
    fi
  fi

  # Report anything of ours that is left.
  local left=()
  while IFS= read -r p; do [[ -z "$p" ]] || left+=("$p"); done < <(
    procs_by 'containerd-shim*' "-address $CTRD_SOCK"; procs_by 'containerd' "$CTRD_DIR/config.toml"
    procs_by 'kube*' "$STATE/"; procs_by etcd "$STATE/")
  ((${#left[@]} == 0)) || log "WARNING: processes left: ${left[*]}"
  ! ip link show "$BRIDGE" >/dev/null 2>&1 || log "WARNING: bridge $BRIDGE still present"
  log "down in $(elapsed "$t0")s"
}

main "$@"
