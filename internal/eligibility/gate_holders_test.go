package eligibility

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

func TestGateHoldersAndWaits(t *testing.T) {
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	t0 := time.Unix(1000, 0)
	reg := func(name string, age int, mut ...func(*Claimant)) Claimant {
		c := Claimant{Name: name, UID: name, Created: t0.Add(-time.Duration(age) * time.Second), Selector: web, Service: name}
		for _, m := range mut {
			m(&c)
		}
		return c
	}
	warm := func(c *Claimant) { c.Warmup = true }
	deleting := func(c *Claimant) { c.Deleting = true }
	service := func(s string, stores ...string) func(*Claimant) {
		return func(c *Claimant) { c.Service, c.Stores = s, stores }
	}
	pod := labels.Set{"app": "web"}
	names := func(cs []Claimant) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Name)
		}
		return out
	}
	for _, tt := range []struct {
		name    string
		regs    []Claimant
		holders []string
		cur     string
		stored  map[string]bool
		waits   string
	}{
		{name: "none: release", regs: nil},
		{name: "deleting registry manages nothing", regs: []Claimant{reg("a", 1, deleting)}},
		{name: "invalid selector manages nothing", regs: []Claimant{reg("a", 1, func(c *Claimant) { c.Selector = nil })}},
		{name: "one, stored", regs: []Claimant{reg("a", 1)}, holders: []string{"a"}, stored: map[string]bool{"a": true}},
		{name: "plain stored, warm-up not done", regs: []Claimant{reg("plain", 2), reg("web", 1, warm)},
			holders: []string{"plain", "web"}, cur: v1beta1.GateWarmingUp, stored: map[string]bool{"plain": true, "web": true}, waits: "web"},
		{name: "warmed up, other store not yet", regs: []Claimant{reg("plain", 2), reg("web", 1, warm)},
			holders: []string{"plain", "web"}, cur: v1beta1.GateWarmedUp, stored: map[string]bool{"web": true}, waits: "plain"},
		{name: "warmed up, both stored", regs: []Claimant{reg("plain", 2), reg("web", 1, warm)},
			holders: []string{"plain", "web"}, cur: v1beta1.GateWarmedUp, stored: map[string]bool{"plain": true, "web": true}},
		{name: "same service and store: the younger yields", regs: []Claimant{reg("b", 1, service("s")), reg("a", 2, service("s"))},
			holders: []string{"a"}, stored: map[string]bool{"a": true}},
		{name: "same service, disjoint stores: both hold", regs: []Claimant{reg("b", 1, service("s", "x")), reg("a", 2, service("s", "y"))},
			holders: []string{"a", "b"}, stored: map[string]bool{"a": true}, waits: "b"},
		{name: "older being deleted does not make the younger yield", regs: []Claimant{reg("b", 1, service("s")), reg("a", 2, service("s"), deleting)},
			holders: []string{"b"}, stored: map[string]bool{"b": true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := GateHolders(pod, tt.regs)
			if got := names(h); len(got) != len(tt.holders) || (len(got) > 0 && fmtS(got) != fmtS(tt.holders)) {
				t.Fatalf("holders %v, want %v", got, tt.holders)
			}
			waits := GateWaitsFor(GateWant{Status: "True"}, tt.cur, h, func(uid string) bool { return tt.stored[uid] })
			if waits != tt.waits {
				t.Errorf("waits for %q, want %q", waits, tt.waits)
			}
			_, release := ReleaseAt(true, false, false, len(h), t0)
			if release != (len(tt.holders) == 0) {
				t.Errorf("release %v with %d holders", release, len(h))
			}
		})
	}
}

func fmtS(ss []string) string {
	out := ""
	for _, s := range ss {
		out += s + ","
	}
	return out
}

func TestReleaseAt(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, tt := range []struct {
		name                           string
		hasGate, gateTrue, terminating bool
		holders                        int
		want                           bool
	}{
		{name: "unmanaged, gate False", hasGate: true, want: true},
		{name: "no gate", hasGate: false},
		{name: "already True", hasGate: true, gateTrue: true},
		{name: "terminating", hasGate: true, terminating: true},
		{name: "managed", hasGate: true, holders: 1},
	} {
		at, ok := ReleaseAt(tt.hasGate, tt.gateTrue, tt.terminating, tt.holders, t0)
		if ok != tt.want || (ok && !at.Equal(t0.Add(ReleaseGrace))) {
			t.Errorf("%s: ReleaseAt = %v, %v", tt.name, at, ok)
		}
	}
}
