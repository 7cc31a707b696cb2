#!/usr/bin/env bash
# make run: run registrar against the cluster in $KUBECONFIG; when none is reachable, start a
# local control plane (hack/localcp) with the CRDs installed and run against that. With no
# --store-endpoints the operator serves an embedded etcd on 127.0.0.1:2379.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
: "${ENVTEST_ASSETS:?set by make run}"
export PATH="$ENVTEST_ASSETS:$PATH"

go build -o bin/registrar ./cmd

# start_real_cluster brings up the single-node cluster of hack/cluster (kubelet, containerd).
# It returns 1, and make run falls back to the control-plane-only mode, when this machine
# cannot host it (not root, no cgroups, no packages).
start_real_cluster() {
  echo "registrar: no reachable cluster; trying a real single-node cluster (hack/cluster; REGISTRAR_RUN_MODE=controlplane skips it)"
  make images >/dev/null
  local rc=0
  make cluster-up || rc=$?
  if ((rc != 0)); then
    echo "registrar: the single-node cluster cannot run here (exit $rc, see above); falling back to a control plane without kubelet"
    return 1
  fi
}

# run_cluster_demo installs registrar from dist/install.yaml and an annotated demo
# Deployment on the cluster and runs until Ctrl-C; then the cluster goes (KEEP_CLUSTER=1 keeps it).
run_cluster_demo() {
  [[ -n "${KEEP_CLUSTER:-}" ]] || trap 'hack/cluster/down.sh' EXIT
  make build-installer IMG=registrar.dev/registrar:local INSTALL_OVERLAY=config/default-selfsigned >/dev/null
  # shellcheck disable=SC1091
  source bin/cluster/cluster.env
  local node_ip
  node_ip="$(ip -4 -o addr show dev "$CLUSTER_BRIDGE" | awk '{print $4}' | cut -d/ -f1)"
  go build -o bin/clusterdemo ./hack/clusterdemo
  ETCD_BIN="$ENVTEST_ASSETS/etcd" bin/clusterdemo --kubeconfig bin/cluster/admin.kubeconfig \
    --node-ip "$node_ip" --manifests dist/install.yaml --state bin/cluster/demo
}

if kubectl --request-timeout=3s get --raw=/readyz >/dev/null 2>&1; then
  echo "registrar: using the cluster in ${KUBECONFIG:=$HOME/.kube/config}; installing the CRDs"
  kubectl apply -f config/crd/bases/
elif [[ "${REGISTRAR_RUN_MODE:-cluster}" == cluster ]] && start_real_cluster; then
  run_cluster_demo
  exit 0
else
  echo "registrar: no reachable cluster; starting a local control plane (kube-apiserver + etcd from $ENVTEST_ASSETS)"
  go build -o bin/localcp ./hack/localcp
  export KUBECONFIG="$ROOT/bin/local/kubeconfig"
  rm -f "$KUBECONFIG"
  KUBEBUILDER_ASSETS="$ENVTEST_ASSETS" bin/localcp --kubeconfig-out "$KUBECONFIG" &
  cp_pid=$!
  trap 'kill $cp_pid 2>/dev/null; wait $cp_pid 2>/dev/null || true' EXIT
  for _ in $(seq 1 120); do
    [[ -f "$KUBECONFIG" ]] && break
    kill -0 "$cp_pid" 2>/dev/null || { echo "local control plane failed to start" >&2; exit 1; }
    sleep 0.5
  done
  [[ -f "$KUBECONFIG" ]] || { echo "local control plane not ready after 60s" >&2; exit 1; }
fi

# The pod webhook: on the local control plane the API server reaches the operator on
# 127.0.0.1, with a self-signed certificate the operator generates in bin/local/certs.
webhook_args=()
if [[ -n "${cp_pid:-}" ]]; then
  certs="$ROOT/bin/local/certs"
  webhook_args=(--webhook-cert-dir="$certs" --webhook-self-signed-hosts=127.0.0.1,localhost)
  (
    for _ in $(seq 1 120); do [[ -s "$certs/ca.crt" ]] && break; sleep 0.5; done
    kubectl apply -f - >/dev/null <<YAML
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: registrar-local}
webhooks:
- name: mpod.registrar.dev
  clientConfig:
    url: https://127.0.0.1:9443/mutate--v1-pod
    caBundle: $(base64 -w0 "$certs/ca.crt")
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  failurePolicy: Ignore
  timeoutSeconds: 5
  namespaceSelector:
    matchExpressions:
    - {key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system, kube-node-lease, kube-public]}
    - {key: registrar.dev/webhook, operator: NotIn, values: [disabled]}
  objectSelector:
    matchExpressions:
    - {key: registrar.dev/webhook, operator: NotIn, values: [disabled]}
  sideEffects: None
  admissionReviewVersions: [v1]
  reinvocationPolicy: IfNeeded
YAML
    echo "registrar: pod webhook registered (https://127.0.0.1:9443/mutate--v1-pod)"
  ) &
fi

cat <<MSG
registrar: try it from another shell:
  export KUBECONFIG=$KUBECONFIG
  kubectl apply -f config/samples/
  kubectl get serviceregistries
MSG
bin/registrar --leader-elect=false --metrics-bind-address=:8080 --health-probe-bind-address=:8081 \
  --store-data-dir="$ROOT/bin/local/registrar-data" "${webhook_args[@]}" "$@"
