// Package controlplane is registrar's control-plane benchmark harness: a real kube-apiserver
// and etcd (envtest), a real etcd as the store, the operator as a separate process built from
// ./cmd, and, side by side on the same transitions, kube-controller-manager's EndpointSlice
// controller and a self-registration TTL registry. It plays the kubelet by writing pod status
// at a controlled rate and measures, for every transition, the time from the API write to the
// moment the change is visible to a separate watcher of each system.
package controlplane

import (
	"fmt"
	"time"
)

// Config is one benchmark run.
type Config struct {
	// Pods and Registries size the run; pods are spread evenly over the registries.
	Pods, Registries int
	// Namespaces holds the registries (and their pods), spread evenly.
	Namespaces int
	// Nodes are the Node objects pods are bound to (the EndpointSlice controller skips pods
	// whose node does not exist).
	Nodes int
	// TransitionsPerRound caps the pods a round flips (0: every pod): the same randomly chosen
	// pods go ready, unready, ready and are deleted, the others stay (unready) and only make
	// the cluster large. A fixed cap keeps the run time bounded at 20,000 pods and the CPU per
	// 1,000 transitions comparable between sizes.
	TransitionsPerRound int
	// Rate is the offered transitions per second (pod status writes and deletes).
	Rate float64
	// Writers bounds the API writes in flight. It must exceed the offered rate times the API
	// write latency, or the writers, not the systems, limit the rate (Results.Harness.PaceLag).
	Writers int
	// RoundTimeout bounds the wait for every system to show a round's transitions.
	RoundTimeout time.Duration
	// Settle is how long the watchers keep counting writes after the last round.
	Settle time.Duration
	// SetupTimeout bounds the wait for the systems to settle after the objects are created.
	SetupTimeout time.Duration

	// Operator is the registrar binary (built from ./cmd).
	Operator string
	// OperatorArgs are extra flags for the operator.
	OperatorArgs []string
	// EndpointSlice runs kube-controller-manager's EndpointSlice controller as a peer.
	EndpointSlice bool
	// ControllerManager is the kube-controller-manager binary.
	ControllerManager string
	// KCMArgs are extra flags for kube-controller-manager.
	KCMArgs []string
	// Reconciles is the operator's --max-concurrent-reconciles and kube-controller-manager's
	// --concurrent-service-endpoint-syncs: both controllers get the same number of workers.
	Reconciles int
	// TTLSample is how many pods also run a self-registration TTL instance of each kind
	// (graceful and crashing, disjoint samples; 0: no TTL peer).
	TTLSample int
	// TTL and the keepalive interval (TTL/3, etcd's client default) of the TTL registry.
	TTL time.Duration

	// FaultWatchCut, when set, closes every timing watch this often while the watchers run (the
	// measured phase), as an API server ending a watch or a lost connection would: a watch
	// must resume from the last position it processed and miss nothing.
	FaultWatchCut time.Duration
	// FaultWatchRelist, when set, makes every timing watch this often lose its position, as on
	// 410 Gone (a resourceVersion that left the API server's watch window) or a compacted etcd
	// revision: the watch stops, misses what happens for half the period (at most a second),
	// then lists again. Transitions that fell into that gap are counted unmeasured.
	FaultWatchRelist time.Duration

	// WatcherExe, when set, is the bench command, run with WatcherArg as the process that
	// times every system (see watchproc.go); otherwise the watchers run in the harness process,
	// each on its own connection.
	WatcherExe string
	// MinRateFraction: a run whose achieved write rate is below this fraction of Rate is
	// flagged (Results.Warnings); with RequireRate the run fails.
	MinRateFraction float64
	RequireRate     bool

	// StoreNoFsync runs the store etcd with --unsafe-no-fsync: a diagnostic of how much of
	// registrar's lag is the store's own disk write, never a published comparison (a store
	// that does not fsync loses acknowledged writes on a crash). Runs say so in their warnings.
	StoreNoFsync bool
	// KubeEtcdNoFsync runs the API server's etcd with --unsafe-no-fsync, as envtest does by
	// default; by default the harness turns that off, so that both etcd servers write to disk.
	KubeEtcdNoFsync bool

	// WorkDir holds logs, kubeconfigs and data of this run.
	WorkDir string
	// ProfileDir, when set, receives the operator's CPU profile (ProfileSeconds long, from the
	// start of the measured phase) and heap profile (at its end).
	ProfileDir     string
	ProfileSeconds int
	// Seed makes the transition order reproducible.
	Seed int64
	// Logf receives progress lines.
	Logf func(format string, args ...any)

	// kcmMetrics serves kube-controller-manager's /metrics (the restart benchmark reads it).
	kcmMetrics bool
}

// Defaults fills unset fields.
func (c *Config) Defaults() {
	if c.Pods <= 0 {
		c.Pods = 1000
	}
	if c.Registries <= 0 {
		c.Registries = max(c.Pods/10, 1)
	}
	if c.Namespaces <= 0 {
		c.Namespaces = max(min(c.Registries, 10), 1)
	}
	if c.Nodes <= 0 {
		c.Nodes = 10
	}
	if c.Rate <= 0 {
		c.Rate = 500
	}
	if c.Writers <= 0 {
		c.Writers = 256
	}
	if c.RoundTimeout <= 0 {
		c.RoundTimeout = 2 * time.Minute
	}
	if c.Settle <= 0 {
		c.Settle = 2 * time.Second
	}
	if c.SetupTimeout <= 0 {
		c.SetupTimeout = 5 * time.Minute
	}
	if c.Reconciles <= 0 {
		c.Reconciles = 8
	}
	if c.MinRateFraction <= 0 {
		c.MinRateFraction = 0.9
	}
	if c.TTL <= 0 {
		c.TTL = 15 * time.Second
	}
	if c.ProfileSeconds <= 0 {
		c.ProfileSeconds = 30
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
}

// Validate rejects configurations the harness cannot run.
func (c *Config) Validate() error {
	switch {
	case c.Operator == "":
		return fmt.Errorf("no operator binary: build ./cmd and pass its path")
	case c.EndpointSlice && c.ControllerManager == "":
		return fmt.Errorf("EndpointSlice peer needs the kube-controller-manager binary")
	case c.TransitionsPerRound < 0:
		return fmt.Errorf("transitions per round %d: want 0 (every pod) or more", c.TransitionsPerRound)
	case 2*c.TTLSample > c.flipped():
		return fmt.Errorf("two TTL samples of %d (graceful and crash) need more than the %d pods flipped", c.TTLSample, c.flipped())
	case c.Registries > c.Pods:
		return fmt.Errorf("%d registries for %d pods: every registry needs a pod", c.Registries, c.Pods)
	case c.WorkDir == "":
		return fmt.Errorf("no work directory")
	}
	return nil
}

// flipped is how many pods each round flips.
func (c *Config) flipped() int {
	if c.TransitionsPerRound <= 0 {
		return c.Pods
	}
	return min(c.TransitionsPerRound, c.Pods)
}
