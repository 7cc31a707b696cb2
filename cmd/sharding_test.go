package main

import (
	"os"
	"strings"
	"testing"
)

func TestShardingFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
		check   func(t *testing.T, c config)
	}{
		{name: "default is leader election", args: []string{"--leader-elect=true"}, check: func(t *testing.T, c config) {
			if c.sharding.enabled() || !c.leaderElect {
				t.Errorf("sharding %v, leader election %v", c.sharding.enabled(), c.leaderElect)
			}
		}},
		{name: "lease replaces leader election", args: []string{"--leader-elect=true", "--sharding=lease", "--shard-id=r-0"}, check: func(t *testing.T, c config) {
			if !c.sharding.enabled() || c.leaderElect || c.sharding.id != "r-0" || c.sharding.count != 32 {
				t.Errorf("sharding %v, leader election %v, id %q, count %d", c.sharding.enabled(), c.leaderElect, c.sharding.id, c.sharding.count)
			}
		}},
		{name: "id defaults to the host name", args: []string{"--sharding=lease"}, check: func(t *testing.T, c config) {
			if c.sharding.id == "" {
				t.Error("no shard id")
			}
		}},
		{name: "unknown mode", args: []string{"--sharding=ring"}, wantErr: "want none or lease"},
		{name: "renew too slow", args: []string{"--sharding=lease", "--shard-lease-duration=3s", "--shard-renew-period=2s"}, wantErr: "--shard-renew-period"},
		{name: "no shards", args: []string{"--sharding=lease", "--shard-count=0"}, wantErr: "--shard-count"},
		{name: "lease backstop refused", args: []string{"--sharding=lease", "--store-lease-ttl=30s"}, wantErr: "--store-lease-ttl"},
		// Every replica that serves callers serves every registry (DESIGN.md): a sharded
		// replica's xDS server would serve its own shards only, and freeze those handed away.
		{name: "xDS refused", args: []string{"--sharding=lease", "--shard-id=r-0", "--xds-bind-address=:18000"},
			wantErr: "--sharding=lease cannot be combined with --xds-bind-address"},
		{name: "xDS without sharding", args: []string{"--leader-elect=true", "--xds-bind-address=127.0.0.1:18000"}, check: func(t *testing.T, c config) {
			if c.xds.bindAddress != "127.0.0.1:18000" || !c.leaderElect {
				t.Errorf("xds %q, leader election %v", c.xds.bindAddress, c.leaderElect)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, err := parseFlags(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

// TestSelfMonitoringKeysPerReplica: the heartbeat and canary keys carry this cluster and
// replica (--shard-id with sharding), and only a lone leader of an unshared prefix also
// writes the single leader's heartbeat key.
func TestSelfMonitoringKeysPerReplica(t *testing.T) {
	for _, tc := range []struct {
		name        string
		args        []string
		cluster     string
		wantReplica string // "" : the host name
		wantLegacy  bool
	}{
		{name: "leader election", args: []string{"--leader-elect=true"}, cluster: "c1", wantLegacy: true},
		{name: "sharding", args: []string{"--sharding=lease", "--shard-id=r-1"}, cluster: "c1", wantReplica: "r-1"},
		{name: "shared store", args: []string{"--leader-elect=true", "--store-shared", "--cluster-id=east", "--store-lease-ttl=60s"}, cluster: "east"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, err := parseFlags(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			c.clusterName = tc.cluster // resolved at start
			got := selfMonIdentityOf(c)
			want := tc.wantReplica
			if want == "" {
				want, _ = os.Hostname()
			}
			if got.cluster != tc.cluster || got.replica != want || got.legacy != tc.wantLegacy {
				t.Errorf("identity %+v, want cluster %q replica %q legacy %v", got, tc.cluster, want, tc.wantLegacy)
			}
		})
	}
}
