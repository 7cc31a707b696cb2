#!/usr/bin/env bash
# Builds the envtest control-plane binaries (kube-apiserver, etcd) from source through the
# Go module proxy, because setup-envtest cannot download them on machines without internet.
# Output: $ASSETS_DIR/{kube-apiserver,etcd}; reused when present. Prints the directory.
# Arguments name the binaries to build (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubelet, kubectl); none: etcd, kube-apiserver and KUBE_EXTRA_BINARIES.
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.7.3}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ASSETS_DIR="${ASSETS_DIR:-$ROOT/bin/k8s/${KUBE_VERSION}-etcd${ETCD_VERSION}}"
WORK="${ROOT}/bin/.build"
log() { echo "[envtest-assets] $*" >&2; }
# Commands the module for KUBE_EXTRA_BINARIES imports (hack/cluster builds these).
CLUSTER_CMDS="kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl"

mkdir -p "$ASSETS_DIR" "$WORK"

# kube_module writes a throwaway module at $1 that requires k8s.io/kubernetes and replaces each
# staging module its go.mod lists (./staging/src/...) with the published v0.x.y of the same name.
# Its tools.go imports the k8s.io/kubernetes/cmd/ packages named in $2 (default kube-apiserver).
kube_module() {
  local dir="$1" cmds="${2:-kube-apiserver}" staging_version="v0${KUBE_VERSION#v1}"
  mkdir -p "$dir"
  local gomod
  gomod="$(cd "$dir" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@${KUBE_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  {
    echo "module registrar.dev/envtest-build"
    echo
    echo "go 1.26"
    echo
    echo "require k8s.io/kubernetes ${KUBE_VERSION}"
    echo
    echo "replace ("
    grep -E '^\s+k8s\.io/[a-z0-9-]+ => \./staging/' "$gomod" |
      awk -v v="$staging_version" '{print "\t" $1 " => " $1 " " v}'
    echo ")"
  } >"$dir/go.mod"
  {
    printf '//go:build tools\n\npackage tools\n\nimport (\n'
    for cmd in $cmds; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$cmd"; done
    printf ')\n'
  } >"$dir/tools.go"
  (cd "$dir" && go mod tidy >&2)
}

build_kube() {
  local name="$1" out="$ASSETS_DIR/$1"
  [[ -x "$out" ]] && { log "$name present"; return; }
  # One module for every Kubernetes binary (envtest's kube-apiserver and the cluster's), so
  # they resolve the same versions and a cold build compiles each shared package once.
  local dir="$WORK/kubernetes-${KUBE_VERSION}-all"
  [[ -f "$dir/go.sum" ]] || kube_module "$dir" "$CLUSTER_CMDS"
  local minor="${KUBE_VERSION#v1.}"; minor="${minor%%.*}"
  local pkg=k8s.io/component-base/version
  log "building $name ${KUBE_VERSION} (several minutes on a cold cache)"
  (cd "$dir" && CGO_ENABLED="${KUBE_CGO_ENABLED:-0}" go build -o "$out" \
    -ldflags "-s -w -X ${pkg}.gitVersion=${KUBE_VERSION} -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=${minor} -X ${pkg}.gitTreeState=clean" \
    "k8s.io/kubernetes/cmd/${name}")
}

build_etcd() {
  local out="$ASSETS_DIR/etcd"
  [[ -x "$out" ]] && { log "etcd present"; return; }
  local dir="$WORK/etcd-${ETCD_VERSION}"
  mkdir -p "$dir"
  if [[ ! -f "$dir/go.sum" ]]; then
    printf 'module registrar.dev/etcd-build\n\ngo 1.26\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" >"$dir/go.mod"
    printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' >"$dir/tools.go"
    (cd "$dir" && go mod tidy >&2)
  fi
  log "building etcd ${ETCD_VERSION}"
  (cd "$dir" && CGO_ENABLED=0 go build -o "$out" -ldflags "-s -w" go.etcd.io/etcd/server/v3)
}

names=("$@")
((${#names[@]})) || names=(etcd kube-apiserver ${KUBE_EXTRA_BINARIES:-})
for name in "${names[@]}"; do
  case "$name" in
    etcd) build_etcd ;;
    kube-apiserver | kube-controller-manager | kube-scheduler | kubelet | kubectl) build_kube "$name" ;;
    *) log "unknown binary $name"; exit 1 ;;
  esac
done
echo "$ASSETS_DIR"
