// Package eureka serves registrar's store through Netflix Eureka's REST API, as Spring Cloud
// Netflix's Eureka client (and other Eureka clients) read it: the full registry, the delta of
// recent changes, one application, one instance, the instances of a VIP address. It is
// read-only: registrar registers pods from Kubernetes, so registration, renewal and
// cancellation are refused (docs/eureka.md).
//
// The registry is rebuilt from pkg/discovery's watch of every service (Registry.Apply) into
// an immutable View; each View encodes each response at most once per format (cache.go), so
// a fleet of clients polling every 30 seconds costs one encoding per change, not one per
// request.
package eureka

import (
	"net"
	"path"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/registrar-dev/registrar/pkg/discovery"
)

// Eureka's instance statuses (com.netflix.appinfo.InstanceInfo.InstanceStatus).
const (
	StatusUp           = "UP"
	StatusOutOfService = "OUT_OF_SERVICE"
	StatusUnknown      = "UNKNOWN"
)

// ActionType is an instance's change in a delta (InstanceInfo.ActionType).
type ActionType string

// The action types of a delta.
const (
	Added    ActionType = "ADDED"
	Modified ActionType = "MODIFIED"
	Deleted  ActionType = "DELETED"
)

// Lease defaults of a Eureka client (LeaseInfo): registrar has no lease, the values only
// fill the fields clients expect.
const (
	RenewalIntervalSecs = 30
	LeaseDurationSecs   = 90
)

// httpsPort is the port name of a record's TLS port.
const httpsPort = "https"

// Instance is one Eureka instance (InstanceInfo), derived from one store record.
type Instance struct {
	// ID is "{pod}.{namespace}" ("{cluster}.{pod}.{namespace}" in the shared layout): unique
	// per service, usable in a URL path.
	ID       string
	App      string // upper-case service name
	HostName string // the pod's IP: pod names do not resolve outside the cluster
	IPAddr   string
	// VIPAddress and SecureVIPAddress are the service name, as spring.application.name is.
	VIPAddress, SecureVIPAddress string
	Status                       string

	Port, SecurePort               int32
	PortEnabled, SecurePortEnabled bool

	// Metadata is sorted by key.
	Metadata [][2]string

	HomePageURL, StatusPageURL, HealthCheckURL string

	// RegisteredMillis is when the operator registered the pod; UpdatedMillis when this
	// server saw the record last change (both Unix milliseconds).
	RegisteredMillis, UpdatedMillis int64

	// Action is set in deltas only.
	Action ActionType
}

// Application is one Eureka application: the instances of one service, sorted by ID.
type Application struct {
	Name      string
	Instances []*Instance
}

// AppName is Eureka's name of a service: upper-case, as Eureka's server stores app names.
func AppName(service string) string { return strings.ToUpper(service) }

// InstanceID is the Eureka instance ID of a record: "{last key segment}.{namespace}", that
// is "{pod}.{namespace}", or "{cluster}.{pod}.{namespace}" in the shared layout of several
// clusters (pkg/wire/cluster.go), so two clusters' pods of one name never share an ID. A
// namespace has no dot, so the ID splits back at its last dot.
func InstanceID(in *discovery.Instance) string {
	last := in.Pod
	if in.Key != "" {
		last = path.Base(in.Key)
	}
	return last + "." + in.Namespace
}

// FromInstance is the Eureka instance of a store record; updatedMillis is when its current
// value was first seen.
func FromInstance(in *discovery.Instance, updatedMillis int64) *Instance {
	port, portOK := mainPort(in.Ports)
	secure, secureOK := in.Ports[httpsPort]
	if !secureOK {
		secure = 443
	}
	out := &Instance{
		ID: InstanceID(in), App: AppName(in.Service), HostName: in.Address, IPAddr: in.Address,
		VIPAddress: in.Service, SecureVIPAddress: in.Service, Status: StatusUp,
		Port: port, PortEnabled: portOK, SecurePort: secure, SecurePortEnabled: secureOK,
		UpdatedMillis: updatedMillis,
	}
	if !in.RegisteredAt.IsZero() {
		out.RegisteredMillis = in.RegisteredAt.UnixMilli()
	} else {
		out.RegisteredMillis = updatedMillis
	}
	md := [][2]string{{"namespace", in.Namespace}, {"pod", in.Pod}}
	for k, v := range map[string]string{"zone": in.Zone, "cluster": in.Cluster, "node": in.Node} {
		if v != "" {
			md = append(md, [2]string{k, v})
		}
	}
	if in.Weight != 0 {
		md = append(md, [2]string{"weight", strconv.Itoa(int(in.EffectiveWeight()))})
	}
	for name, p := range in.Ports {
		md = append(md, [2]string{"port." + name, strconv.Itoa(int(p))})
	}
	slices.SortFunc(md, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	out.Metadata = md
	scheme, hp := "http", net.JoinHostPort(in.Address, strconv.Itoa(int(port)))
	if !portOK && secureOK {
		scheme, hp = httpsPort, net.JoinHostPort(in.Address, strconv.Itoa(int(secure)))
	}
	base := scheme + "://" + hp
	out.HomePageURL, out.StatusPageURL, out.HealthCheckURL = base+"/", base+"/actuator/info", base+"/actuator/health"
	return out
}

// mainPort is the port a Eureka client calls: the one named "http", else the only one, else
// the first by name other than "https". ok is false when the record has no such port.
func mainPort(ports map[string]int32) (int32, bool) {
	if p, ok := ports["http"]; ok {
		return p, true
	}
	names := make([]string, 0, len(ports))
	for name := range ports {
		if name != httpsPort || len(ports) == 1 {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return 0, false
	}
	slices.Sort(names)
	if names[0] == httpsPort { // the only port is https: no plain port
		return 0, false
	}
	return ports[names[0]], true
}

// equalValue reports whether two instances show the same thing to a client (the update
// time aside): a rewrite of an unchanged record is no change.
func equalValue(a, b *Instance) bool {
	x, y := *a, *b
	x.UpdatedMillis, y.UpdatedMillis, x.Action, y.Action = 0, 0, "", ""
	return reflect.DeepEqual(x, y)
}

// HashCode is Eureka's reconcile hash code of a set of instances
// (Applications.getReconcileHashCode): for each status, in the alphabetical order of its
// name, "{STATUS}_{count}_"; "" for none. A client recomputes it over its local copy after
// applying a delta and fetches the full registry when it differs.
func HashCode(counts map[string]int) string {
	names := make([]string, 0, len(counts))
	for s, n := range counts {
		if n > 0 {
			names = append(names, s)
		}
	}
	slices.Sort(names)
	var b strings.Builder
	for _, s := range names {
		b.WriteString(s)
		b.WriteByte('_')
		b.WriteString(strconv.Itoa(counts[s]))
		b.WriteByte('_')
	}
	return b.String()
}

// statusCounts counts the instances of apps by status.
func statusCounts(apps []*Application) map[string]int {
	counts := map[string]int{}
	for _, app := range apps {
		for _, inst := range app.Instances {
			counts[inst.Status]++
		}
	}
	return counts
}
