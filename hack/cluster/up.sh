#!/usr/bin/env bash
# Brings up a real single-node Kubernetes on this machine: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and kubelet built from source (hack/envtest-assets.sh),
# containerd + runc + CNI plugins from Debian packages, a pod network on a bridge of its own.
# Everything lives in $CLUSTER_STATE (default bin/cluster); hack/cluster/down.sh removes it.
# Exit 2: this machine cannot run it (not root, no cgroups, packages cannot be installed).
# Exit 1: it tried and failed (logs in $CLUSTER_STATE/logs). See hack/cluster/README.md.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

T0="$(now)"
TIMINGS=()
# Once the host has been touched, a failure tears down what was set up (see fail).
SETUP_STARTED=
die() {
  [[ -z "$SETUP_STARTED" ]] || fail "$*"
  printf '[cluster] ERROR: %s\n' "$*" >&2
  exit 1
}
timing() { TIMINGS+=("$(printf '%-28s %6ss' "$1" "$2")"); log "$1 after $2s"; }

# ---------------------------------------------------------------------------------------------
# Preconditions: anything missing here means "cannot run on this machine" (exit 2).
preflight() {
  [[ "$(uname -s)" == Linux ]] || cannot_run "needs Linux"
  ((EUID == 0)) || cannot_run "needs root (containerd, runc, cgroups, bridges and mounts)"
  if [[ ! -d /sys/fs/cgroup || -z "$(ls -A /sys/fs/cgroup 2>/dev/null)" ]]; then
    cannot_run "no cgroup filesystem at /sys/fs/cgroup"
  fi
  command -v ip >/dev/null || cannot_run "needs iproute2 (ip)"
  command -v openssl >/dev/null || cannot_run "needs openssl"
  command -v curl >/dev/null || cannot_run "needs curl"
  command -v go >/dev/null || [[ -x "$ASSETS_DIR/kubelet" ]] || cannot_run "needs go to build the binaries"
  check_cidr CLUSTER_POD_CIDR "$POD_CIDR"
  check_cidr CLUSTER_SERVICE_CIDR "$SERVICE_CIDR"
  [[ "$POD_CIDR" != "$SERVICE_CIDR" ]] || cannot_run "pod and service ranges must differ"
  [[ "$CGROUP_ROOT" == / || "$CGROUP_ROOT" =~ ^(/[A-Za-z0-9._-]+)+$ ]] ||
    cannot_run "CLUSTER_CGROUP_ROOT=$CGROUP_ROOT is not a cgroup path like /name"
}

