package discovery

import (
	"context"
	"errors"
	"fmt"
)

// Do calls fn with an instance and, while fn fails, with a different instance each time,
// at most attempts times in all (at most once per instance). Use it only for idempotent
// calls: a failed attempt may have reached the server. Each failure is reported with
// ReportFailure and a success with ReportSuccess. An error wrapped with Permanent stops the
// retries at once. Do returns nil on success, else every attempt's error joined, or
// ErrNoInstances when there was no instance to try.
func (c *Client) Do(ctx context.Context, attempts int, fn func(ctx context.Context, inst Instance) error) error {
	tried := make(map[string]bool, attempts)
	var errs []error
	for range max(attempts, 1) {
		if err := ctx.Err(); err != nil {
			return errors.Join(append(errs, err)...)
		}
		inst, err := c.pick(tried)
		if err != nil {
			if len(errs) == 0 {
				return err
			}
			break // every instance was tried
		}
		err = fn(ctx, inst)
		if err == nil {
			c.ReportSuccess(inst)
			return nil
		}
		var p permanent
		if errors.As(err, &p) {
			return p.err
		}
		c.ReportFailure(inst)
		tried[inst.Key] = true
		errs = append(errs, fmt.Errorf("%s: %w", inst.ID(), err))
	}
	return fmt.Errorf("discovery: %d attempt(s) failed: %w", len(errs), errors.Join(errs...))
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
