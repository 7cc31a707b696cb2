package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/store"
	etcdstore "github.com/registrar-dev/registrar/internal/store/etcd"
	"github.com/registrar-dev/registrar/test/support/adsclient"
)

// What "exact against the API server" means for the scenario, after each phase:
//   - store: for every registry, the keys under {prefix}/{service}/{namespace}/ are exactly
//     the eligible pods the API server holds (phase Running, an IP, ContainersReady, not
//     terminating, on a node whose Lease the test did not stop), each with the pod's UID,
//     IP and node and the registry's UID as owner; a refused registry has no key; no key
//     of the prefix belongs to no registry (foreign keys aside);
//   - xDS: every client is connected and holds, for every registry, exactly those pods as
//     HEALTHY endpoints at their IPs (a refused registry: none);
//   - gates: every gated pod that is eligible has registrar.dev/ready True; a gated pod
//     whose containers are not ready, or that a refused registry selects, has it not True
//     (pods on lost nodes are not judged: registrar does not promise a gate for them);
//   - status: a refused registry is Ready=False, reason ServiceNameOwnedElsewhere, its
//     message naming the owner.

// phaseResult is one phase's row: how long the test's actions took, and seconds from the
// phase's last action until each part was exact (and stayed so for the phase's hold); -1
// when it never was within the limit.
type phaseResult struct {
	Name          string  `json:"name"`
	ActionSeconds float64 `json:"action_seconds"`
	StoreSeconds  float64 `json:"store_seconds"`
	XDSSeconds    float64 `json:"xds_seconds"`
	GatesSeconds  float64 `json:"gates_seconds"`
	AllSeconds    float64 `json:"all_seconds"`
	// GuardHeldMax is the most deregistrations the node Lease guard held at once while
	// the test waited (registrar_deregistrations_held).
	GuardHeldMax float64  `json:"guard_held_max"`
	Failures     []string `json:"failures,omitempty"`
}

// exactness is one poll's verdict: the mismatches of each part.
type exactness struct {
	store, xds, gates, status []string
}

func (e exactness) ok() bool {
	return len(e.store) == 0 && len(e.xds) == 0 && len(e.gates) == 0 && len(e.status) == 0
}

// phaseLimit bounds the wait after each phase (SCENARIO_PHASE_LIMIT overrides it).
func phaseLimit() time.Duration {
	if v := os.Getenv("SCENARIO_PHASE_LIMIT"); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	if full() {
		return 4 * time.Minute
	}
	return 90 * time.Second
}

// phase runs the phase's actions, which return the moment the wait is measured from, then
// waits until the store, every xDS client and every gate are exact and have stayed so for
// hold; it records the phase's row and fails the test (not at once: the next phases still
// run and report) when the limit passes first.
func (p *prod) phase(name string, hold time.Duration, actions func() time.Time) {
	p.t.Helper()
	started := time.Now()
	from := actions()
	res := phaseResult{Name: name, ActionSeconds: time.Since(started).Seconds(), StoreSeconds: -1, XDSSeconds: -1, GatesSeconds: -1, AllSeconds: -1}
	deadline := time.Now().Add(phaseLimit())
	var e exactness
	var allSince time.Time
	mark := func(ok bool, field *float64, at time.Time) {
		switch {
		case !ok:
			*field = -1
		case *field < 0:
			*field = at.Sub(from).Seconds()
		}
	}
	for {
		if held, ok := p.op.metric("registrar_deregistrations_held"); ok {
			res.GuardHeldMax = max(res.GuardHeldMax, held)
		}
		e = p.exactness()
		now := time.Now()
		mark(len(e.store) == 0, &res.StoreSeconds, now)
		mark(len(e.xds) == 0, &res.XDSSeconds, now)
		mark(len(e.gates) == 0 && len(e.status) == 0, &res.GatesSeconds, now)
		if !e.ok() {
			allSince = time.Time{}
		} else if allSince.IsZero() {
			allSince = now
		}
		if !allSince.IsZero() && now.Sub(allSince) >= hold {
			res.AllSeconds = allSince.Sub(from).Seconds()
			break
		}
		if now.After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond) // polling with a deadline
	}
	if res.AllSeconds < 0 {
		for _, part := range []struct {
			what string
			v    []string
		}{{"store", e.store}, {"xDS", e.xds}, {"gates", e.gates}, {"status", e.status}} {
			if len(part.v) > 0 {
				f := fmt.Sprintf("%s not exact after %s: %s", part.what, phaseLimit(), strings.Join(part.v, "; "))
				res.Failures = append(res.Failures, f)
				p.t.Errorf("phase %q: %s", name, f)
			}
		}
	}
	p.t.Logf("phase %q: actions %.1fs; then exact: store %s, xDS %s, gates %s, all %s (from %s); node Lease guard held at most %.0f",
		name, res.ActionSeconds, secs(res.StoreSeconds), secs(res.XDSSeconds), secs(res.GatesSeconds), secs(res.AllSeconds),
		from.Format("15:04:05.000"), res.GuardHeldMax)
	p.phases = append(p.phases, res)
}

