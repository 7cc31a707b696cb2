package ctl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/registrar-dev/registrar/internal/ctl/output"
	"github.com/registrar-dev/registrar/pkg/discovery"
)

// watchEvent is one line of watch output.
type watchEvent struct {
	Time     time.Time           `json:"time"`
	Event    string              `json:"event"` // ADDED, UPDATED, REMOVED, DISCONNECTED, RECONNECTED
	Instance *discovery.Instance `json:"instance,omitempty"`
	// Message explains a DISCONNECTED or RECONNECTED event.
	Message string `json:"message,omitempty"`
}

// watch prints the service's instances as ADDED, then every change as it is pushed, until
// ctx is done (exit 0). It exits 4 when the first list does not succeed within the store
// timeout; later outages are printed as DISCONNECTED and RECONNECTED events.
func (r *runner) watch(ctx context.Context, service string) int {
	if strings.Contains(service, "/") {
		return r.fail(ExitUsage, "watch takes a service name, not %q", service)
	}
	cli, err := r.connect()
	if err != nil {
		return r.fail(ExitError, "%v", err)
	}
	defer func() { _ = cli.Close() }()
	c, err := discovery.New(discovery.Config{
		Client: cli, Prefix: r.opts.prefix, Service: service, Namespace: r.opts.namespace,
		RequestTimeout: r.opts.timeout, ProbeInterval: time.Second, ProbeTimeout: r.opts.timeout,
	})
	if err != nil {
		return r.fail(ExitError, "%v", err)
	}
	defer func() { _ = c.Close() }()
	sub := c.Subscribe()
	defer sub.Close()
	syncCtx, cancel := context.WithTimeout(ctx, r.opts.timeout)
	err = c.WaitSynced(syncCtx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return ExitOK
		}
		return r.fail(ExitUnreachable, "store %s unreachable: %v", r.opts.endpoints, err)
	}
	return r.follow(ctx, c, sub)
}

func (r *runner) follow(ctx context.Context, c *discovery.Client, sub *discovery.Subscription) int {
	if r.opts.output == "" || r.opts.output == output.Wide {
		fmt.Fprintln(r.env.Stdout, "TIME\tEVENT\tINSTANCE\tADDRESS\tPORTS")
	}
	seenConnected, disconnected := false, false
	for {
		ch, err := sub.Next(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, discovery.ErrClosed) {
				return ExitOK
			}
			return r.fail(ExitError, "watch: %v", err)
		}
		now := r.env.Now()
		var events []watchEvent
		switch {
		case ch.Connected && disconnected:
			disconnected = false
			events = append(events, watchEvent{Time: now, Event: "RECONNECTED", Message: "watching the store again"})
		case !ch.Connected && seenConnected && !disconnected:
			disconnected = true
			events = append(events, watchEvent{Time: now, Event: "DISCONNECTED",
				Message: fmt.Sprintf("store unreachable; the list was last confirmed %s ago", c.Staleness().Round(time.Second))})
		}
		seenConnected = seenConnected || ch.Connected
		for _, group := range []struct {
			name  string
			insts []discovery.Instance
		}{{"ADDED", ch.Added}, {"UPDATED", ch.Updated}, {"REMOVED", ch.Removed}} {
			for i := range group.insts {
				events = append(events, watchEvent{Time: now, Event: group.name, Instance: &group.insts[i]})
			}
		}
		for _, ev := range events {
			if err := r.printEvent(ev); err != nil {
				return r.fail(ExitError, "%v", err)
			}
		}
	}
}

func (r *runner) printEvent(ev watchEvent) error {
	if ok, err := r.out().Event(ev); ok {
		return err
	}
	ts := ev.Time.UTC().Format(time.RFC3339)
	if ev.Instance == nil {
		_, err := fmt.Fprintf(r.env.Stdout, "%s\t%s\t%s\n", ts, ev.Event, ev.Message)
		return err
	}
	_, err := fmt.Fprintf(r.env.Stdout, "%s\t%s\t%s\t%s\t%s\n", ts, ev.Event, ev.Instance.ID(), ev.Instance.Address, output.Ports(ev.Instance.Ports))
	return err
}
