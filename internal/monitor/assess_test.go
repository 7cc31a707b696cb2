package monitor

import (
	"errors"
	"strings"
	"testing"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

func up(name string, leader, term uint64) MemberStatus {
	return MemberStatus{Name: name, Leader: leader, Term: term, DBSize: 1 << 20, DBQuota: 1 << 30}
}

func down(name string) MemberStatus {
	return MemberStatus{Name: name, Err: errors.New("deadline exceeded")}
}

func TestAssess(t *testing.T) {
	full := func(size int64) MemberStatus { m := up("m0", 1, 2); m.DBSize = size; return m }
	for _, tc := range []struct {
		name      string
		o         Observation
		ok        bool
		reason    string
		tolerance int
		inMessage string
	}{
		{"three healthy", Observation{Members: []MemberStatus{up("m0", 1, 2), up("m1", 1, 2), up("m2", 1, 2)}}, true, v1beta1.ReasonStoreHealthy, 1, "3 of 3"},
		{"single member", Observation{Members: []MemberStatus{up("m0", 1, 2)}}, true, v1beta1.ReasonStoreHealthy, 0, "1 of 1"},
		{"one of three down", Observation{Members: []MemberStatus{down("m0"), up("m1", 2, 3), up("m2", 2, 3)}}, false, v1beta1.ReasonQuorumAtRisk, 0, "not answering: m0"},
		{"two of three down", Observation{Members: []MemberStatus{down("m0"), down("m1"), up("m2", 0, 3)}}, false, v1beta1.ReasonQuorumLost, -1, "quorum needs 2"},
		{"no leader", Observation{Members: []MemberStatus{up("m0", 0, 4), up("m1", 0, 4), up("m2", 0, 4)}}, false, v1beta1.ReasonNoLeader, 1, "term 4"},
		{"unreachable", Observation{ListErr: errors.New("context deadline exceeded")}, false, v1beta1.ReasonStoreUnreachable, 0, "cannot list"},
		{"alarm", Observation{Members: []MemberStatus{up("m0", 1, 2)}, Alarms: map[string]int{"NOSPACE": 1}}, false, v1beta1.ReasonStoreAlarm, 0, "NOSPACE"},
		{"cleared alarm", Observation{Members: []MemberStatus{up("m0", 1, 2)}, Alarms: map[string]int{"NOSPACE": 0}}, true, v1beta1.ReasonStoreHealthy, 0, ""},
		{"canary failed once", Observation{Members: []MemberStatus{up("m0", 1, 2)}, Canary: &CanaryState{ConsecutiveFailures: 1, LastErr: errors.New("x")}}, true, v1beta1.ReasonStoreHealthy, 0, ""},
		{"canary failing", Observation{Members: []MemberStatus{up("m0", 1, 2)}, Canary: &CanaryState{ConsecutiveFailures: 2, LastErr: errors.New("not visible")}}, false, v1beta1.ReasonCanaryFailing, 0, "not visible"},
		{"near quota", Observation{Members: []MemberStatus{full(1 << 30 * 96 / 100)}}, false, v1beta1.ReasonDatabaseNearQuota, 0, "96%"},
		{"below near quota", Observation{Members: []MemberStatus{full(1 << 30 * 80 / 100)}}, true, v1beta1.ReasonStoreHealthy, 0, "80%"},
		{"quota unreported: etcd's default", Observation{Members: []MemberStatus{{Name: "m0", Leader: 1, Term: 1, DBSize: 1 << 20}}}, true, v1beta1.ReasonStoreHealthy, 0, ""},
		{"quorum lost beats canary", Observation{Members: []MemberStatus{down("m0"), down("m1"), up("m2", 0, 3)}, Canary: &CanaryState{ConsecutiveFailures: 5}}, false, v1beta1.ReasonQuorumLost, -1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := Assess("etcd", tc.o)
			if h.OK != tc.ok || h.Reason != tc.reason {
				t.Fatalf("Assess = OK %v reason %s (%s), want OK %v reason %s", h.OK, h.Reason, h.Message, tc.ok, tc.reason)
			}
			if tc.o.ListErr == nil && h.Tolerance != tc.tolerance {
				t.Errorf("tolerance = %d, want %d", h.Tolerance, tc.tolerance)
			}
			if !strings.Contains(h.Message, tc.inMessage) || !strings.Contains(h.Message, "store etcd") {
				t.Errorf("message %q lacks %q or the store's name", h.Message, tc.inMessage)
			}
		})
	}
}

func TestSummarise(t *testing.T) {
	ok := Assess("etcd", Observation{Members: []MemberStatus{up("m0", 1, 1)}})
	bad := Assess("coredns", Observation{ListErr: errors.New("refused")})
	if v := Summarise(nil); v.Known {
		t.Errorf("no store: %+v, want unknown", v)
	}
	if v := Summarise([]Health{ok, {Store: "x"}}); v.Known {
		t.Errorf("one store not probed yet: %+v, want unknown", v)
	}
	if v := Summarise([]Health{ok}); !v.Known || !v.OK || v.Reason != v1beta1.ReasonStoreHealthy {
		t.Errorf("healthy: %+v", v)
	}
	v := Summarise([]Health{ok, bad})
	if !v.Known || v.OK || v.Reason != v1beta1.ReasonStoreUnreachable || !strings.Contains(v.Message, "store coredns") || strings.Contains(v.Message, "store etcd") {
		t.Errorf("one unhealthy: %+v", v)
	}
}