# ensure_packages installs containerd, runc, the CNI plugins and the tools kubelet shells out
# to, from apt, when any is missing. Package scripts must not start a containerd of their own:
# a policy-rc.d that forbids service starts is put in place for the install when none exists.
ensure_packages() {
  local missing=() pkg
  command -v containerd >/dev/null && command -v ctr >/dev/null || missing+=(containerd)
  command -v runc >/dev/null || missing+=(runc)
  [[ -x "$CNI_BIN_DIR/bridge" && -x "$CNI_BIN_DIR/host-local" && -x "$CNI_BIN_DIR/loopback" ]] ||
    missing+=(containernetworking-plugins)
  for pkg in iptables conntrack socat ethtool; do command -v "$pkg" >/dev/null || missing+=("$pkg"); done
  ((${#missing[@]} == 0)) && return 0
  command -v apt-get >/dev/null || cannot_run "missing ${missing[*]} and no apt-get to install them"
  log "installing ${missing[*]} (apt)"
  local policy=/usr/sbin/policy-rc.d added_policy=
  if [[ ! -e "$policy" ]]; then
    printf '#!/bin/sh\n# hack/cluster: no service starts during its package install\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    added_policy=1
  fi
  local rc=0
  {
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y --no-install-recommends "${missing[@]}" >"$STATE/apt.log" 2>&1 ||
      { apt-get update >>"$STATE/apt.log" 2>&1 &&
        apt-get install -y --no-install-recommends "${missing[@]}" >>"$STATE/apt.log" 2>&1; }
  } || rc=$?
  [[ -z "$added_policy" ]] || rm -f "$policy"
  ((rc == 0)) || { tail -5 "$STATE/apt.log" >&2; cannot_run "apt-get install ${missing[*]} failed (see $STATE/apt.log)"; }
  if ! command -v containerd >/dev/null || ! command -v runc >/dev/null || [[ ! -x "$CNI_BIN_DIR/bridge" ]]; then
    cannot_run "packages installed but containerd/runc/CNI plugins still missing"
  fi
}

ensure_binaries() {
  local b missing=()
  for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet; do
    [[ -x "$ASSETS_DIR/$b" ]] || missing+=("$b")
  done
  ensure_dns_binary
  ((${#missing[@]} == 0)) && return 0
  log "building ${missing[*]} into $ASSETS_DIR (hack/envtest-assets.sh; minutes on a cold cache)"
  local t
  t="$(now)"
  KUBE_VERSION="$KUBE_VERSION" ETCD_VERSION="$ETCD_VERSION" ASSETS_DIR="$ASSETS_DIR" \
    KUBE_EXTRA_BINARIES="kube-controller-manager kube-scheduler kubelet" \
    "$ROOT/hack/envtest-assets.sh" >/dev/null
  timing "binaries built" "$(elapsed "$t")"
}

# ensure_dns_binary builds the cluster DNS (hack/cluster/dns, registrar's module) into
# bin/cluster-dns when it is missing or older than its source.
DNS_BIN="$ROOT/bin/cluster-dns"
ensure_dns_binary() {
  [[ -x "$DNS_BIN" && "$DNS_BIN" -nt "$ROOT/hack/cluster/dns/main.go" ]] && return 0
  log "building the cluster DNS into $DNS_BIN"
  local t
  t="$(now)"
  (cd "$ROOT" && CGO_ENABLED=0 go build -o "$DNS_BIN" ./hack/cluster/dns) || die "building hack/cluster/dns failed"
  timing "cluster DNS built" "$(elapsed "$t")"
}

# check_ports: the ports of components that are not running yet must be free.
check_ports() {
  command -v ss >/dev/null || return 0
  local spec name port var
  for spec in etcd:$ETCD_PORT:CLUSTER_ETCD_PORT etcd:$ETCD_PEER_PORT:CLUSTER_ETCD_PEER_PORT \
    kube-apiserver:$APISERVER_PORT:CLUSTER_APISERVER_PORT kube-controller-manager:$CM_PORT:CLUSTER_CM_PORT \
    kube-scheduler:$SCHED_PORT:CLUSTER_SCHEDULER_PORT kubelet:$KUBELET_PORT:CLUSTER_KUBELET_PORT \
    kubelet:$KUBELET_HEALTHZ_PORT:CLUSTER_KUBELET_HEALTHZ_PORT; do
    IFS=: read -r name port var <<<"$spec"
    running "$name" && continue
    if [[ -n "$(ss -Hltn "sport = :$port" 2>/dev/null)" ]]; then
      die "port $port ($name) is in use by another process; set $var to a free port"
    fi
  done
}

# ---------------------------------------------------------------------------------------------
# Host setup: /etc/hosts entry for the node name, the bridge, the service-range route.

# ensure_hosts_entry: the API server reaches the kubelet by hostname, which must resolve to
# 127.0.0.1 (the kubelet listens there). /etc/hosts may be a bind mount: rewrite in place.
ensure_hosts_entry() {
  local addrs
  addrs="$(getent ahostsv4 "$NODE_NAME" 2>/dev/null | awk '{print $1}' | sort -u | tr '\n' ' ')" || true
  if [[ -z "$addrs" ]]; then
    log "adding '127.0.0.1 $NODE_NAME' to /etc/hosts"
    printf '127.0.0.1 %s %s\n' "$NODE_NAME" "$HOSTS_TAG" >>/etc/hosts
  elif [[ "$addrs" != "127.0.0.1 " ]]; then
    die "$NODE_NAME resolves to $addrs, not 127.0.0.1; set CLUSTER_NODE_NAME to another name"
  fi
}

# overlapping_routes CIDR: routes (other than the default route and our bridge's own) that
# cover or lie inside CIDR.
overlapping_routes() {
  { ip -4 route show table all to match "$1"; ip -4 route show table all root "$1"; } 2>/dev/null |
    grep -vE '^(default|unreachable default|broadcast|local) ' |
    grep -vE "^(broadcast |local )?[0-9./]+ dev $BRIDGE( |$)" | grep -vE "^unreachable $1( |$)" || true
}

ensure_bridge() {
  local other
  other="$(overlapping_routes "$POD_CIDR")"
  [[ -z "$other" ]] || die "pod range $POD_CIDR clashes with routes on this machine:
$other
set CLUSTER_POD_CIDR to a free a.b.c.0/24"
  other="$(overlapping_routes "$SERVICE_CIDR")"
  [[ -z "$other" ]] || die "service range $SERVICE_CIDR clashes with routes on this machine:
$other
set CLUSTER_SERVICE_CIDR to a free a.b.c.0/24"
  if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    log "creating bridge $BRIDGE ($BRIDGE_IP/24)"
    ip link add "$BRIDGE" type bridge
  fi
  [[ "$(ip -d link show "$BRIDGE")" == *" bridge "* ]] || die "$BRIDGE exists and is not a bridge"
  [[ "$(ip -4 addr show dev "$BRIDGE")" == *" $BRIDGE_IP/24 "* ]] || ip addr add "$BRIDGE_IP/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  # ClusterIPs lead nowhere without kube-proxy: fail fast on this host instead of routing out.
  ip route replace unreachable "$SERVICE_CIDR"
}

# check_pod_route: traffic to the pod range must stay on our bridge, on this machine.
check_pod_route() {
  local probe="${POD_PREFIX}.200" route
  route="$(ip -4 route get "$probe" 2>&1)" || die "ip route get $probe: $route"
  [[ "$route" == *" dev $BRIDGE "* && "$route" != *" via "* ]] ||
    die "traffic to the pod range would not stay on $BRIDGE: $route"
  route="$(ip -4 route get "${SERVICE_CIDR%.0/24}.1" 2>&1)" && die "service range is routable: $route"
  return 0
}

# ---------------------------------------------------------------------------------------------
# PKI: a CA of our own and the certificates each component needs (EC P-256).

new_ca() { # name CN
  openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
    -keyout "$PKI/$1.key" -out "$PKI/$1.crt" -days 3650 -sha256 -subj "/CN=$2" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
}

issue() { # name CN O EKU SANs(comma list, "" for none) [CA name, default ca]
  local name="$1" cn="$2" org="$3" eku="$4" sans="$5" ca="${6:-ca}" subj="/CN=$2"
  [[ -z "$org" ]] || subj="/O=$org/CN=$cn"
  openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
    -keyout "$PKI/$name.key" -out "$PKI/$name.csr" -subj "$subj" 2>/dev/null
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$eku"
    [[ -z "$sans" ]] || echo "subjectAltName=$sans"
  } >"$PKI/$name.ext"
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/$ca.crt" -CAkey "$PKI/$ca.key" \
    -set_serial "0x$(openssl rand -hex 16)" -days 365 -sha256 -extfile "$PKI/$name.ext" \
    -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}

ensure_pki() {
  # Certificates name the node and the bridge address: remade when those change.
  local stamp="node=$NODE_NAME ip=$BRIDGE_IP svc=$SERVICE_CIDR"
  if [[ -f "$PKI/stamp" && "$(<"$PKI/stamp")" == "$stamp" && -f "$PKI/sa.pub" ]]; then return 0; fi
  log "writing certificates to $PKI"
  rm -rf "$PKI"
  mkdir -p "$PKI"
  chmod 700 "$PKI"
  new_ca ca registrar-cluster-ca
  # The aggregation layer's CA: the API server proxies to aggregated APIs as front-proxy-client,
  # and components read the request-header CA from extension-apiserver-authentication.
  new_ca front-proxy-ca registrar-cluster-front-proxy-ca
  issue front-proxy-client front-proxy-client "" clientAuth "" front-proxy-ca
  local svc_ip="${SERVICE_CIDR%.0/24}.1"
  issue apiserver kube-apiserver "" serverAuth \
    "DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:$NODE_NAME,IP:127.0.0.1,IP:$BRIDGE_IP,IP:$svc_ip"
  issue apiserver-kubelet-client kube-apiserver-kubelet-client system:masters clientAuth ""
  issue admin registrar-admin system:masters clientAuth ""
  issue controller-manager system:kube-controller-manager "" clientAuth ""
  issue scheduler system:kube-scheduler "" clientAuth ""
  issue node "system:node:$NODE_NAME" system:nodes clientAuth ""
  issue kubelet "$NODE_NAME" "" serverAuth "DNS:$NODE_NAME,DNS:localhost,IP:127.0.0.1,IP:$BRIDGE_IP"
  issue controller-manager-serving kube-controller-manager "" serverAuth "DNS:localhost,IP:127.0.0.1"
  issue scheduler-serving kube-scheduler "" serverAuth "DNS:localhost,IP:127.0.0.1"
  openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/sa.key" 2>/dev/null
  openssl ec -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  echo "$stamp" >"$PKI/stamp"
}

# put FILE: write stdin to FILE, atomically and only when it changes (containerd watches the CNI
# conf dir, and a half-written file there is an error in its log).
put() {
  local file="$1"
  (umask 077 && cat >"$file.tmp")
  if cmp -s "$file.tmp" "$file"; then rm -f "$file.tmp"; else mv -f "$file.tmp" "$file"; fi
}

kubeconfig() { # file user cert-name
  local file="$1" user="$2" name="$3"
  put "$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: registrar-cluster
  cluster:
    server: https://127.0.0.1:${APISERVER_PORT}
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: ${user}
  user:
    client-certificate-data: $(base64 -w0 "$PKI/$name.crt")
    client-key-data: $(base64 -w0 "$PKI/$name.key")
contexts:
- name: registrar-cluster
  context:
    cluster: registrar-cluster
    user: ${user}
current-context: registrar-cluster
EOF
}

# ---------------------------------------------------------------------------------------------
# Configuration files.

write_configs() {
  mkdir -p "$CTRD_DIR" "$CNI_CONF_DIR" "$STATE/cni/ipam" "$KUBELET_DIR" "$STATE/pod-logs" "$RUNC_ROOT"
  kubeconfig "$STATE/admin.kubeconfig" registrar-admin admin
  kubeconfig "$STATE/controller-manager.kubeconfig" system:kube-controller-manager controller-manager
  kubeconfig "$STATE/scheduler.kubeconfig" system:kube-scheduler scheduler
  kubeconfig "$STATE/kubelet.kubeconfig" "system:node:$NODE_NAME" node

  put "$CTRD_DIR/config.toml" <<EOF
# containerd for hack/cluster: everything under the state dir, our own socket.
version = 2
root = "$CTRD_DIR/root"
state = "$CTRD_DIR/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "$CTRD_SOCK"

[ttrpc]
  address = "$CTRD_SOCK.ttrpc"

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "$CTRD_DIR/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # The sandbox lacks CAP_SYS_RESOURCE; without this runc fails with
  # "can't get final child's PID from pipe" when it lowers a container's oom_score_adj.
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "$(command -v runc)"
        Root = "$RUNC_ROOT"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_BIN_DIR"
    conf_dir = "$CNI_CONF_DIR"
    max_conf_num = 1
EOF

  # A bridge plugin that is not a gateway and masquerades nothing: pods get an address in the
  # /24 and no default route, so their traffic cannot leave this machine.
  put "$CNI_CONF_DIR/10-registrar.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$CNI_NETWORK",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": false,
      "isDefaultGateway": false,
      "ipMasq": false,
      "hairpinMode": false,
      "ipam": {
        "type": "host-local",
        "dataDir": "$STATE/cni/ipam",
        "ranges": [[{"subnet": "$POD_CIDR", "rangeStart": "${POD_PREFIX}.2", "rangeEnd": "${POD_PREFIX}.254"}]]
      }
    }
  ]
}
EOF

  put "$KUBELET_DIR/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: $CGROUP_ROOT
failSwapOn: false
containerRuntimeEndpoint: unix://$CTRD_SOCK
address: 127.0.0.1
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
tlsCertFile: $PKI/kubelet.crt
tlsPrivateKeyFile: $PKI/kubelet.key
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: $PKI/ca.crt
authorization:
  mode: Webhook
# Locally imported images cannot be pulled again: never garbage-collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
# Lowering oom_score_adj needs CAP_SYS_RESOURCE, which this sandbox lacks.
oomScoreAdj: 0
podLogsDir: $STATE/pod-logs
clusterDomain: cluster.local
# hack/cluster/dns on the bridge: Service and StatefulSet pod names resolve in pods.
clusterDNS:
- $BRIDGE_IP
serializeImagePulls: false
EOF
}

# ---------------------------------------------------------------------------------------------
# Processes.

# start NAME CMD...: start a daemon in its own session with its log in $LOGS/NAME.log and its
# pid in $PIDS/NAME, unless the one recorded there is still running.
start() {
  local name="$1"
  shift
  if running "$name"; then
    log "$name already running (pid $(<"$PIDS/$name"))"
    return 0
  fi
  echo "=== $(date -Is) $*" >>"$LOGS/$name.log"
  # Not a process-group leader (no job control here), so setsid execs without forking and $!
  # is the daemon's own pid.
  setsid "$@" >>"$LOGS/$name.log" 2>&1 </dev/null &
  echo "$!" >"$PIDS/$name"
}

# wait_for WHAT TIMEOUT PROCESS CMD...: poll CMD until it succeeds; fail early if PROCESS died.
wait_for() {
  local what="$1" timeout="$2" proc="$3" deadline
  shift 3
  deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if [[ -n "$proc" ]] && ! running "$proc"; then
      fail "$proc exited while waiting for $what" "$proc"
    fi
    ((SECONDS < deadline)) || fail "$what: not within ${timeout}s" "$proc"
    sleep 0.2
  done
  timing "$what" "$(elapsed "$T0")"
}

fail() { # message [process whose log to show]
  log "FAILED: $1"
  if [[ -n "${2:-}" && -f "$LOGS/$2.log" ]]; then
    log "last lines of $LOGS/$2.log:"
    tail -n 25 "$LOGS/$2.log" >&2
  fi
  if [[ "${CLUSTER_KEEP_ON_FAILURE:-0}" != 1 ]]; then
    log "tearing down (state and logs kept in $STATE; CLUSTER_KEEP_ON_FAILURE=1 leaves it running)"
    KEEP_STATE=1 CLUSTER_STATE="$STATE" "$ROOT/hack/cluster/down.sh" >&2 || true
  fi
  exit 1
}

api() { # curl the API server as admin
  curl -sSf --max-time 5 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
    "https://127.0.0.1:${APISERVER_PORT}$1"
}
node_ready() {
  local node
  node="$(api "/api/v1/nodes/$NODE_NAME")" || return 1
  [[ "${node//[[:space:]]/}" == *'"type":"Ready","status":"True"'* ]]
}
ctr_() { ctr --address "$CTRD_SOCK" --namespace k8s.io "$@"; }

start_containerd() {
  start containerd containerd --config "$CTRD_DIR/config.toml" --log-level warn
  wait_for "containerd ready" 30 containerd ctr --address "$CTRD_SOCK" version
}

# import_images imports bin/images/*.tar and $CLUSTER_IMAGE_TARS (space-separated) into
# containerd's k8s.io namespace. It runs in the background while the control plane starts;
# wait_images collects it before the kubelet starts.
import_images() {
  local tars=() f
  shopt -s nullglob
  tars=("$ROOT"/bin/images/*.tar)
  shopt -u nullglob
  for f in ${CLUSTER_IMAGE_TARS:-}; do tars+=("$f"); done
  for f in "${tars[@]}"; do
    [[ -f "$f" ]] || { log "image tarball $f not found"; return 1; }
    log "importing $f"
    ctr_ images import "$f" >>"$LOGS/images.log" 2>&1 || { log "importing $f failed"; return 1; }
  done
  echo "${#tars[@]} $(elapsed "$T0")" >"$STATE/images.done"
}

wait_images() {
  wait "$IMPORT_PID" || fail "image import failed" images
  local count secs
  read -r count secs <"$STATE/images.done"
  rm -f "$STATE/images.done"
  timing "images imported ($count, background)" "$secs"
  local images
  images="$(ctr_ images ls -q)" || die "ctr images ls failed"
  if ! grep -qxF -- "$PAUSE_IMAGE" <<<"$images"; then
    log "WARNING: sandbox image $PAUSE_IMAGE is not in containerd: pods cannot start. Build"
    log "WARNING: bin/images/pause.tar (make images) or name one in CLUSTER_IMAGE_TARS."
    NO_PAUSE=1
  fi
}

start_etcd() {
  start etcd "$ASSETS_DIR/etcd" --name registrar --data-dir "$STATE/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "registrar=http://127.0.0.1:$ETCD_PEER_PORT" --log-level warn
  wait_for "etcd healthy" 30 etcd curl -sf --max-time 2 "http://127.0.0.1:$ETCD_PORT/health"
}

start_apiserver() {
  start kube-apiserver "$ASSETS_DIR/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address 0.0.0.0 --secure-port "$APISERVER_PORT" --advertise-address "$BRIDGE_IP" \
    --service-cluster-ip-range "$SERVICE_CIDR" \
    --endpoint-reconciler-type none \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
    --allow-privileged=true \
    --enable-aggregator-routing=true \
    --client-ca-file "$PKI/ca.crt" \
    --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
    --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority "$PKI/ca.crt" \
    --kubelet-preferred-address-types Hostname \
    --requestheader-client-ca-file "$PKI/front-proxy-ca.crt" --requestheader-allowed-names front-proxy-client \
    --requestheader-username-headers X-Remote-User --requestheader-group-headers X-Remote-Group \
    --requestheader-extra-headers-prefix X-Remote-Extra- \
    --proxy-client-cert-file "$PKI/front-proxy-client.crt" --proxy-client-key-file "$PKI/front-proxy-client.key" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
    --profiling=false --v "$LOG_LEVEL"
  wait_for "apiserver ready" 90 kube-apiserver api /readyz
}

# start_dns serves the cluster's DNS names on the bridge address (port 53), for the kubelet's
# clusterDNS.
start_dns() {
  start cluster-dns "$DNS_BIN" --kubeconfig "$STATE/admin.kubeconfig" --listen "$BRIDGE_IP:53"
  wait_for "cluster DNS serving" 30 cluster-dns dns_serving
}
dns_serving() { [[ -n "$(ss -Hlun "src $BRIDGE_IP:53" 2>/dev/null)" ]]; }

start_controllers() {
  start kube-controller-manager "$ASSETS_DIR/kube-controller-manager" \
    --kubeconfig "$STATE/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$STATE/controller-manager.kubeconfig" \
    --authorization-kubeconfig "$STATE/controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$CM_PORT" \
    --tls-cert-file "$PKI/controller-manager-serving.crt" --tls-private-key-file "$PKI/controller-manager-serving.key" \
    --leader-elect=false --use-service-account-credentials=true \
    --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
    --service-cluster-ip-range "$SERVICE_CIDR" \
    --profiling=false --v "$LOG_LEVEL"
  start kube-scheduler "$ASSETS_DIR/kube-scheduler" \
    --kubeconfig "$STATE/scheduler.kubeconfig" \
    --authentication-kubeconfig "$STATE/scheduler.kubeconfig" \
    --authorization-kubeconfig "$STATE/scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$SCHED_PORT" \
    --tls-cert-file "$PKI/scheduler-serving.crt" --tls-private-key-file "$PKI/scheduler-serving.key" \
    --leader-elect=false --profiling=false --v "$LOG_LEVEL"
}

start_kubelet() {
  # kubelet checks that its cgroup root exists in every hierarchy.
  local h
  for h in /sys/fs/cgroup/*/; do
    [[ "$(stat -f -c %T "$h" 2>/dev/null)" == cgroup* ]] || continue
    mkdir -p "${h%/}$CGROUP_ROOT"
  done
  # A new cpuset cgroup starts with no CPUs and no memory nodes: give it its parent's.
  local cs=/sys/fs/cgroup/cpuset
  if [[ -f "$cs$CGROUP_ROOT/cpuset.cpus" && -z "$(<"$cs$CGROUP_ROOT/cpuset.cpus")" ]]; then
    cat "$cs/cpuset.cpus" >"$cs$CGROUP_ROOT/cpuset.cpus"
    cat "$cs/cpuset.mems" >"$cs$CGROUP_ROOT/cpuset.mems"
  fi
  [[ "$(stat -f -c %T /sys/fs/cgroup)" != cgroup2fs ]] || mkdir -p "/sys/fs/cgroup$CGROUP_ROOT"
  start kubelet "$ASSETS_DIR/kubelet" \
    --config "$KUBELET_DIR/config.yaml" --kubeconfig "$STATE/kubelet.kubeconfig" \
    --root-dir "$KUBELET_DIR" --cert-dir "$KUBELET_DIR/pki" \
    --hostname-override "$NODE_NAME" --node-ip "$BRIDGE_IP" --v "$LOG_LEVEL"
}

# ---------------------------------------------------------------------------------------------

main() {
  preflight
  mkdir -p "$STATE" "$LOGS" "$PIDS"
  # A cluster already running in $STATE keeps the settings it was started with.
  if [[ -f "$STATE/cluster.env" ]] && compgen -G "$PIDS/*" >/dev/null; then
    load_recorded_settings
  fi
  ensure_packages
  ensure_binaries
  check_ports
  record_settings
  local d
  for d in "${HOST_DIRS[@]}"; do
    [[ -e "$d" ]] || grep -qxF -- "$d" "$CREATED_DIRS" 2>/dev/null || echo "$d" >>"$CREATED_DIRS"
  done
  SETUP_STARTED=1
  ensure_hosts_entry
  ensure_bridge
  check_pod_route
  ensure_pki
  write_configs
  T0="$(now)"
  start_containerd
  import_images &
  IMPORT_PID=$!
  start_etcd
  start_apiserver
  start_dns
  start_controllers
  wait_images
  start_kubelet
  wait_for "node Ready" 120 kubelet node_ready
  wait_for "default ServiceAccount" 120 kube-controller-manager api /api/v1/namespaces/default/serviceaccounts/default
  wait_for "kube-root-ca.crt published" 60 kube-controller-manager api /api/v1/namespaces/default/configmaps/kube-root-ca.crt
  check_pod_route
  local rss
  rss="$(for n in "$PIDS"/*; do ps -o rss= -p "$(<"$n")" 2>/dev/null; done | awk '{s += $1} END {printf "%d", s / 1024}')"
  cat <<EOF

Kubernetes ${KUBE_VERSION} is up (single node $NODE_NAME, control plane RSS ~${rss} MB).
$(printf '  %s\n' "${TIMINGS[@]}")
  state:     $STATE (logs in $LOGS)
  API:       https://127.0.0.1:${APISERVER_PORT} (pods reach it at https://${BRIDGE_IP}:${APISERVER_PORT})
  pods:      $POD_CIDR on $BRIDGE (node IP $BRIDGE_IP); no kube-proxy: ClusterIPs ($SERVICE_CIDR) do not route
  images:    ctr --address $CTRD_SOCK -n k8s.io images ls
  teardown:  hack/cluster/down.sh (make cluster-down)

export KUBECONFIG=$STATE/admin.kubeconfig
EOF
  [[ -z "${NO_PAUSE:-}" ]] || log "WARNING: no sandbox image $PAUSE_IMAGE: pods will not start"
}

main "$@"
