package ctl

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/internal/ctl/output"
	"github.com/registrar-dev/registrar/pkg/discovery"
	"github.com/registrar-dev/registrar/pkg/wire"
)

// healthView is the operator's self-monitoring keys as the store has them.
type healthView struct {
	// Heartbeat is the single leader's ({prefix}/.registrar/heartbeat).
	Heartbeat *heartbeatView `json:"heartbeat,omitempty"`
	// Heartbeats are each replica's ({prefix}/.registrar/heartbeat/{cluster}/{replica}).
	Heartbeats []heartbeatView `json:"heartbeats,omitempty"`
	Canaries   []canaryView    `json:"canaries,omitempty"`
}

type heartbeatView struct {
	Cluster  string    `json:"cluster,omitempty"`
	Replica  string    `json:"replica,omitempty"`
	Writer   string    `json:"writer"`
	Time     time.Time `json:"time"`
	Age      string    `json:"age"`
	Interval string    `json:"interval"`
	Seq      int64     `json:"seq"`
	Revision int64     `json:"revision"`
	// Stale is true when the heartbeat is older than --stale-after (by this machine's
	// clock against the writer's: pkg/discovery uses the revision advancing instead).
	Stale bool `json:"stale"`
}

type canaryView struct {
	Name         string    `json:"name"`
	Address      string    `json:"address"`
	RegisteredAt time.Time `json:"registeredAt"`
	Revision     int64     `json:"revision"`
}

// health prints the operator's heartbeat (writer, age, whether callers would call it stale)
// and its canary endpoints; exit 3 when there is no heartbeat under the prefix.
func (r *runner) health(ctx context.Context, staleAfter time.Duration) int {
	cli, err := r.connect()
	if err != nil {
		return r.fail(ExitError, "%v", err)
	}
	defer func() { _ = cli.Close() }()
	ctx, cancel := context.WithTimeout(ctx, r.opts.timeout)
	defer cancel()
	hbKey, canaries := wire.HeartbeatKey(r.opts.prefix), wire.CanaryPrefix(r.opts.prefix)
	resp, err := cli.Txn(ctx).Then(clientv3.OpGet(hbKey, clientv3.WithPrefix()), clientv3.OpGet(canaries, clientv3.WithPrefix())).Commit()
	if err != nil {
		code := storeCode(err)
		if code == ExitUnreachable {
			return r.fail(code, "store %s unreachable: %v", r.opts.endpoints, err)
		}
		return r.fail(code, "read %s: %v", hbKey, err)
	}
	var v healthView
	now := r.env.Now()
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		_, legacy, ok := wire.ParseHeartbeatKey(r.opts.prefix, string(kv.Key))
		if !ok {
			continue
		}
		hb, err := wire.DecodeHeartbeat(kv.Value)
		if err != nil {
			fmt.Fprintf(r.env.Stderr, "registrarctl: skipping %s: %v\n", kv.Key, err)
			continue
		}
		view := heartbeatView{Cluster: hb.Cluster, Replica: hb.Replica, Writer: hb.Writer, Time: hb.Time, Age: output.Age(now, hb.Time),
			Interval: (time.Duration(hb.IntervalSeconds * float64(time.Second))).String(), Seq: hb.Seq,
			Revision: kv.ModRevision, Stale: now.Sub(hb.Time) > staleAfter}
		if legacy {
			v.Heartbeat = &view
		} else {
			v.Heartbeats = append(v.Heartbeats, view)
		}
	}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		inst, err := discovery.DecodeInstance(string(kv.Key), kv.Value, kv.ModRevision)
		if err != nil {
			fmt.Fprintf(r.env.Stderr, "registrarctl: skipping %s: %v\n", kv.Key, err)
			continue
		}
		v.Canaries = append(v.Canaries, canaryView{Name: inst.Namespace + "/" + inst.Pod, Address: inst.Address,
			RegisteredAt: inst.RegisteredAt, Revision: kv.ModRevision})
	}
	if err := r.printHealth(v, now); err != nil {
		return r.fail(ExitError, "%v", err)
	}
	if v.Heartbeat == nil && len(v.Heartbeats) == 0 {
		return r.fail(ExitNotFound, "no heartbeat at %s: no registrar operator writes this prefix, or it runs with --heartbeat-interval=0", hbKey)
	}
	return ExitOK
}

func (r *runner) printHealth(v healthView, now time.Time) error {
	if ok, err := r.writeData(v); ok {
		return err
	}
	tw := r.out().Table()
	fmt.Fprintln(tw, "KIND\tNAME\tAGE\tREVISION\tSTATE\tDETAIL")
	line := func(name string, hb heartbeatView) {
		state := "Fresh"
		if hb.Stale {
			state = "Stale"
		}
		fmt.Fprintf(tw, "heartbeat\t%s\t%s\t%d\t%s\tevery %s, seq %d\n", name, hb.Age, hb.Revision, state, hb.Interval, hb.Seq)
	}
	if hb := v.Heartbeat; hb != nil {
		line(output.Dash(hb.Writer), *hb)
	}
	for _, hb := range v.Heartbeats {
		line(hb.Cluster+"/"+hb.Replica, hb)
	}
	for _, c := range v.Canaries {
		fmt.Fprintf(tw, "canary\t%s\t%s\t%d\t-\t%s\n", c.Name, output.Age(now, c.RegisteredAt), c.Revision, c.Address)
	}
	return tw.Flush()
}

// healthCommandLong is the health command's help.
var healthCommandLong = strings.Join([]string{
	"Show the operator's heartbeats (each replica's, {prefix}/.registrar/heartbeat/{cluster}/{replica},",
	"named cluster/replica, and the single leader's {prefix}/.registrar/heartbeat, named by its writer:",
	"age, interval) and whether a caller would call its list stale (heartbeat older than --stale-after),",
	"and the canaries' synthetic endpoints (exit 3 when there is no heartbeat).",
}, "\n")

// healthCommand is `registrarctl health`.
func healthCommand(r *runner, run func(func(context.Context, []string) int) func(*cobra.Command, []string) error) *cobra.Command {
	var staleAfter time.Duration
	cmd := &cobra.Command{
		Use:   "health",
		Short: "The operator's heartbeat and canary: is the registry being kept current?",
		Long:  healthCommandLong,
		Args:  argsRange(0, 0),
		RunE:  run(func(ctx context.Context, _ []string) int { return r.health(ctx, staleAfter) }),
	}
	cmd.Flags().DurationVar(&staleAfter, "stale-after", discovery.DefaultStaleAfter, "heartbeat age beyond which the state is Stale (pkg/discovery's default StaleAfter)")
	return cmd
}
