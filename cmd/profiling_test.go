package main

import (
	"runtime"
	"testing"
)

// Heap profiling stays on only where a profile can be read, or where GODEBUG asks for a rate.
func TestHeapProfileRate(t *testing.T) {
	def := runtime.MemProfileRate
	for _, tc := range []struct {
		addr, godebug string
		want          int
	}{
		{addr: "", want: 0},
		{addr: "0", want: 0},
		{addr: "", godebug: "gctrace=1", want: 0},
		{addr: "127.0.0.1:8082", want: def},
		{addr: "", godebug: "gctrace=1, memprofilerate=1", want: def},
	} {
		if got := heapProfileRate(tc.addr, tc.godebug, def); got != tc.want {
			t.Errorf("heapProfileRate(%q, %q) = %d, want %d", tc.addr, tc.godebug, got, tc.want)
		}
	}
}
