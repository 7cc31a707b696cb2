// Package lazylog defers a logger's key/value pairs until a line is written.
//
// controller-runtime gives every reconcile a logger of its own (the request's object, a
// reconcile ID), and with zap each WithValues encodes its pairs at once into a clone of the
// encoder. A reconcile that writes no line (nearly all of them: the per-change lines are
// V(1)) pays for that anyway: at 5,000 pods zap's buffers were ~5 % of everything the operator
// allocated. Wrap returns a logger whose WithValues and WithName only remember what they were
// given; the wrapped sink receives them when a line is enabled and written.
package lazylog

import "github.com/go-logr/logr"

// Wrap returns base with deferred WithValues and WithName. Lines, levels, names and pairs are
// those base would write itself.
func Wrap(base logr.Logger) logr.Logger {
	sink := base.GetSink()
	if sink == nil {
		return base // logr.Discard
	}
	// One frame more between the caller and the sink: lazy's own method.
	if cd, ok := sink.(logr.CallDepthLogSink); ok {
		sink = cd.WithCallDepth(1)
	}
	return logr.New(&lazy{sink: sink}).V(base.GetV())
}

// Deferred reports whether l defers its pairs (it comes from Wrap).
func Deferred(l logr.Logger) bool {
	_, ok := l.GetSink().(*lazy)
	return ok
}

// step is one deferred call: a name, or key/value pairs.
type step struct {
	name string
	kv   []any
}

// lazy is a LogSink that replays its steps onto sink when a line is written. Every With
// copies the steps, so loggers derived from one another never share a mutable slice.
type lazy struct {
	sink  logr.LogSink
	steps []step
}

// Init does nothing: the sink was initialised by the logger it came from, and the extra
// frame is in its call depth (Wrap).
func (l *lazy) Init(logr.RuntimeInfo) {}

func (l *lazy) Enabled(level int) bool { return l.sink.Enabled(level) }

func (l *lazy) Info(level int, msg string, kv ...any) { l.materialise().Info(level, msg, kv...) }

func (l *lazy) Error(err error, msg string, kv ...any) { l.materialise().Error(err, msg, kv...) }

func (l *lazy) WithValues(kv ...any) logr.LogSink {
	return l.with(step{kv: append([]any(nil), kv...)})
}

func (l *lazy) WithName(name string) logr.LogSink { return l.with(step{name: name}) }

func (l *lazy) with(s step) *lazy {
	steps := make([]step, len(l.steps), len(l.steps)+1)
	copy(steps, l.steps)
	return &lazy{sink: l.sink, steps: append(steps, s)}
}

// materialise applies the steps, in order, to the sink.
func (l *lazy) materialise() logr.LogSink {
	s := l.sink
	for _, st := range l.steps {
		if st.kv != nil {
			s = s.WithValues(st.kv...)
		} else {
			s = s.WithName(st.name)
		}
	}
	return s
}
