package tenancy

import (
	"strings"
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	reg := func(ns, name string, age time.Duration, share ...string) Claim {
		return Claim{Namespace: ns, Name: name, Created: t0.Add(-age), SharedWith: share}
	}
	deleting := func(c Claim) Claim { c.Deleting = true; return c }
	a := reg("ns-a", "a", 2*time.Hour)
	b := reg("ns-b", "b", time.Hour)
	for _, tc := range []struct {
		name     string
		mode     Mode
		self     Claim
		claims   []Claim
		admitted bool
		owner    string
		shared   bool
	}{
		{name: "alone", mode: ModeNamespace, self: b, claims: []Claim{b}, admitted: true, owner: "ns-b/b"},
		{name: "alone, not listed yet", mode: ModeNamespace, self: b, admitted: true, owner: "ns-b/b"},
		{name: "the oldest owns", mode: ModeNamespace, self: a, claims: []Claim{b, a}, admitted: true, owner: "ns-a/a"},
		{name: "a younger registry of another namespace is refused", mode: ModeNamespace, self: b, claims: []Claim{a, b}, owner: "ns-a/a"},
		{name: "refused also when not listed yet", mode: ModeNamespace, self: b, claims: []Claim{a}, owner: "ns-a/a"},
		{name: "a younger registry of the owning namespace is admitted", mode: ModeNamespace,
			self: reg("ns-a", "a2", 0), claims: []Claim{a, b, reg("ns-a", "a2", 0)}, admitted: true, owner: "ns-a/a"},
		{name: "shared by name", mode: ModeNamespace, self: b, claims: []Claim{reg("ns-a", "a", 2*time.Hour, "ns-c", "ns-b"), b},
			admitted: true, owner: "ns-a/a", shared: true},
		{name: "shared with every namespace", mode: ModeNamespace, self: b, claims: []Claim{reg("ns-a", "a", 2*time.Hour, "*"), b},
			admitted: true, owner: "ns-a/a", shared: true},
		{name: "shared with another namespace only", mode: ModeNamespace, self: b, claims: []Claim{reg("ns-a", "a", 2*time.Hour, "ns-c"), b},
			owner: "ns-a/a"},
		{name: "shared by a younger registry of the owning namespace", mode: ModeNamespace, self: b,
			claims: []Claim{a, b, reg("ns-a", "a2", 0, "ns-b")}, admitted: true, owner: "ns-a/a", shared: true},
		{name: "a share by a non-owning namespace counts for nothing", mode: ModeNamespace, self: reg("ns-c", "c", 0),
			claims: []Claim{a, reg("ns-b", "b", time.Hour, "ns-c"), reg("ns-c", "c", 0)}, owner: "ns-a/a"},
		{name: "the owner being deleted owns nothing", mode: ModeNamespace, self: b, claims: []Claim{deleting(a), b},
			admitted: true, owner: "ns-b/b"},
		{name: "next oldest owns after the owner", mode: ModeNamespace, self: reg("ns-c", "c", 0),
			claims: []Claim{deleting(a), b, reg("ns-c", "c", 0)}, owner: "ns-b/b"},
		{name: "same second: namespace breaks the tie", mode: ModeNamespace, self: reg("ns-b", "x", 0),
			claims: []Claim{reg("ns-b", "x", 0), reg("ns-a", "z", 0)}, owner: "ns-a/z"},
		{name: "same second, same namespace: name breaks the tie", mode: ModeNamespace, self: reg("ns-a", "y", 0),
			claims: []Claim{reg("ns-a", "y", 0), reg("ns-a", "x", 0)}, admitted: true, owner: "ns-a/x"},
		{name: "self's newest view wins over the listed one", mode: ModeNamespace, self: reg("ns-a", "a", 2*time.Hour),
			claims: []Claim{deleting(a), b}, admitted: true, owner: "ns-a/a"},
		{name: "shared mode admits everyone", mode: ModeShared, self: b, claims: []Claim{a, b}, admitted: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.mode, tc.self, tc.claims)
			if d.Admitted != tc.admitted || d.Shared != tc.shared {
				t.Fatalf("admitted, shared = %v, %v; want %v, %v", d.Admitted, d.Shared, tc.admitted, tc.shared)
			}
			if tc.owner != "" && d.Owner.Ref() != tc.owner {
				t.Fatalf("owner = %s, want %s", d.Owner.Ref(), tc.owner)
			}
		})
	}
}

func TestDecideIgnoresOrder(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	claims := []Claim{
		{Namespace: "ns-c", Name: "c", Created: t0},
		{Namespace: "ns-b", Name: "b", Created: t0},
		{Namespace: "ns-a", Name: "b", Created: t0},
		{Namespace: "ns-a", Name: "a", Created: t0.Add(time.Second)},
	}
	for i := range claims {
		rotated := append(append([]Claim(nil), claims[i:]...), claims[:i]...)
		if got := Decide(ModeNamespace, claims[1], rotated).Owner.Ref(); got != "ns-a/b" {
			t.Fatalf("rotation %d: owner %s, want ns-a/b", i, got)
		}
	}
}

func TestParseMode(t *testing.T) {
	for _, ok := range []string{"namespace", "shared"} {
		if m, err := ParseMode(ok); err != nil || string(m) != ok {
			t.Fatalf("ParseMode(%q) = %q, %v", ok, m, err)
		}
	}
	if _, err := ParseMode("cluster"); err == nil || !strings.Contains(err.Error(), "--service-name-tenancy") {
		t.Fatalf("ParseMode(cluster) error = %v", err)
	}
}

func TestRefusalMessageNamesOwnerAndShare(t *testing.T) {
	d := Decision{Owner: Claim{Namespace: "ns-a", Name: "a"}}
	msg := RefusalMessage("orders", d, "ns-b")
	for _, want := range []string{`"orders"`, "ns-a/a", "spec.sharing.namespaces", `"ns-b"`} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %s", msg, want)
		}
	}
}
