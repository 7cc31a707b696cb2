// Package publish is the narrow interface between the ServiceRegistry reconciler and the
// sinks that follow its decisions besides the store (the xDS server, internal/xds). A sink
// receives, at the end of every reconcile, the verdict the reconcile reached on every pod the
// registry selects: the same verdicts that planned the store's writes, so there is no second
// code path that could disagree with the store.
package publish

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/pkg/wire"
)

// Pod is one selected pod with the reconcile's verdict on it.
type Pod struct {
	Name string
	// State is the verdict: Registered pods are in the store; WarmingUp, Pending and Unready
	// pods are not; Draining pods are terminating (they left the store).
	State v1beta1.EndpointState
	// Endpoint is the store value of a Registered pod (also set for WarmingUp pods, whose
	// ports serve the warm-up); zero otherwise. Its Weight is the slow-start weight (0:
	// none, full weight).
	Endpoint wire.Endpoint
}

// Registry is what one reconcile decided for one ServiceRegistry.
type Registry struct {
	// Key names the ServiceRegistry; UID tells a recreated one from its predecessor.
	Key types.NamespacedName
	UID types.UID
	// Service is the resolved service name (spec.serviceName or metadata.name).
	Service string
	// Ports are the names of spec.ports, in spec order.
	Ports []string
	// Pods are all selected pods with their verdicts.
	Pods []Pod
	// Hold is set when the reconcile decided nothing about pods (invalid selector): the
	// sink keeps what it published before (as the store keeps its records).
	Hold bool
}

// Result is a sink's answer to Publish, reported in the registry's status.
type Result struct {
	// Reason (CamelCase) says why the registry is not published; empty when it is.
	Reason string
	// Message explains the outcome to a person (where it is served, or what to fix).
	Message string
}

// OK reports whether the registry was published.
func (r Result) OK() bool { return r.Reason == "" }

// Publisher is a sink of reconcile decisions.
type Publisher interface {
	// Publish replaces what is published for the registry. It must not block on clients.
	Publish(Registry) Result
	// Unpublish removes everything published for the registry (it is deleted or being
	// deleted).
	Unpublish(types.NamespacedName)
}

// LagReporter is a Publisher that measures how late its clients follow: the drain advice
// takes it into account (xDS clients stop new requests to a terminating pod only once the
// push reached them).
type LagReporter interface {
	// PushLag is the slowest recent push of the registry's endpoints to a client (from
	// Publish to the client's acknowledgement); 0 when none was measured.
	PushLag(types.NamespacedName) time.Duration
}

// AckWaiter is a Publisher whose clients acknowledge what they receive: a readiness gate
// can wait until the clients have a new pod before it opens.
type AckWaiter interface {
	// Acknowledged reports whether every connected client subscribed to the registry has
	// acknowledged pod as usable (and how many have not); true when nothing is waiting, and
	// once timeout passed since the pod was first published.
	Acknowledged(key types.NamespacedName, pod string, timeout time.Duration) (bool, int)
}
