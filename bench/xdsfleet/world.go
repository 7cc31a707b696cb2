package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/registrar-dev/registrar/internal/xds"
)

const (
	port       = 8080
	zone       = "z1"
	namespaces = 20
)

// world is the benchmark's registry: services × endpoints per service, each endpoint slot
// holding either its base address (172.16.0.0/12) or the address of the last change that
// replaced it (10.0.0.0/8, the change's number in the low 24 bits). A client reads the latest
// change of a service it holds from the addresses alone, whichever server sent them.
type world struct {
	services, perService int
	slots                [][]int32 // -1: base address; otherwise the change number
}

func newWorld(services, endpoints int) *world {
	per := max(1, endpoints/services)
	w := &world{services: services, perService: per, slots: make([][]int32, services)}
	for i := range w.slots {
		w.slots[i] = make([]int32, per)
		for j := range w.slots[i] {
			w.slots[i][j] = -1
		}
	}
	return w
}

func (w *world) service(i int) string   { return fmt.Sprintf("svc-%d", i) }
func (w *world) namespace(i int) string { return fmt.Sprintf("ns-%d", i%namespaces) }

// resource is the xDS resource name of service i (all four types share it).
func (w *world) resource(i int) string { return xds.ResourceName(w.service(i), w.namespace(i)) }

func (w *world) name(i int) string { return w.resource(i) }

func (w *world) set(i, j, k int) { w.slots[i][j] = int32(k) }

func (w *world) addr(i, j int) string {
	if k := w.slots[i][j]; k >= 0 {
		return changeAddr(int(k))
	}
	g := i*w.perService + j
	return fmt.Sprintf("172.%d.%d.%d", 16+(g>>16), (g>>8)&255, g&255)
}

// maxChanges is how many changes a run can number (the low 24 bits of a 10/8 address).
const maxChanges = 1 << 24

func changeAddr(k int) string {
	return fmt.Sprintf("10.%d.%d.%d", (k>>16)&255, (k>>8)&255, k&255)
}

// changeOf is the change number of an address, -1 for a base address.
func changeOf(addr string) int {
	rest, ok := strings.CutPrefix(addr, "10.")
	if !ok {
		return -1
	}
	k := 0
	for part := range strings.SplitSeq(rest, ".") {
		n, err := strconv.Atoi(part)
		if err != nil || n < 0 || n > 255 {
			return -1
		}
		k = k<<8 | n
	}
	return k
}

// serviceOf is the index of a resource name ("svc-<i>.ns-<j>"), -1 when it is not one.
func serviceOf(name string) int {
	rest, ok := strings.CutPrefix(name, "svc-")
	if !ok {
		return -1
	}
	num, _, _ := strings.Cut(rest, ".")
	i, err := strconv.Atoi(num)
	if err != nil {
		return -1
	}
	return i
}
