#!/usr/bin/env bash
# The end-to-end subset CI runs after `make test`, on one real single-node cluster
# (hack/cluster), in two installs:
# Both installs bring their own store (E2E_STORE=bundled: the etcd of config/components/etcd,
# the chart's etcd.enabled; the cluster DNS of hack/cluster resolves its members).
#  1. registrar installed from dist/install.yaml (kustomize): the annotated-Deployment checks,
#     and from the comparison (test/e2e/compare_test.go) registrar's rows only
#     (E2E_SETUPS=registrar): a graceful rolling update under load (0 failed requests and 0
#     requests after SIGTERM required) and a SIGKILLed container (the caller must stop picking
#     its address within 15 s, a generous bound: the measured figure belongs to docs/e2e.md),
#     then the webhook's scope (kube-system pods not mutated), the leading etcd member's pod
#     deleted under load and an upgrade of registrar to a new image under load (0 failed
#     requests, 0 keys of live pods deleted, gates released); then the suite uninstalls
#     (E2E_UNINSTALL=1: every ServiceRegistry, then the install's objects, waiting until the
#     namespace and the CRD are gone);
#  2. registrar installed with `helm upgrade --install` of charts/registrar, the way users
#     install it: the annotated-Deployment checks, the webhook's scope and the upgrade (helm
#     upgrade to a new image tag and chart version) again; helm uninstall, which must leave
#     nothing behind (install.Leftovers).
# Then teardown. The cluster starts once: the Helm install reuses it instead of a second
# hack/cluster/up.sh. A few minutes on 2 cores. CI_E2E_ARGS adds ginkgo flags (e.g.
# -ginkgo.seed=N). The whole suite, every setup, is `make test-e2e` (E2E_INSTALL_METHOD=helm
# for the Helm install). When this machine cannot host the cluster at all
# (hack/cluster/up.sh exits 2: not root, no cgroups, packages unavailable) it says so loudly
# and exits 0.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# Each step is a timed phase (hack/ci-phases.sh): under .ci/run (CI_RUN=1) its rows join the
# run's table; alone, this script prints its own.
source hack/ci-phases.sh
[[ -n "${CI_RUN:-}" ]] || { : >"$CI_PHASES"; ci_header; trap phase_report EXIT; }
assets="$(make -s print-ENVTEST_ASSETS)"

phase "build images" make -s images >/dev/null
for bin in etcd kube-apiserver $(make -s print-CLUSTER_BINARIES); do
  phase "build $bin" make -s "$assets/$bin"
done
rc=0
phase "cluster up" env CLUSTER_ASSETS="$assets" hack/cluster/up.sh || rc=$?
case "$rc" in
  0) ;;
  2) echo "=== e2e subset NOT RUN: this machine cannot host the single-node cluster (see above) ==="; exit 0 ;;
  *) echo "=== e2e subset FAILED: the cluster did not come up (exit $rc) ==="; hack/cluster/down.sh || true; exit 1 ;;
esac
phase "e2e subset, kustomize install" env E2E_SETUPS=registrar E2E_STORE=bundled E2E_UNINSTALL=1 KEEP_CLUSTER=1 make test-e2e \
  E2E_ARGS="-ginkgo.focus='injects the gate and preStop|graceful rolling update|SIGKILL of a container|prints the comparison table|does not mutate pods in kube-system|leading etcd member|Upgrading registrar' ${CI_E2E_ARGS:-}" || rc=$?
if ((rc == 0)); then
  phase "e2e subset, Helm install" env E2E_INSTALL_METHOD=helm E2E_STORE=bundled E2E_UNINSTALL=1 KEEP_CLUSTER=1 make test-e2e E2E_RESULTS="$PWD/bin/e2e-results/test-e2e-helm.json" \
    E2E_ARGS="-ginkgo.focus='injects the gate and preStop|does not mutate pods in kube-system|Upgrading registrar' ${CI_E2E_ARGS:-}" || rc=$?
fi
phase "cluster down" hack/cluster/down.sh || true
exit "$rc"
