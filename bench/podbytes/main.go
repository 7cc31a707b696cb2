// Command podbytes measures what one cached pod costs the operator's memory (issue 16,
// item 2): it decodes N realistic pods (internal/leancache.SamplePod, through JSON as an
// informer decodes them, so that no string is shared between pods) and measures the live
// heap holding them as the cache would hold them — whole, with managedFields stripped (the
// operator before the lean cache), and trimmed by leancache.Pod (the operator now) — plus
// the JSON and protobuf sizes of one pod. It writes the measurement JSON (docs/bench
// envelope) that bench/benchdoc renders into docs/performance.md.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/registrar-dev/registrar/bench/benchfmt"
	"github.com/registrar-dev/registrar/internal/leancache"
	"github.com/registrar-dev/registrar/internal/selindex"
)

type variant struct {
	name string
	keep func(*corev1.Pod) *corev1.Pod
}

type run struct {
	Variant      string  `json:"variant"`
	Pods         int     `json:"pods"`
	HeapBytes    uint64  `json:"heap_bytes"`
	BytesPerPod  float64 `json:"bytes_per_pod"`
	JSONBytes    int     `json:"json_bytes_per_pod"`
	ProtoBytes   int     `json:"proto_bytes_per_pod"`
	MiBPer20kPod float64 `json:"mib_per_20k_pods"`
}

func main() {
	n := flag.Int("pods", 5000, "Pods to decode and hold.")
	out := flag.String("out", "", "Write the measurement JSON here (else only print).")
	command := flag.String("command", "make bench-cache", "The command recorded in the JSON.")
	flag.Parse()

	variants := []variant{
		{"whole pod (as decoded)", func(p *corev1.Pod) *corev1.Pod { return p }},
		{"managedFields stripped (before)", func(p *corev1.Pod) *corev1.Pod { p.ManagedFields = nil; return p }},
		{"leancache.Pod (now)", leancache.Pod},
		// A StatefulSet's pods: a label of each pod's own, so no two share their labels.
		{"leancache.Pod, labels of its own", func(p *corev1.Pod) *corev1.Pod {
			p.Labels["statefulset.kubernetes.io/pod-name"] = p.Name
			return leancache.Pod(p)
		}},
	}
	raw := make([][]byte, *n)
	for i := range raw {
		b, err := json.Marshal(leancache.SamplePod(i))
		if err != nil {
			fail(err)
		}
		raw[i] = b
	}
	machine := benchfmt.MachineFacts()
	machine.LoadBefore = benchfmt.LoadAvg()
	runs := make([]run, 0, len(variants)+1)
	for _, v := range variants {
		heap, one := measure(raw, v.keep)
		j, err := json.Marshal(one)
		if err != nil {
			fail(err)
		}
		pb, err := one.Marshal()
		if err != nil {
			fail(err)
		}
		per := float64(heap) / float64(*n)
		runs = append(runs, run{Variant: v.name, Pods: *n, HeapBytes: heap, BytesPerPod: per,
			JSONBytes: len(j), ProtoBytes: len(pb), MiBPer20kPod: per * 20000 / (1 << 20)})
	}
	idx := indexHeap(raw)
	runs = append(runs, run{Variant: "selector index entry (added)", Pods: *n, HeapBytes: idx,
		BytesPerPod: float64(idx) / float64(*n), MiBPer20kPod: float64(idx) / float64(*n) * 20000 / (1 << 20)})
	machine.LoadAfter = benchfmt.LoadAvg()

	rows := make([][]string, len(runs))
	for i, r := range runs {
		rows[i] = []string{r.Variant, fmt.Sprintf("%.0f", r.BytesPerPod), fmt.Sprintf("%.1f", r.MiBPer20kPod),
			dash(r.JSONBytes), dash(r.ProtoBytes)}
		fmt.Printf("%-34s %8.0f B/pod  %6.1f MiB per 20k pods  json %6d B  proto %6d B\n",
			r.Variant, r.BytesPerPod, r.MiBPer20kPod, r.JSONBytes, r.ProtoBytes)
	}
	if *out == "" {
		return
	}
	doc := map[string]any{
		"kind": "cache-bytes", "date": time.Now().UTC().Format(time.RFC3339), "commit": commit(), "command": *command,
		"machine": machine, "runs": runs,
		"tables": []map[string]any{{
			"id": "cache-bytes-per-pod", "title": "Heap per cached pod",
			"columns": []string{"cached as", "heap bytes per pod", "MiB per 20,000 pods", "JSON bytes", "protobuf bytes"},
			"rows":    rows,
			"notes": []string{
				fmt.Sprintf("%d pods of a realistic Deployment (leancache.SamplePod: managedFields of 3 managers, 10 env vars, 3 volumes, "+
					"probes, a native sidecar, container statuses), decoded from JSON one by one and held; live heap after GC, divided by the pods. "+
					"leancache.Pod keeps one copy of what the replicas repeat (labels, named ports, namespace, node, "+
					"registrar's annotations): the figure is for pods of one ReplicaSet.", *n),
				"Heap figures do not depend on the machine's load; the informer's own per-object overhead (store index entries, the key) is not included.",
				"selector index entry: what internal/selindex adds per pod (5 labels, one registry per 10 pods; " +
					"the labels map is the cache's, shared), on top of the cached pod.",
			},
		}},
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		fail(err)
	}
	if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
		fail(err)
	}
}

// measure decodes every pod, keeps what keep returns, and returns the live heap the kept
// pods hold, and one kept pod.
func measure(raw [][]byte, keep func(*corev1.Pod) *corev1.Pod) (uint64, *corev1.Pod) {
	before := liveHeap()
	held := make([]*corev1.Pod, len(raw))
	for i, b := range raw {
		p := &corev1.Pod{}
		if err := json.Unmarshal(b, p); err != nil {
			fail(err)
		}
		held[i] = keep(p)
	}
	after := liveHeap()
	one := held[0]
	runtime.KeepAlive(held)
	// The slice of pointers is the measurement's, not the cache's.
	return after - before - uint64(8*len(held)), one
}

// indexHeap is the live heap the selector index adds for the pods (their labels are the
// cache's, shared; the index holds the names, its sets and one registry per 10 pods).
func indexHeap(raw [][]byte) uint64 {
	pods := make([]*corev1.Pod, len(raw))
	for i, b := range raw {
		pods[i] = &corev1.Pod{}
		if err := json.Unmarshal(b, pods[i]); err != nil {
			fail(err)
		}
		pods[i] = leancache.Pod(pods[i])
		pods[i].Labels["app"] = fmt.Sprintf("svc-%d", i/10) // one registry per 10 pods
	}
	before := liveHeap()
	x := selindex.New()
	for i := 0; i < len(pods); i += 10 {
		x.SetRegistry("shop", fmt.Sprintf("svc-%d", i/10), &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("svc-%d", i/10)}})
	}
	for _, p := range pods {
		x.SetPod(p.Namespace, p.Name, p.Labels)
	}
	after := liveHeap()
	runtime.KeepAlive(x)
	runtime.KeepAlive(pods)
	return after - before
}

func dash(n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "podbytes:", err)
	os.Exit(1)
}
