package store

import (
	"context"
	"errors"
	"time"
)

// Observer receives the outcome of every store call of an Instrumented store.
type Observer func(operation string, took time.Duration, err error)

// Instrumented wraps s so that every List and Apply is reported to observe.
func Instrumented(s Store, observe Observer) Store {
	return &instrumented{Store: s, observe: observe}
}

type instrumented struct {
	Store
	observe Observer
}

func (i *instrumented) List(ctx context.Context, scope Scope) ([]Record, error) {
	start := time.Now()
	records, err := i.Store.List(ctx, scope)
	i.observe("list", time.Since(start), err)
	return records, err
}

func (i *instrumented) Apply(ctx context.Context, scope Scope, changes Changes) ([]Record, error) {
	start := time.Now()
	written, err := i.Store.Apply(ctx, scope, changes)
	i.observe("apply", time.Since(start), err)
	return written, err
}

// ErrorKind names an error for metrics: "conflict" for ErrConflict, "fenced" for
// ErrFenced, else "error".
func ErrorKind(err error) string {
	if errors.Is(err, ErrConflict) {
		return "conflict"
	}
	if errors.Is(err, ErrFenced) {
		return "fenced"
	}
	return "error"
}

// Watch passes through to the wrapped Store's Watch, when it has one.
func (i *instrumented) Watch(ctx context.Context, changed func(Change), missed func()) error {
	w, ok := i.Store.(Watcher)
	if !ok {
		return errors.ErrUnsupported
	}
	return w.Watch(ctx, changed, missed)
}

// ListAll passes through to the wrapped Store's ListAll, when it has one.
func (i *instrumented) ListAll(ctx context.Context) ([]Record, error) {
	sc, ok := i.Store.(Scanner)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	start := time.Now()
	records, err := sc.ListAll(ctx)
	i.observe("list", time.Since(start), err)
	return records, err
}