func secs(s float64) string {
	if s < 0 {
		return "never"
	}
	return fmt.Sprintf("%.1fs", s)
}

// expectedPod is what an eligible pod must look like in the store and over xDS.
type expectedPod struct {
	uid, ip, node string
}

// podState reads a pod: eligible, containers ready, on a lost node.
func (p *prod) podState(pod *corev1.Pod) (eligible, containersReady, onLostNode bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.ContainersReady && c.Status == corev1.ConditionTrue {
			containersReady = true
		}
	}
	onLostNode = p.isLost(pod.Spec.NodeName)
	eligible = pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "" && containersReady &&
		pod.DeletionTimestamp == nil && !onLostNode
	return eligible, containersReady, onLostNode
}

// exactness compares the store, the xDS clients, the gates and the refused registries'
// status with the API server's pods.
func (p *prod) exactness() exactness {
	var e exactness
	podsByNS := map[string]map[string]corev1.Pod{}
	for _, ns := range p.nss {
		pods, err := apiPods(p.ctx, ns)
		if err != nil {
			e.store = append(e.store, fmt.Sprintf("list pods of %s: %v", ns, err))
			return e
		}
		podsByNS[ns] = pods
	}
	final, err := readPrefix(p.ctx, p.store, prefix+"/")
	if err != nil {
		e.store = append(e.store, fmt.Sprintf("read the store: %v", err))
		return e
	}
	snaps := make([]adsSnapshot, len(p.clients))
	for i, c := range p.clients {
		snaps[i] = c.Snapshot()
		if !snaps[i].Connected {
			e.xds = append(e.xds, fmt.Sprintf("client %s not connected (%d redials, last error %v)", snaps[i].Node, snaps[i].Reconnects, snaps[i].LastErr))
		}
	}
	dirs := map[string]bool{}
	for _, r := range p.regs {
		dir := r.storeDir()
		dirs[dir] = true
		want := map[string]expectedPod{}
		draining := map[string]string{} // terminating pods: DRAINING over xDS at their IP, until gone
		for _, pod := range podsByNS[r.ns] {
			if pod.Labels["app"] != r.app {
				continue
			}
			if pod.DeletionTimestamp != nil && r.refusedBy == "" {
				draining[pod.Name] = pod.Status.PodIP
			}
			eligible, ready, onLost := p.podState(&pod)
			if eligible && r.refusedBy == "" {
				want[pod.Name] = expectedPod{uid: string(pod.UID), ip: pod.Status.PodIP, node: pod.Spec.NodeName}
			}
			if hasGate(&pod) {
				gate := gateStatus(&pod)
				switch {
				case r.refusedBy != "" && gate == corev1.ConditionTrue:
					e.gates = append(e.gates, fmt.Sprintf("%s/%s: gate True although its registry is refused", r.ns, pod.Name))
				case r.refusedBy != "" || onLost:
				case eligible && gate != corev1.ConditionTrue:
					e.gates = append(e.gates, fmt.Sprintf("%s/%s: eligible, gate %q", r.ns, pod.Name, gate))
				case !ready && gate == corev1.ConditionTrue:
					e.gates = append(e.gates, fmt.Sprintf("%s/%s: containers not ready, gate True", r.ns, pod.Name))
				}
			}
		}
		e.store = append(e.store, p.storeDiff(r, want, final)...)
		for _, s := range snaps {
			if s.Connected {
				e.xds = append(e.xds, xdsDiff(s, r, want, draining)...)
			}
		}
		if r.refusedBy != "" {
			e.status = append(e.status, p.refusalDiff(r)...)
		}
	}
	for key := range final {
		if _, ok := p.foreign[key]; ok || strings.HasPrefix(key, prefix+"/"+etcdstore.FenceDir+"/") {
			continue
		}
		if dir, ok := dirOf(prefix, key); !ok || !dirs[dir] {
			e.store = append(e.store, fmt.Sprintf("stray key %s", key))
		}
	}
	e.store, e.xds, e.gates = summarize(e.store), summarize(e.xds), summarize(e.gates)
	return e
}

