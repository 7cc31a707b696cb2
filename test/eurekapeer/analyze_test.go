package eurekapeer

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// lines writes a caller log: victim picked every 40 ms in [from, to) ms after t0, with the
// given outcome, interleaved with the healthy instance.
func lines(t0 int64, from, to int64, victimOK bool) string {
	var b strings.Builder
	for ms := from; ms < to; ms += 40 {
		ok := "ok"
		if !victimOK {
			ok = "fail"
		}
		b.WriteString("lost " + itoa(t0+ms) + " 127.0.0.2:8080 " + ok + " 3\n")
		b.WriteString("lost " + itoa(t0+ms+20) + " 127.0.0.3:8080 ok 2\n")
	}
	return b.String()
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

func TestAnalyze(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 19, 0, 0, 0, time.UTC)
	base := t0.UnixMilli()
	// Healthy before the fault, failing for 10 s after it, then only the healthy instance
	// until 60 s, then (restored) the victim again; a torn last line.
	log := lines(base, -5000, 0, true) + lines(base, 0, 10000, false)
	for ms := int64(10000); ms < 60000; ms += 20 {
		log += "lost " + itoa(base+ms) + " 127.0.0.3:8080 ok 2\n"
	}
	log += lines(base, 60000, 70000, true) + "lost 17964"
	reqs, err := ParseLog(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	c := Analyze(reqs, "lost", "127.0.0.2:8080", t0, t0.Add(55*time.Second), t0.Add(70*time.Second), Gap)
	if c.Failed != 250 || c.NoTarget != 0 {
		t.Errorf("failed %d (no target %d), want 250 (0)", c.Failed, c.NoTarget)
	}
	if c.StopSeconds == nil || *c.StopSeconds < 9.9 || *c.StopSeconds > 10 {
		t.Errorf("stopped picking after %v s, want 9.96", c.StopSeconds)
	}
	if c.LastFailSeconds == nil || *c.LastFailSeconds < 9.9 {
		t.Errorf("last failure after %v s, want 9.96", c.LastFailSeconds)
	}
	// The fault was over (the process answered again) before any pause: never stopped.
	c = Analyze(reqs, "lost", "127.0.0.2:8080", t0, t0.Add(5*time.Second), t0.Add(70*time.Second), Gap)
	if c.StopSeconds != nil {
		t.Errorf("a pause after the fault was over counted as stopping: %v s", *c.StopSeconds)
	}
	// Kept picking the whole time: never.
	reqs, _ = ParseLog(strings.NewReader(lines(base, 0, 30000, true)))
	if c := Analyze(reqs, "lost", "127.0.0.2:8080", t0, t0.Add(30*time.Second), t0.Add(30*time.Second), Gap); c.StopSeconds != nil || c.Failed != 0 {
		t.Errorf("healthy caller: stopped %v, failed %d", c.StopSeconds, c.Failed)
	}
}
