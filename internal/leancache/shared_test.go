package leancache

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
)

// decoded returns SamplePod(i) as an informer has it: decoded from the wire, its own copy
// of every map, slice and string.
func decoded(t *testing.T, i int, mutate func(*corev1.Pod)) *corev1.Pod {
	t.Helper()
	p := SamplePod(i)
	if mutate != nil {
		mutate(p)
	}
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var out corev1.Pod
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

func sameMap(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func TestPodsShareWhatTheyRepeat(t *testing.T) {
	a, b := Pod(decoded(t, 1, nil)), Pod(decoded(t, 2, nil))
	if !sameMap(a.Labels, b.Labels) || !sameMap(a.Annotations, b.Annotations) {
		t.Error("two replicas' equal labels or annotations are two maps, want one")
	}
	if &a.Spec.Containers[0] != &b.Spec.Containers[0] || &a.Spec.InitContainers[0] != &b.Spec.InitContainers[0] {
		t.Error("two replicas' equal containers are two slices, want one")
	}
	if unsafe.StringData(a.Namespace) != unsafe.StringData(b.Namespace) {
		t.Error("two pods' namespace is two strings, want one")
	}
	if a.Status.Phase != corev1.PodRunning || unsafe.StringData(string(a.Status.Phase)) != unsafe.StringData(string(corev1.PodRunning)) {
		t.Error("the phase is a decoded copy, want the constant")
	}

	other := Pod(decoded(t, 3, func(p *corev1.Pod) {
		p.Labels["pod-template-hash"] = "other"
		p.Spec.Containers[0].Ports[0].ContainerPort = 8081
	}))
	if sameMap(a.Labels, other.Labels) || other.Labels["pod-template-hash"] != "other" {
		t.Errorf("different labels share a map: %v", other.Labels)
	}
	if &a.Spec.Containers[0] == &other.Spec.Containers[0] || other.Spec.Containers[0].Ports[0].ContainerPort != 8081 {
		t.Errorf("different ports share a slice: %v", other.Spec.Containers)
	}
	if !sameMap(a.Annotations, other.Annotations) {
		t.Error("equal annotations of a pod with other labels are two maps, want one")
	}
}

// TestSharedIsExact: a map is shared with another exactly when they are equal, whatever
// the strings (keys and values that run into each other, empty values).
func TestSharedIsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"", "a", "b", "ab", "ba", "1:a", "a:1", "0:", "aa"}
	var seen []map[string]string
	for range 3000 {
		m := map[string]string{}
		for range rng.IntN(4) + 1 {
			m[words[rng.IntN(len(words))]] = words[rng.IntN(len(words))]
		}
		got := sharedMap(maps.Clone(m))
		if !maps.Equal(got, m) {
			t.Fatalf("sharedMap(%v) = %v", m, got)
		}
		seen = append(seen, got)
	}
	for i := range 300 {
		for j := range 300 {
			if eq, same := maps.Equal(seen[i], seen[j]), sameMap(seen[i], seen[j]); eq != same {
				t.Fatalf("%v and %v: equal %v, shared %v", seen[i], seen[j], eq, same)
			}
		}
	}

	always := corev1.ContainerRestartPolicyAlways
	lists := [][]corev1.Container{
		{{Name: "a", Ports: []corev1.ContainerPort{{Name: "b", ContainerPort: 1}}}},
		{{Name: "ab", Ports: []corev1.ContainerPort{{Name: "", ContainerPort: 1}}}},
		{{Name: "a", Ports: []corev1.ContainerPort{{Name: "b", ContainerPort: 11}}}},
		{{Name: "a", Ports: []corev1.ContainerPort{{Name: "b1", ContainerPort: 1}}}},
		{{Name: "a", RestartPolicy: &always, Ports: []corev1.ContainerPort{{Name: "b", ContainerPort: 1}}}},
		{{Name: "a", Ports: []corev1.ContainerPort{{Name: "b", ContainerPort: 1}}}, {Name: "c", Ports: []corev1.ContainerPort{{Name: "d", ContainerPort: 2}}}},
		{{Name: "a", Ports: []corev1.ContainerPort{{Name: "b", ContainerPort: 1}, {Name: "d", ContainerPort: 2}}}},
	}
	var kept [][]corev1.Container
	for _, l := range lists {
		kept = append(kept, sharedContainerList(slices.Clone(l)))
	}
	for i := range lists {
		if again := sharedContainerList(slices.Clone(lists[i])); &again[0] != &kept[i][0] {
			t.Errorf("%v seen twice is two slices", lists[i])
		}
		for j := range i {
			if &kept[i][0] == &kept[j][0] {
				t.Errorf("%v and %v share a slice", lists[i], lists[j])
			}
		}
	}
}

// TestSharedIsBounded: values that never repeat cost at most two generations of the table,
// and a value still in use moves to the current generation.
func TestSharedIsBounded(t *testing.T) {
	var tb table[int]
	hot := []byte("hot")
	tb.get(hot, 1)
	for i := range 5 * maxShared {
		tb.get(fmt.Appendf(nil, "pod-%d", i), i)
		if i%(maxShared/2) == 0 {
			if got := tb.get(hot, 2); got != 1 {
				t.Fatalf("the value in use was dropped: got %d", got)
			}
		}
	}
	if n := len(tb.cur) + len(tb.prev); n > 2*maxShared {
		t.Errorf("%d entries held, want at most %d", n, 2*maxShared)
	}
}

func TestSharedConcurrently(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				m := map[string]string{"app": fmt.Sprint(i % 50), "g": fmt.Sprint(g % 2)}
				if got := sharedMap(m); !maps.Equal(got, m) {
					t.Errorf("sharedMap(%v) = %v", m, got)
					return
				}
			}
		})
	}
	wg.Wait()
}