type adsSnapshot = adsclient.Snapshot

// storeDiff is the registry's store mismatches.
func (p *prod) storeDiff(r *prodReg, want map[string]expectedPod, final map[string]string) []string {
	var v []string
	dir := r.storeDir()
	seen := map[string]bool{}
	for key, value := range final {
		if !strings.HasPrefix(key, dir) {
			continue
		}
		if _, ok := p.foreign[key]; ok {
			continue
		}
		name := key[len(dir):]
		seen[name] = true
		w, ok := want[name]
		if !ok {
			if r.refusedBy != "" {
				v = append(v, fmt.Sprintf("%s: key %s of a registry refused for %s's name", r.key(), key, r.refusedBy))
			} else {
				v = append(v, fmt.Sprintf("%s: extra key %s", r.key(), key))
			}
			continue
		}
		var ep store.Endpoint
		if err := json.Unmarshal([]byte(value), &ep); err != nil {
			v = append(v, fmt.Sprintf("%s: %s holds %q", r.key(), key, value))
			continue
		}
		if ep.UID != w.uid || ep.Address != w.ip || ep.Node != w.node || ep.Owner != string(r.reg.UID) {
			v = append(v, fmt.Sprintf("%s: %s holds uid %s address %s node %s owner %s, want %s %s %s %s", r.key(), key,
				ep.UID, ep.Address, ep.Node, ep.Owner, w.uid, w.ip, w.node, r.reg.UID))
		}
	}
	for name := range want {
		if !seen[name] {
			v = append(v, fmt.Sprintf("%s: missing %s", r.key(), name))
		}
	}
	return v
}

// xdsDiff is one client's mismatches for the registry: want are the pods it must hold
// HEALTHY, draining the terminating pods it may still hold DRAINING (at their IP).
func xdsDiff(s adsSnapshot, r *prodReg, want map[string]expectedPod, draining map[string]string) []string {
	var v []string
	got := s.State[r.xdsName()]
	seen := map[string]bool{}
	for _, ep := range got {
		w, ok := want[ep.Pod]
		switch {
		case !ok && ep.Health == "DRAINING" && draining[ep.Pod] == ep.Address && ep.Address != "":
		case !ok:
			v = append(v, fmt.Sprintf("client %s: %s has %s %s (%s), not an eligible pod", s.Node, r.xdsName(), ep.Pod, ep.Address, ep.Health))
		case ep.Health != "HEALTHY" || ep.Address != w.ip || seen[ep.Pod]:
			v = append(v, fmt.Sprintf("client %s: %s has %s at %s (%s), want once, HEALTHY at %s", s.Node, r.xdsName(), ep.Pod, ep.Address, ep.Health, w.ip))
		}
		seen[ep.Pod] = true
	}
	for name := range want {
		if !seen[name] {
			v = append(v, fmt.Sprintf("client %s: %s misses %s", s.Node, r.xdsName(), name))
		}
	}
	return v
}

// refusalDiff checks the refused registry's Ready condition.
func (p *prod) refusalDiff(r *prodReg) []string {
	reg := &v1beta1.ServiceRegistry{}
	if err := k8s.Get(p.ctx, client.ObjectKeyFromObject(r.reg), reg); err != nil {
		return []string{fmt.Sprintf("%s: read: %v", r.key(), err)}
	}
	c := meta.FindStatusCondition(reg.Status.Conditions, v1beta1.ConditionReady)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1beta1.ReasonServiceNameOwnedElsewhere || !strings.Contains(c.Message, r.refusedBy) {
		got := "none"
		if c != nil {
			got = fmt.Sprintf("%s/%s %q", c.Status, c.Reason, truncate(c.Message, 100))
		}
		return []string{fmt.Sprintf("%s claims %s's service name %q: Ready is %s, want False/%s naming %s",
			r.key(), r.refusedBy, r.service, got, v1beta1.ReasonServiceNameOwnedElsewhere, r.refusedBy)}
	}
	return nil
}

func gateStatus(pod *corev1.Pod) corev1.ConditionStatus {
	for _, c := range pod.Status.Conditions {
		if string(c.Type) == v1beta1.ReadinessGate {
			return c.Status
		}
	}
	return ""
}

// summarize keeps a mismatch list readable: the count and the first few.
func summarize(v []string) []string {
	const shown = 6
	if len(v) <= shown {
		return v
	}
	sort.Strings(v)
	return append(slices.Clone(v[:shown]), fmt.Sprintf("… %d mismatches in all", len(v)))
}

