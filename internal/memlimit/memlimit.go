// Package memlimit decides how much memory the Go runtime may hold above what is live: its
// soft memory limit, from the container's memory limit, so that the garbage collector works
// harder as the heap nears the limit instead of letting the kernel kill the process (Prior
// art: Prometheus enables the same by default, --auto-gomemlimit, ratio 0.9); and the
// collector's pacing (GOGC), the heap's growth over what the last collection left live before
// the next one (Go's default 100: the heap may grow to twice the live heap).
//
// The limit is read from cgroup v2 (memory.max) or, failing that, cgroup v1
// (memory/memory.limit_in_bytes) under /sys/fs/cgroup; no limit ("max", or v1's huge
// unlimited value) sets nothing, and an explicit GOMEMLIMIT always wins.
package memlimit

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"strconv"
	"strings"
)

// cgroup v1 reports "no limit" as a page-rounded huge number (e.g. 9223372036854771712);
// anything at or above this is taken as unlimited.
const unlimitedV1 = int64(1) << 60

// ErrNoLimit is returned when the process has no memory limit to follow.
var ErrNoLimit = errors.New("no container memory limit")

// Paths of the limit files, relative to the cgroup file system's root (/sys/fs/cgroup).
const (
	v2File = "memory.max"
	v1File = "memory/memory.limit_in_bytes"
)

// ContainerLimit reads the memory limit, in bytes, from cgroupFS (rooted at /sys/fs/cgroup).
func ContainerLimit(cgroupFS fs.FS) (int64, error) {
	for _, name := range []string{v2File, v1File} {
		b, err := fs.ReadFile(cgroupFS, name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("read cgroup %s: %w", name, err)
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0, ErrNoLimit
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("cgroup %s: %q is not a number of bytes: %w", name, s, err)
		}
		if n <= 0 || n >= unlimitedV1 {
			return 0, ErrNoLimit
		}
		return n, nil
	}
	return 0, ErrNoLimit
}

// Decision is what Soft decided.
type Decision struct {
	// Limit is the soft limit to set, in bytes; 0 sets nothing.
	Limit int64
	// Container is the container's limit it was derived from (0 when none was read).
	Container int64
	// Reason says why, for the start-up log.
	Reason string
}

// Soft decides the soft limit: ratio × the container's limit, unless GOMEMLIMIT is set
// (goMemLimit non-empty: the runtime already follows it), ratio is 0 (disabled) or there is no
// limit. ratio must be in [0, 1].
func Soft(cgroupFS fs.FS, ratio float64, goMemLimit string) (Decision, error) {
	switch {
	case ratio < 0 || ratio > 1 || math.IsNaN(ratio):
		return Decision{}, fmt.Errorf("memory limit ratio %v: want 0 (off) to 1", ratio)
	case goMemLimit != "":
		return Decision{Reason: "GOMEMLIMIT is set: the runtime follows it"}, nil
	case ratio == 0:
		return Decision{Reason: "disabled (ratio 0)"}, nil
	}
	limit, err := ContainerLimit(cgroupFS)
	if errors.Is(err, ErrNoLimit) {
		return Decision{Reason: "the container has no memory limit"}, nil
	}
	if err != nil {
		return Decision{}, err
	}
	return Decision{Limit: int64(float64(limit) * ratio), Container: limit,
		Reason: fmt.Sprintf("%.0f%% of the container's memory limit", ratio*100)}, nil
}

// DefaultGCPercent is registrar's GOGC when neither --gc-percent nor GOGC says otherwise: the
// heap grows by half of what is live before a collection, not by all of it. Measured at 5,000
// pods (docs/performance.md, "Go's pacing"): peak RSS 118 → 101 MiB for 6 % more CPU.
const DefaultGCPercent = 50

// MaxGCPercent bounds --gc-percent: beyond it the heap's headroom, not the flag, is the bug.
const MaxGCPercent = 1000

// Pacing is what GCPercent decided.
type Pacing struct {
	// Percent is the GOGC to set; 0 sets nothing (the runtime's own: GOGC, or 100).
	Percent int
	// Reason says why, for the start-up log.
	Reason string
}

// GCPercent decides the collector's pacing: percent (--gc-percent), unless GOGC is set
// (goGC non-empty: the runtime already follows it) or percent is 0 (Go's default kept).
// percent must be in [0, MaxGCPercent].
func GCPercent(percent int, goGC string) (Pacing, error) {
	switch {
	case percent < 0 || percent > MaxGCPercent:
		return Pacing{}, fmt.Errorf("GC percent %d: want 0 (Go's default) to %d", percent, MaxGCPercent)
	case goGC != "":
		return Pacing{Reason: "GOGC is set: the runtime follows it"}, nil
	case percent == 0:
		return Pacing{Reason: "Go's default (0)"}, nil
	}
	return Pacing{Percent: percent, Reason: fmt.Sprintf("a collection when the heap has grown by %d%% of what is live", percent)}, nil
}
