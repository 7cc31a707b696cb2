package eligibility

import (
	"testing"
	"time"
)

func TestRenewalRevives(t *testing.T) {
	t0 := time.Unix(10_000, 0)
	const maxAge, margin = 20 * time.Second, 2 * time.Second
	lease := func(renew time.Time, observed ...time.Time) NodeLease {
		l := NodeLease{RenewTime: renew, DurationSecs: 40}
		if len(observed) > 0 {
			l.ObservedAt = observed[0]
		}
		return l
	}
	for _, tt := range []struct {
		name     string
		old, cur NodeLease
		now      time.Time
		want     bool
	}{
		{name: "routine renewal of a healthy node", old: lease(t0), cur: lease(t0.Add(10 * time.Second)), now: t0.Add(10 * time.Second)},
		{name: "renewal after the lapse", old: lease(t0), cur: lease(t0.Add(25 * time.Second)), now: t0.Add(25 * time.Second), want: true},
		{name: "renewal stamped just before the deadline, seen after it", old: lease(t0), cur: lease(t0.Add(19900 * time.Millisecond)),
			now: t0.Add(20100 * time.Millisecond), want: true},
		{name: "renewal seen just before the deadline", old: lease(t0), cur: lease(t0.Add(19 * time.Second)), now: t0.Add(19 * time.Second), want: true},
		{name: "kubelet 30 s behind, renewal seen after a lapse", old: lease(t0.Add(-30 * time.Second)),
			cur: lease(t0.Add(-29 * time.Second)), now: t0, want: true},
		{name: "kubelet 30 s behind, renewing, last renewal seen 1 s ago", old: lease(t0.Add(-31*time.Second), t0.Add(-time.Second)),
			cur: lease(t0.Add(-30 * time.Second)), now: t0},
		{name: "no change", old: lease(t0), cur: lease(t0), now: t0.Add(time.Minute)},
	} {
		if got := RenewalRevives(tt.old, tt.cur, tt.now, maxAge, margin); got != tt.want {
			t.Errorf("%s: RenewalRevives = %v, want %v", tt.name, got, tt.want)
		}
	}
	// the operator's observation replaces the kubelet's stamp
	if exp, _ := LeaseExpiry(lease(t0.Add(-30*time.Second), t0), maxAge); !exp.Equal(t0.Add(maxAge)) {
		t.Errorf("expiry %v, want observed + 20 s", exp)
	}
}