// dirOf is the {keyPrefix}/{service}/{namespace}/ of an endpoint key.
func dirOf(keyPrefix, key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, keyPrefix+"/")
	if !ok {
		return "", false
	}
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) != 3 {
		return "", false
	}
	return fmt.Sprintf("%s/%s/%s/", keyPrefix, parts[0], parts[1]), true
}

// readPrefix reads every key under p.
func readPrefix(ctx context.Context, cli *clientv3.Client, p string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, p, clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = string(kv.Value)
	}
	return out, nil
}

// window is invariant (a)'s deadline for a pod that became ineligible at (see
// scenario.window): grace after it, or after the operator's restart.
func (p *prod) window(at time.Time) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.faultEnd.After(at) {
		return p.faultEnd.Add(grace)
	}
	return at.Add(grace)
}

// ineligibleSince records that pod stopped being eligible at a given time (a lost node's
// pods: when its Lease lapses), unless it already had.
func (w *world) ineligibleSince(pod string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if p := w.pods[pod]; p != nil && p.ineligibleAt.IsZero() {
		p.ineligibleAt = at
	}
}

// verifyInvariants checks the fault recorder's invariants (invariants_test.go) over the
// whole record, with one set of checks per registry (its world, keys and owner): every
// event of a registry's keys is judged by that registry's checks; a key of no registry (a
// refused registry's included) or a foreign one touched is a violation.
func (p *prod) verifyInvariants() []string {
	finalRev, final, err := readAll(p.ctx, p.store, 0)
	if err != nil {
		return []string{fmt.Sprintf("read the final store: %v", err)}
	}
	deadline := time.Now().Add(30 * time.Second)
	for p.rec.seenThrough() < finalRev && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // polling with a deadline: the recorder's watch catching up
	}
	var all []*checks
	for _, r := range p.regs {
		if r.refusedBy != "" {
			continue
		}
		c := &checks{world: r.world, servicePrefix: r.storeDir(), ownedPrefix: prefix + "/" + etcdstore.FenceDir + "/",
			owner: string(r.reg.UID), window: p.window, service: r.service, ports: map[string]int32{"grpc": 8080}, namespace: r.ns}
		if r == p.big {
			c.foreign = p.foreign // checked once, by one registry's final check
		}
		all = append(all, c)
	}
	podsByNS := map[string]map[string]corev1.Pod{}
	for _, ns := range p.nss {
		if podsByNS[ns], err = apiPods(p.ctx, ns); err != nil {
			return []string{fmt.Sprintf("read the pods of %s: %v", ns, err)}
		}
	}
	return judgeRegistries(p.rec, finalRev, final, podsByNS, all, p.foreign, prefix, time.Now())
}

// judgeRegistries is checks.judge over several registries: the recorder's self-check once;
// each event of a registry's keys ({keyPrefix}/{service}/{namespace}/) judged by that
// registry's checks, every event of a foreign key or of a key of no registry (the fence
// directory aside) a violation; then each registry's windows and final state (pods: the API
// server's pods by namespace and name). The foreign keys' final values are checked by the
// registry whose checks carry them.
func judgeRegistries(rec *recorder, finalRev int64, final map[string]string, pods map[string]map[string]corev1.Pod,
	regs []*checks, foreign map[string]string, keyPrefix string, now time.Time) []string {
	byDir := map[string]*checks{}
	for _, c := range regs {
		byDir[c.servicePrefix] = c
	}
	v := rec.selfCheck(finalRev, final)
	byKey := map[*checks]map[string][]storeEvent{}
	for _, ev := range rec.snapshot() {
		if _, ok := foreign[ev.key]; ok {
			v = append(v, fmt.Sprintf("(c) foreign key %s touched (rev %d, %s)", ev.key, ev.rev, ev.when()))
			continue
		}
		if strings.HasPrefix(ev.key, keyPrefix+"/"+etcdstore.FenceDir+"/") {
			continue
		}
		dir, _ := dirOf(keyPrefix, ev.key)
		c := byDir[dir]
		if c == nil {
			v = append(v, fmt.Sprintf("(c) key %s outside every admitted registry's keys touched (rev %d)", ev.key, ev.rev))
			continue
		}
		if byKey[c] == nil {
			byKey[c] = map[string][]storeEvent{}
		}
		prev := byKey[c][ev.key]
		v = append(v, c.checkEvent(ev, prev, rec.initial)...)
		byKey[c][ev.key] = append(prev, ev)
	}
	for _, c := range regs {
		v = append(v, c.checkWindows(byKey[c], rec.initial, now)...)
		v = append(v, c.checkFinal(final, pods[c.namespace])...)
	}
	return v
}
