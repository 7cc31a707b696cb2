#!/usr/bin/env bash
# Builds golangci-lint with the Kube API Linter compiled in (hack/golangci-lint: its own
# go.mod pins both, so the linters' dependencies stay out of registrar's) from the Go module
# proxy. Output: $OUT, reused when newer than the build module.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION="$(awk '$1 == "github.com/golangci/golangci-lint/v2" {print $2; exit}' "$ROOT/hack/golangci-lint/go.mod")"
OUT="${OUT:-$ROOT/bin/golangci-lint-${VERSION}}"
log() { echo "[golangci-lint] $*" >&2; }

if [[ -x "$OUT" && "$OUT" -nt "$ROOT/hack/golangci-lint/main.go" && "$OUT" -nt "$ROOT/hack/golangci-lint/go.mod" ]]; then
  log "$(basename "$OUT") present"
else
  log "building golangci-lint ${VERSION} with kube-api-linter (several minutes on a cold cache)"
  mkdir -p "$(dirname "$OUT")"
  (cd "$ROOT/hack/golangci-lint" && CGO_ENABLED=0 go build -mod=readonly -trimpath -o "$OUT.tmp" .)
  mv "$OUT.tmp" "$OUT"
fi
echo "$OUT"
