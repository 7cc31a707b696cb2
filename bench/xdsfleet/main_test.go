package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	if v := os.Getenv(serveEnv); v != "" {
		if err := serveFromEnv(v); err != nil {
			fmt.Fprintln(os.Stderr, "xdsfleet server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestChangeAddresses(t *testing.T) {
	for _, k := range []int{0, 1, 255, 256, 65535, 65536, maxChanges - 1} {
		if got := changeOf(changeAddr(k)); got != k {
			t.Errorf("changeOf(changeAddr(%d)) = %d", k, got)
		}
	}
	w := newWorld(1000, 50000)
	for _, ij := range [][2]int{{0, 0}, {999, 49}, {500, 7}} {
		if got := changeOf(w.addr(ij[0], ij[1])); got != -1 {
			t.Errorf("base address %s reads as change %d", w.addr(ij[0], ij[1]), got)
		}
	}
	if got := serviceOf(w.resource(742)); got != 742 {
		t.Errorf("serviceOf(%q) = %d", w.resource(742), got)
	}
}

// TestTracker: a change is done when the last subscribed client ACKs it or a later one, and
// not before.
func TestTracker(t *testing.T) {
	clients := []client{{id: 0, subs: []int{0, 1}}, {id: 1, subs: []int{1}}}
	tr := newTracker(clients, 2)
	now := time.Now()
	tr.saw(0, 0, -1, now)
	tr.saw(0, 1, -1, now)
	tr.saw(1, 1, -1, now)
	select {
	case <-tr.syncCh:
	default:
		t.Fatal("not synced after every client received every subscription")
	}
	tr.issue(0, 1, now)
	tr.issue(1, 1, now)
	tr.issue(2, 0, now)
	tr.saw(0, 1, 1, now.Add(time.Millisecond)) // client 0 has both changes of service 1
	if tr.outstanding() != 3 {
		t.Fatalf("outstanding = %d, want 3 (client 1 has neither change of service 1)", tr.outstanding())
	}
	tr.saw(1, 1, 0, now.Add(2*time.Millisecond))
	if tr.outstanding() != 2 || tr.changes[0].done.IsZero() {
		t.Fatalf("change 0 should be done, outstanding %d", tr.outstanding())
	}
	if got := tr.behind(); got != 2 {
		t.Fatalf("behind = %d, want 2", got)
	}
	tr.saw(1, 1, 1, now.Add(3*time.Millisecond))
	tr.saw(0, 0, 2, now.Add(3*time.Millisecond))
	if tr.outstanding() != 0 || tr.behind() != 0 {
		t.Fatalf("outstanding %d, behind %d after every ACK", tr.outstanding(), tr.behind())
	}
}

// TestSmallFleet runs both servers with a small fleet: every change reaches every subscribed
// client, no stream fails, the figures are filled in and the server wrote its profiles.
func TestSmallFleet(t *testing.T) {
	for _, impl := range []string{"registrar", "stock"} {
		t.Run(impl, func(t *testing.T) {
			cfg := config{Impl: impl, Clients: 40, Everything: 2, PerClient: 3, DeltaShare: 0.5, Services: 50, Endpoints: 500, Rate: 20, Seed: 7}
			dir := t.TempDir()
			prof := profiles{heap: filepath.Join(dir, "heap.pprof"), cpu: filepath.Join(dir, "cpu.pprof")}
			r, err := runOne(cfg, 2*time.Second, time.Minute, time.Minute, prof)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{prof.heap, prof.cpu} {
				if fi, err := os.Stat(p); err != nil || fi.Size() == 0 {
					t.Fatalf("the server process wrote no profile %s: %v", p, err)
				}
			}
			t.Log(r.line())
			if r.Changes != 40 || r.Undelivered != 0 || r.Behind != 0 || r.Errors != 0 {
				t.Fatalf("changes %d (want 40), undelivered %d, behind %d, stream errors %d %s", r.Changes, r.Undelivered, r.Behind, r.Errors, r.ErrorSample)
			}
			if r.P99Ms <= 0 || r.KiBChange <= 0 || r.PeakMiB <= 0 || r.Delta == 0 || r.Delta == cfg.Clients {
				t.Fatalf("figures missing: %+v", r)
			}
		})
	}
}
