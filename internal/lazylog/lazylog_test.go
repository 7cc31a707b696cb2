package lazylog

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// collect returns a funcr logger that appends each line it writes, with the caller.
func collect(lines *[]string) logr.Logger {
	return funcr.New(func(prefix, args string) { *lines = append(*lines, prefix+" "+args) },
		funcr.Options{LogCaller: funcr.All, Verbosity: 1})
}

// Every line through the lazy logger is the line the wrapped logger writes itself: names,
// pairs in order, levels, errors and the caller's file and line.
func TestSameLines(t *testing.T) {
	var eager, lazy []string
	write := func(base logr.Logger) {
		log := base.WithName("controller").WithValues("a", 1).WithName("reconcile").WithValues("b", "two", "c", []int{3})
		log.Info("hello", "d", 4)
		log.V(1).Info("debug", "e", 5)
		log.V(2).Info("not written")
		log.Error(errors.New("boom"), "failed", "f", 6)
		log.WithValues("g", 7).Info("derived")
		log.Info("parent unchanged")
	}
	write(collect(&eager))
	write(Wrap(collect(&lazy)))
	if len(eager) != 5 {
		t.Fatalf("eager logger wrote %d lines, want 5: %q", len(eager), eager)
	}
	for i := range eager {
		// Both loggers are called from the same lines of write: the callers are equal too.
		if eager[i] != lazy[i] {
			t.Errorf("line %d:\n eager %s\n lazy  %s", i, eager[i], lazy[i])
		}
	}
	if !strings.Contains(lazy[0], "lazylog_test.go") {
		t.Errorf("caller is not the test: %s", lazy[0])
	}
}

// countingSink counts the WithValues calls it receives.
type countingSink struct {
	logr.LogSink
	withValues *int
}

func (c countingSink) WithValues(kv ...any) logr.LogSink {
	*c.withValues++
	return countingSink{LogSink: c.LogSink.WithValues(kv...), withValues: c.withValues}
}

// Pairs reach the wrapped sink only when a line is written, never for a disabled level.
func TestPairsDeferredUntilALineIsWritten(t *testing.T) {
	var lines []string
	n := 0
	base := logr.New(countingSink{LogSink: collect(&lines).GetSink(), withValues: &n})
	log := Wrap(base).WithValues("request", "ns/web").WithValues("reconcileID", "x")
	log.V(5).Info("disabled")
	if n != 0 || len(lines) != 0 {
		t.Fatalf("%d WithValues and %d lines before any enabled line", n, len(lines))
	}
	log.Info("written")
	if n != 2 || len(lines) != 1 {
		t.Fatalf("%d WithValues and %d lines after one line, want 2 and 1", n, len(lines))
	}
	if !strings.Contains(lines[0], `"request"="ns/web"`) || !strings.Contains(lines[0], `"reconcileID"="x"`) {
		t.Fatalf("pairs missing: %s", lines[0])
	}
}

// Loggers derived from one lazy logger do not see each other's pairs.
func TestDerivedLoggersIndependent(t *testing.T) {
	var lines []string
	root := Wrap(collect(&lines)).WithValues("root", 0)
	a, b := root.WithValues("a", 1), root.WithValues("b", 2)
	a.Info("x")
	b.Info("y")
	if len(lines) != 2 || strings.Contains(lines[0], `"b"`) || strings.Contains(lines[1], `"a"`) {
		t.Fatalf("derived loggers mixed: %q", lines)
	}
}

// The verbosity of the wrapped logger is kept, and a discarding logger stays one.
func TestVerbosityAndDiscard(t *testing.T) {
	var lines []string
	Wrap(collect(&lines).V(1)).V(1).Info("at V(2): not written")
	Wrap(collect(&lines).V(1)).Info("at V(1): written")
	if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "at V(1)") }) || len(lines) != 1 {
		t.Fatalf("lines %q", lines)
	}
	Wrap(logr.Discard()).WithValues("a", 1).Info("nothing")
}

func TestDeferred(t *testing.T) {
	base := funcr.New(func(prefix, args string) {}, funcr.Options{})
	if Deferred(base) || !Deferred(Wrap(base)) || !Deferred(Wrap(base).WithValues("k", "v").WithName("n")) {
		t.Fatal("Deferred must tell Wrap's loggers (and those derived from them) from others")
	}
}
