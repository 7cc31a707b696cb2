package faults

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/registrar-dev/registrar/internal/store"
)

// TestJudgeRegistries: the scenario's judge over several registries (no store, no API
// server) sends each event to its registry's checks and flags what belongs to none.
func TestJudgeRegistries(t *testing.T) {
	value := func(service, ns, pod, owner string) string {
		b, _ := json.Marshal(store.Endpoint{Service: service, Namespace: ns, Pod: pod, UID: "uid-" + pod, Address: "10.0.0.1",
			Ports: map[string]int32{"grpc": 8080}, Owner: owner})
		return string(b)
	}
	reg := func(service, ns, owner string, w *world) *checks {
		return &checks{world: w, servicePrefix: "/r/" + service + "/" + ns + "/", ownedPrefix: "/r/.registrar/", owner: owner,
			service: service, ports: map[string]int32{"grpc": 8080}, namespace: ns,
			window: func(t time.Time) time.Time { return t.Add(15 * time.Second) }}
	}
	wa := newWorld()
	wa.pods["a-1"] = &podLife{uid: "uid-a-1", eligibleAt: at(time.Second)}
	wb := newWorld()
	wb.pods["b-1"] = &podLife{uid: "uid-b-1", eligibleAt: at(time.Second), ineligibleAt: at(5 * time.Second)}
	a, b := reg("a", "ns1", "owner-a", wa), reg("b", "ns2", "owner-b", wb)
	foreign := map[string]string{"/r/a/ns1/foreign": "theirs"}
	a.foreign = foreign

	rec := newRecorder(10, map[string]string{"/r/a/ns1/foreign": "theirs"}, t0)
	rec.watching(10, t0)
	rec.deliver(at(2*time.Second), []rawEvent{
		{put: true, key: "/r/a/ns1/a-1", value: value("a", "ns1", "a-1", "owner-a"), rev: 11},
		{put: true, key: "/r/b/ns2/b-1", value: value("b", "ns2", "b-1", "owner-b"), rev: 12},
		{put: true, key: "/r/.registrar/fence/x", value: "holder", rev: 13},
	})
	rec.deliver(at(5100*time.Millisecond), []rawEvent{{key: "/r/b/ns2/b-1", rev: 14}})
	rec.deliver(at(6*time.Second), []rawEvent{
		{put: true, key: "/r/b/ns2/b-1", value: value("b", "ns2", "b-1", "owner-b"), rev: 15}, // resurrected
		{put: true, key: "/r/a/ns3/c-1", value: value("a", "ns3", "c-1", "owner-c"), rev: 16}, // a refused registry's key
	})
	final := map[string]string{
		"/r/a/ns1/foreign":      "theirs",
		"/r/a/ns1/a-1":          value("a", "ns1", "a-1", "owner-a"),
		"/r/b/ns2/b-1":          value("b", "ns2", "b-1", "owner-b"),
		"/r/.registrar/fence/x": "holder",
		"/r/a/ns3/c-1":          value("a", "ns3", "c-1", "owner-c"),
	}
	pod := func(ns, name string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)},
			Status: corev1.PodStatus{PodIP: "10.0.0.1"}}
	}
	pods := map[string]map[string]corev1.Pod{"ns1": {"a-1": pod("ns1", "a-1")}, "ns2": {"b-1": pod("ns2", "b-1")}}

	v := judgeRegistries(rec, 16, final, pods, []*checks{a, b}, foreign, "/r", at(30*time.Second))
	joined := strings.Join(v, "\n")
	for _, want := range []string{"/r/b/ns2/b-1 re-created", "(c) key /r/a/ns3/c-1 outside every admitted registry's keys", "(b) store holds [b-1], eligible pods are []"} {
		if !strings.Contains(joined, want) {
			t.Errorf("violations do not say %q:\n%s", want, joined)
		}
	}
	for _, line := range v {
		if strings.Contains(line, "/r/a/ns1/") || strings.Contains(line, "[a-1]") || strings.Contains(line, ".registrar") {
			t.Errorf("a violation for registry a's clean history or the fence: %s", line)
		}
	}
}
