#!/usr/bin/env bash
# Builds a CoreDNS with only the etcd plugin (plus errors and log) from the Go module proxy,
# for the tests of internal/store/coredns. The build module is hack/coredns (its own go.mod,
# so CoreDNS's dependencies stay out of registrar's). Output: $OUT, reused when present.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
COREDNS_VERSION="$(awk '$1 == "github.com/coredns/coredns" || ($1 == "require" && $2 == "github.com/coredns/coredns") {print $NF; exit}' "$ROOT/hack/coredns/go.mod")"
OUT="${OUT:-$ROOT/bin/coredns-${COREDNS_VERSION}}"
log() { echo "[coredns] $*" >&2; }

if [[ -x "$OUT" && "$OUT" -nt "$ROOT/hack/coredns/main.go" && "$OUT" -nt "$ROOT/hack/coredns/go.mod" ]]; then
  log "$(basename "$OUT") present"
else
  log "building CoreDNS ${COREDNS_VERSION} (etcd plugin only; a minute or more on a cold cache)"
  mkdir -p "$(dirname "$OUT")"
  (cd "$ROOT/hack/coredns" && CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "-s -w" -o "$OUT.tmp" .)
  mv "$OUT.tmp" "$OUT"
fi
echo "$OUT"
