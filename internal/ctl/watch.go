package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

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
	if r.opts.output == "" || r.opts.output == outputWide {
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
	switch r.opts.output {
	case outputJSON:
		b, err := json.Marshal(ev)
		if err != nil {
			return fmt.Errorf("encode json: %w", err)
		}
		_, err = fmt.Fprintf(r.env.Stdout, "%s\n", b)
		return err
	case outputYAML:
		b, err := yaml.Marshal(ev)
		if err != nil {
			return fmt.Errorf("encode yaml: %w", err)
		}
		_, err = fmt.Fprintf(r.env.Stdout, "---\n%s", b)
		return err
	case outputJSONPath:
		return writeJSONPath(r.env.Stdout, r.opts.jsonPath, ev)
	}
	ts := ev.Time.UTC().Format(time.RFC3339)
	if ev.Instance == nil {
		_, err := fmt.Fprintf(r.env.Stdout, "%s\t%s\t%s\n", ts, ev.Event, ev.Message)
		return err
	}
	_, err := fmt.Fprintf(r.env.Stdout, "%s\t%s\t%s\t%s\t%s\n", ts, ev.Event, ev.Instance.ID(), ev.Instance.Address, ports(ev.Instance.Ports))
	return err
}
