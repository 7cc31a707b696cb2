#!/usr/bin/env bash
# Runs the envtest specs that time registrar N times (default 3) and prints what they report:
# - deregistration lag: the test's pod write (status patch or delete) to a separate etcd
#   watcher seeing the key deleted;
# - delete to deregistered: a graceful delete (pod kept by a finalizer, i.e. draining) to the
#   key's deletion;
# - warm-up to registered: the first warm-up request the stand-in pod server received to the
#   watcher seeing the endpoint put (6 requests, concurrency 2, minDuration 300ms).
# Not a benchmark (one pod at a time, race detector on); see the benchmark issue for load.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
: "${KUBEBUILDER_ASSETS:?run via make measure-lag}"
runs="${1:-3}"
out="$(mktemp -d)"
for i in $(seq 1 "$runs"); do
  (cd "$ROOT" && go test -race ./internal/controller/ -count=1 -timeout 10m \
    -args -ginkgo.focus='deregisters a|warms a gated pod up|deregisters a terminating pod' -ginkgo.json-report="$out/run$i.json" >/dev/null)
done
python3 - "$out" <<'PY'
import json, sys, glob, statistics
rows = {}
for f in sorted(glob.glob(sys.argv[1] + "/run*.json")):
    for suite in json.load(open(f)):
        for spec in suite["SpecReports"]:
            for e in spec.get("ReportEntries") or []:
                v = e["Value"]["Representation"]
                ms = float(v[:-2]) if v.endswith("ms") else float(v[:-2]) / 1000 if v.endswith("µs") else float(v[:-1]) * 1000
                rows.setdefault((e["Name"], spec["LeafNodeText"][:56]), []).append(ms)
print(f"{'measure':<24} {'spec':<56} {'runs':>4} {'min ms':>8} {'median ms':>10} {'max ms':>8}")
for (name, spec), v in sorted(rows.items()):
    print(f"{name:<24} {spec:<56} {len(v):>4} {min(v):>8.1f} {statistics.median(v):>10.1f} {max(v):>8.1f}")
PY
