package main

import (
	"testing"
	"time"
)

func TestLeaderElectionFlags(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		wantErr bool
		want    [3]time.Duration
	}{
		{"defaults", []string{"--leader-elect"}, false, [3]time.Duration{15 * time.Second, 10 * time.Second, 2 * time.Second}},
		{"short", []string{"--leader-elect", "--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms"},
			false, [3]time.Duration{4 * time.Second, 3 * time.Second, 500 * time.Millisecond}},
		{"renew not under lease", []string{"--leader-elect", "--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=3s"}, true, [3]time.Duration{}},
		{"retry not under renew", []string{"--leader-elect", "--leader-elect-retry-period=10s"}, true, [3]time.Duration{}},
		{"zero retry", []string{"--leader-elect", "--leader-elect-retry-period=0s"}, true, [3]time.Duration{}},
		{"ignored without leader election", []string{"--leader-elect=false", "--leader-elect-retry-period=0s"}, false,
			[3]time.Duration{15 * time.Second, 10 * time.Second, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, _, err := parseFlags(tc.args)
			if (err != nil) != tc.wantErr {
				t.Fatalf("parseFlags(%v) error = %v, want error %v", tc.args, err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if got := [3]time.Duration{c.leaseDuration, c.renewDeadline, c.retryPeriod}; got != tc.want {
				t.Errorf("lease, renew, retry = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFenceName(t *testing.T) {
	if got := fenceName(config{fenceName: "a", leaderElectionNamespace: "b"}); got != "a" {
		t.Errorf("fenceName with --store-fence-name = %q, want a", got)
	}
	if got := fenceName(config{leaderElectionNamespace: "registrar-system"}); got != "registrar-system" {
		t.Errorf("fenceName with a leader election namespace = %q, want registrar-system", got)
	}
}
