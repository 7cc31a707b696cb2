package discovery

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"
)

// Do calls fn with an instance and, while fn fails, with a different instance each time,
// at most attempts times in all (at most once per instance). Use it only for idempotent
// calls: a failed attempt may have reached the server. Each failure is reported with
// ReportFailure and a success with ReportSuccess. An error wrapped with Permanent stops the
// retries at once. Do returns nil on success, else every attempt's error joined, or
// ErrNoInstances when there was no instance to try.
//
// Unless Config.Breaker.Disabled, Do goes through the circuit breakers first: when the
// service's breaker (local, or shared with the fleet when coordinated) rejects the call, Do
// returns an error wrapping ErrBreakerOpen without calling fn; endpoints whose own breaker is
// open are skipped like ejected ones, and when every endpoint's breaker rejects the call Do
// returns ErrBreakerOpen. A half-open probe is a single attempt (IsProbe(ctx) is true in fn).
// A Permanent error counts as an answer (a success) for the breakers; a call whose ctx ended
// counts as nothing. A call in which fn panics counts as a failure for the breakers (a probe
// gives its permit back), and the panic goes on to Do's caller.
func (c *Client) Do(ctx context.Context, attempts int, fn func(ctx context.Context, inst Instance) error) error {
	attempts = max(attempts, 1)
	bs := c.brk
	if bs == nil {
		err, _, _ := c.try(ctx, attempts, fn, time.Time{})
		return err
	}
	start := c.now() // the clock is read twice per call: here and when the call ends
	st, ok := bs.admit(start)
	if !ok {
		return fmt.Errorf("%w: service %s", ErrBreakerOpen, c.cfg.Service)
	}
	callCtx := ctx
	if st.probe() {
		attempts = 1
		bs.probes.Add(1)
		callCtx = context.WithValue(ctx, probeKey{}, true)
		if st.sharedProbe {
			// The permit is the lease's: the probe must end well inside it.
			var cancel context.CancelFunc
			callCtx, cancel = context.WithTimeout(callCtx, bs.cfg.Coordinated.ProbeLease/2)
			defer cancel()
		}
	}
	returned := false
	defer func() {
		if !returned {
			// fn panicked (or called runtime.Goexit): the call failed. The permit goes back,
			// or a panicking probe would leave the breaker rejecting every call; the panic
			// goes on to the caller.
			end := c.now()
			bs.finish(st, end, outcomeFailure, end.Sub(start))
		}
	}()
	err, answered, end := c.try(callCtx, attempts, fn, start)
	returned = true
	o := outcomeFailure
	switch {
	case answered:
		o = outcomeSuccess
	case ctx.Err() != nil, errors.Is(err, ErrNoInstances), errors.Is(err, ErrBreakerOpen):
		o = outcomeIgnored // the caller gave up, or no call reached the dependency
	}
	bs.finish(st, end, o, end.Sub(start))
	return err
}

// try makes up to attempts attempts on distinct instances. answered is true when an
// instance succeeded or answered with a Permanent error. With breakers, now is the time
// the call began and end the time the last attempt ended.
func (c *Client) try(ctx context.Context, attempts int, fn func(ctx context.Context, inst Instance) error, now time.Time) (err error, answered bool, end time.Time) { //nolint:lll,staticcheck // ST1008: err first, as the callers read it
	end = now
	bs := c.brk
	tried := make(map[string]bool, attempts)
	var errs []error
	blocked := 0
	for n := 0; n < attempts; {
		if err := ctx.Err(); err != nil {
			return errors.Join(append(errs, err)...), false, end
		}
		skip := tried
		if bs != nil && bs.nonClosed.Load() > 0 {
			skip = maps.Clone(tried)
			blocked += bs.blockedSet(c.snap.Load(), end, skip)
		}
		inst, err := c.pick(skip)
		if err != nil {
			if len(errs) > 0 {
				break // every instance was tried
			}
			if blocked > 0 {
				return fmt.Errorf("%w: every endpoint of %s", ErrBreakerOpen, c.cfg.Service), false, end
			}
			return err, false, end
		}
		var et ticket
		if bs != nil {
			var ok bool
			if et, ok = bs.endpoint(inst.Key, c.rand).allow(end); !ok {
				tried[inst.Key] = true // raced into Open or a full Half-Open: not an attempt
				blocked++
				continue
			}
		}
		start := end
		err = c.call(ctx, fn, inst, et, start)
		if bs != nil {
			end = c.now()
			o := classify(ctx, err)
			if bs.svc.State() == BreakerOpen {
				// The service's breaker opened while this call was out: the failure is the
				// service's; the endpoint's breaker learns nothing from it.
				o = outcomeIgnored
			}
			et.done(end, o, end.Sub(start))
		}
		n++
		if err == nil {
			c.ReportSuccess(inst)
			return nil, true, end
		}
		var p permanent
		if errors.As(err, &p) {
			return p.err, true, end
		}
		c.ReportFailure(inst)
		tried[inst.Key] = true
		errs = append(errs, fmt.Errorf("%s: %w", inst.ID(), err))
	}
	return fmt.Errorf("discovery: %d attempt(s) failed: %w", len(errs), errors.Join(errs...)), false, end
}

// call makes one attempt. When fn does not return (it panics or calls runtime.Goexit), the
// attempt counts as failed for the endpoint's breaker, so a probe gives its permit back, and
// the panic goes on.
func (c *Client) call(
	ctx context.Context, fn func(ctx context.Context, inst Instance) error, inst Instance, et ticket, start time.Time,
) error {
	if et.b == nil {
		return fn(ctx, inst)
	}
	returned := false
	defer func() {
		if !returned {
			end := c.now()
			et.done(end, outcomeFailure, end.Sub(start))
		}
	}()
	if et.probe && !IsProbe(ctx) {
		ctx = context.WithValue(ctx, probeKey{}, true)
	}
	err := fn(ctx, inst)
	returned = true
	return err
}

// Permanent marks an error that retrying on another instance cannot fix (a 4xx answer, a
// bad request); Do returns it unwrapped without trying again.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err}
}

type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }
