package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Names on pods and Deployments that users and other tools see.
const (
	// AnnotationInjected is set by the pod webhook on pods it mutated (value: drain seconds),
	// which makes injection idempotent.
	AnnotationInjected = "registrar.dev/injected"

	// Deployment annotations (opt-in sugar): AnnotationService makes the operator own a
	// ServiceRegistry for the Deployment; the others fill its spec.
	AnnotationService        = "registrar.dev/service"         // on a Deployment: the service name in the store (spec.serviceName); the registry selects the Deployment's pods
	AnnotationPort           = "registrar.dev/port"            // on a Deployment: a port number (published as "http") or a container port name (spec.ports)
	AnnotationWarmupPaths    = "registrar.dev/warmup-paths"    // on a Deployment: comma-separated HTTP paths requested during warm-up (spec.warmup.paths); needs registrar.dev/port
	AnnotationWarmupRequests = "registrar.dev/warmup-requests" // on a Deployment: warm-up requests per pod, 1 to 10000 (spec.warmup.requests); needs registrar.dev/warmup-paths
	AnnotationDrainSeconds   = "registrar.dev/drain-seconds"   // on a Deployment: the preStop sleep in seconds, 0 to 3600 (spec.drain.seconds)

	// AnnotationConfigError, on a ServiceRegistry generated from a Deployment, carries the
	// problems found in the Deployment's annotations; it is reported as Configured=False.
	AnnotationConfigError = "registrar.dev/config-error"
	// LabelDeployment names the Deployment a generated ServiceRegistry belongs to.
	LabelDeployment = "registrar.dev/deployment"
)

// EndpointState is the lifecycle state of one pod as seen by registrar.
// +kubebuilder:validation:Enum=Pending;WarmingUp;Registered;Unready;Draining
type EndpointState string

// Endpoint states, in the order a pod normally passes through them.
const (
	// EndpointPending: the pod matches but is not yet eligible (no IP, not running, or not yet written).
	EndpointPending EndpointState = "Pending"
	// EndpointWarmingUp: the pod is ready and warm-up requests are in flight.
	EndpointWarmingUp EndpointState = "WarmingUp"
	// EndpointRegistered: the endpoint is in the store.
	EndpointRegistered EndpointState = "Registered"
	// EndpointUnready: the pod's containers are not ready, or the pod has finished.
	EndpointUnready EndpointState = "Unready"
	// EndpointDraining: the pod is terminating; its endpoint has left the store.
	EndpointDraining EndpointState = "Draining"
)

// WarmupFailurePolicy says what happens when warm-up requests do not succeed in time.
// +kubebuilder:validation:Enum=Block;Proceed
type WarmupFailurePolicy string

const (
	// WarmupBlock keeps the readiness gate False and reports the failure.
	WarmupBlock WarmupFailurePolicy = "Block"
	// WarmupProceed registers the endpoint after the warm-up timeout and records a Warning event.
	WarmupProceed WarmupFailurePolicy = "Proceed"
)

// ServicePort names one port published for each endpoint. Exactly one of port and
// targetPort is set.
// +kubebuilder:validation:XValidation:rule="has(self.port) != has(self.targetPort)",message="exactly one of port or targetPort must be set"
type ServicePort struct {
	// name is the key of this port in the endpoint's "ports" map in the store.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Name string `json:"name,omitempty"`

	// port is a literal port number on the pod IP.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`

	// targetPort is the name of a container port of the pod; it is resolved per pod.
	// A pod without a container port of that name is not registered.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	TargetPort string `json:"targetPort,omitempty"`
}

// WarmupSpec describes the synthetic requests sent to a pod before it is registered.
// It is acted on for pods that carry the registrar.dev/ready readiness gate.
// +kubebuilder:validation:XValidation:rule="!has(self.minDurationMillis) || !has(self.timeoutMillis) || self.minDurationMillis <= self.timeoutMillis",message="minDurationMillis must not be longer than timeoutMillis",fieldPath=".minDurationMillis"
type WarmupSpec struct {
	// paths are the HTTP paths requested on the pod during warm-up, in turn. Each starts
	// with "/" and holds no space or control character (escape them, e.g. %20).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Pattern=`^/[^\x00-\x20\x7f]*$`
	// +kubebuilder:validation:items:MaxLength=1024
	// +listType=atomic
	// +required
	Paths []string `json:"paths,omitempty"`

	// requests is the total number of warm-up requests sent to each pod.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +default=10
	// +optional
	Requests int32 `json:"requests,omitempty"`

	// concurrency is the number of warm-up requests in flight at once for one pod.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +default=2
	// +optional
	Concurrency int32 `json:"concurrency,omitempty"`

	// port names the entry of spec.ports that warm-up requests go to; the first by default.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Port string `json:"port,omitempty"`

	// timeoutMillis bounds the whole warm-up of one pod, in milliseconds (e.g. 30000 for
	// 30 s), from 100 ms to 1 h. onFailure applies when the requests have not all succeeded
	// by then. Milliseconds rather than seconds: the warm-up of an in-process cache can take
	// well under a second, and a sub-second bound (v1alpha1 accepted "500ms") keeps its
	// meaning.
	// +kubebuilder:validation:Minimum=100
	// +kubebuilder:validation:Maximum=3600000
	// +default=30000
	// +optional
	TimeoutMillis int32 `json:"timeoutMillis,omitempty"`

	// requestTimeoutMillis bounds each warm-up request, in milliseconds, from 10 ms to 5 min.
	// Milliseconds: a request to a pod's local endpoint answers in milliseconds, and its
	// bound is typically below a second.
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=300000
	// +default=2000
	// +optional
	RequestTimeoutMillis int32 `json:"requestTimeoutMillis,omitempty"`

	// minDurationMillis is the least time a warm-up lasts, in milliseconds, even when
	// requests finish sooner (at most 1 h, and at most timeoutMillis). 0 and unset mean no
	// minimum. Milliseconds: it paces short warm-ups (e.g. 300 ms), where whole seconds
	// would be too coarse.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600000
	// +optional
	MinDurationMillis *int32 `json:"minDurationMillis,omitempty"`

	// onFailure says what to do when warm-up does not succeed within timeoutMillis.
	// +default="Block"
	// +optional
	OnFailure WarmupFailurePolicy `json:"onFailure,omitempty"`
}

// DrainSpec describes how long a terminating pod keeps serving after it left the store.
type DrainSpec struct {
	// seconds is the length of the injected preStop sleep. It must cover the slowest
	// caller's staleness: its cache TTL plus registrar's deregistration lag. 0 (no drain)
	// is valid; unset means the default, 15.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	// +default=15
	// +optional
	Seconds *int32 `json:"seconds,omitempty"`

	// callerCacheSeconds is how long the slowest caller may keep using a stale endpoint list
	// (its cache TTL). Defaults to the operator's --caller-cache-seconds. registrar warns
	// (DrainSufficient=False) when seconds is shorter than this plus its measured lag.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	// +optional
	CallerCacheSeconds *int32 `json:"callerCacheSeconds,omitempty"`
}

// SlowStartSpec ramps a newly registered endpoint's weight up from minWeightPercent to full
// over windowSeconds (Envoy's slow_start_config, linear), in at most 10 steps, each one a rewrite of
// the endpoint's store value (its "weight" field) and of its xDS load_balancing_weight.
type SlowStartSpec struct {
	// windowSeconds is how long after its registration an endpoint ramps up to full weight,
	// in seconds (e.g. 60), from 1 to 3600. Seconds suffice: the ramp moves in at most 10
	// steps. Keep it short for large scale-outs: while many new endpoints ramp, the
	// established ones take the rest of the traffic.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	// +required
	WindowSeconds int32 `json:"windowSeconds,omitempty"`

	// minWeightPercent is an endpoint's weight at registration, in percent of full weight
	// (1 to 99; never 0: gRPC rejects endpoints of weight 0).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=99
	// +default=10
	// +optional
	MinWeightPercent int32 `json:"minWeightPercent,omitempty"`
}

// InjectionSpec controls the pod mutating webhook for pods this registry selects.
type InjectionSpec struct {
	// enabled makes the webhook add the registrar.dev/ready readiness gate and the
	// preStop sleep to matching pods when they are created.
	// +default=false
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
}

// ServiceRegistrySpec is the desired publication of a set of pods into the store.
// +kubebuilder:validation:XValidation:rule="!has(self.ports) || self.ports.all(p, self.ports.exists_one(q, q.name == p.name))",message="ports[].name must be unique",fieldPath=".ports"
// +kubebuilder:validation:XValidation:rule="!has(self.warmup) || (has(self.ports) && size(self.ports) > 0)",message="warmup needs at least one entry in ports to send requests to",fieldPath=".warmup"
// +kubebuilder:validation:XValidation:rule="!has(self.warmup) || !has(self.warmup.port) || (has(self.ports) && self.ports.exists(p, p.name == self.warmup.port))",message="warmup.port must name an entry of ports",fieldPath=".warmup.port"
// +kubebuilder:validation:XValidation:rule="has(self.stores) == has(oldSelf.stores) && (!has(self.stores) || self.stores == oldSelf.stores)",message="stores cannot change after creation: create a new ServiceRegistry to publish elsewhere",fieldPath=".stores"
type ServiceRegistrySpec struct {
	// serviceName is the logical service name in the store (a DNS-1123 label).
	// Defaults to metadata.name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	ServiceName string `json:"serviceName,omitempty"`

	// selector chooses the pods, in the registry's namespace, whose endpoints are published.
	// It must not be empty: an empty selector would publish every pod of the namespace. The
	// API server rejects an unknown operator, and In/NotIn without values or Exists/DoesNotExist
	// with values. A selector Kubernetes still cannot parse (a malformed label key or value:
	// checking those in CEL exceeds the API server's cost budget) is reported as
	// InvalidSelector, and the registry then keeps only those of its endpoints whose pods
	// are still eligible, registering no new one.
	// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",message="selector must not be empty"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="matchExpressions[].operator must be In, NotIn, Exists or DoesNotExist"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, (e.operator in ['In', 'NotIn']) == (has(e.values) && size(e.values) > 0))",message="matchExpressions[]: In and NotIn need at least one value, Exists and DoesNotExist take none"
	// +required
	Selector metav1.LabelSelector `json:"selector"`

	// ports are published for each endpoint, by name.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	Ports []ServicePort `json:"ports,omitempty"`

	// warmup warms gated pods up before they are registered; unset, there is no warm-up.
	// +optional
	Warmup *WarmupSpec `json:"warmup,omitempty"`

	// drain sets the preStop sleep of injected pods.
	// +optional
	Drain *DrainSpec `json:"drain,omitempty"`

	// slowStart ramps each newly registered endpoint's weight up over a window, when set
	// (store value "weight", xDS load_balancing_weight), so a new pod is not handed its full
	// share of requests at once.
	// +optional
	SlowStart *SlowStartSpec `json:"slowStart,omitempty"`

	// injection controls the pod webhook for matching pods.
	// +optional
	Injection *InjectionSpec `json:"injection,omitempty"`

	// stores names the stores of the installation (its --stores flag) that the endpoints are
	// published to, e.g. [etcd, coredns]; unset means the installation's default stores. A
	// store the installation does not configure is reported in StoreSynced. It cannot change
	// after creation (the records in a dropped store would be orphaned).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=3
	// +kubebuilder:validation:items:Enum=etcd;coredns;zookeeper
	// +listType=set
	// +optional
	Stores []string `json:"stores,omitempty"`

	// dns configures the records of the coredns store.
	// +optional
	DNS *DNSSpec `json:"dns,omitempty"`

	// sharing lets registries of other namespaces publish under this registry's service
	// name. A service name belongs to one namespace: that of its oldest ServiceRegistry
	// (docs/security.md, "Tenancy"). A registry of another namespace with the same name is
	// refused (Ready=False, reason ServiceNameOwnedElsewhere) unless a registry of the
	// owning namespace lists that namespace here. Ignored on a registry of a namespace that
	// does not own the name, and when the operator runs with --service-name-tenancy=shared.
	// +optional
	Sharing *SharingSpec `json:"sharing,omitempty"`
}

// SharingSpec names the namespaces allowed to publish under a service name the registry's
// namespace owns.
type SharingSpec struct {
	// namespaces are the names of the namespaces whose ServiceRegistries may publish under
	// this service name too; "*" allows every namespace.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^(\*|[a-z0-9]([-a-z0-9]*[a-z0-9])?)$`
	// +kubebuilder:validation:XValidation:rule="!self.exists(n, n == '*') || size(self) == 1",message="\"*\" shares with every namespace and must be the only entry"
	// +listType=set
	// +required
	Namespaces []string `json:"namespaces,omitempty"`
}

// DNSSpec configures the DNS records of a service.
type DNSSpec struct {
	// ttlSeconds is the TTL of the service's records. Resolvers may hand out a deregistered
	// address for this long, so drain.callerCacheSeconds should cover it. Defaults to the
	// installation's --coredns-ttl (5 s).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	// +optional
	TTLSeconds int32 `json:"ttlSeconds,omitempty"`
}

// StoreStatus is the state of one store the endpoints are published to.
type StoreStatus struct {
	// name is the store, as named in spec.stores or the installation's --stores.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Name string `json:"name,omitempty"`
	// registered is the number of this registry's endpoints in the store (always written: 0 is a count).
	// +kubebuilder:validation:Minimum=0
	// +required
	Registered int32 `json:"registered"`
	// synced is false while the last read or write of the store failed (always written).
	// +required
	Synced bool `json:"synced"`
	// message is the last error of the store, when it is not synced.
	// +kubebuilder:validation:MinLength=1
	// +optional
	Message string `json:"message,omitempty"`
}

// EndpointStatus is what registrar knows of one selected pod.
type EndpointStatus struct {
	// pod is the pod's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Pod string `json:"pod,omitempty"`
	// uid is the pod's UID.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +optional
	UID string `json:"uid,omitempty"`
	// ip is the pod's IP, when it has one.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=45
	// +optional
	IP string `json:"ip,omitempty"`
	// state is the pod's endpoint state.
	// +required
	State EndpointState `json:"state,omitempty"`
	// reason says why the pod is in this state, in CamelCase.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +optional
	Reason string `json:"reason,omitempty"`
	// since is when the pod entered this state, as far as registrar observed.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
	// drainUntil is, for a Draining pod, when its preStop sleep ends: until then it keeps
	// serving callers whose caches still hold it.
	// +optional
	DrainUntil *metav1.Time `json:"drainUntil,omitempty"`
}

// DrainStatus is registrar's advice on the drain length.
type DrainStatus struct {
	// seconds is the configured drain (spec.drain.seconds; always written, 0 is no drain).
	// +required
	Seconds int32 `json:"seconds"`
	// callerCacheSeconds is the callers' staleness used in the advice (always written).
	// +required
	CallerCacheSeconds int32 `json:"callerCacheSeconds"`
	// deregistrationLagMillis is the slowest deregistration registrar measured recently:
	// from the pod change to the store acknowledging the delete. Unset while none was
	// measured (or it rounded to 0).
	// +kubebuilder:validation:Minimum=0
	// +optional
	DeregistrationLagMillis *int64 `json:"deregistrationLagMillis,omitempty"`
	// xdsPushLagMillis is the slowest push to an xDS client registrar measured recently for
	// this registry (only with the xDS server on): from the change entering the xDS cache
	// to the client's ACK. xDS clients keep no cache: they stop sending new requests to a
	// terminating pod this long after its deregistration. Unset while none was measured.
	// +kubebuilder:validation:Minimum=0
	// +optional
	XDSPushLagMillis *int64 `json:"xdsPushLagMillis,omitempty"`
	// recommendedSeconds = the measured deregistration lag + the longer of callerCacheSeconds
	// and the xDS push lag, rounded up: the shortest drain that keeps every caller's copy of
	// a terminating pod (cached, or pushed over xDS) serving (always written).
	// +required
	RecommendedSeconds int32 `json:"recommendedSeconds"`
}

// ServiceRegistryStatus is the observed state of a ServiceRegistry.
type ServiceRegistryStatus struct {
	// conditions are Ready, StoreSynced, DrainSufficient, Configured (for registries
	// generated from a Deployment), PodsInjected (for registries with injection enabled),
	// and Reconciling or Stalled while either is True.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation this status describes: the conditions say
	// whether that generation has been fully applied (Ready) or why not (Reconciling, Stalled).
	// +kubebuilder:validation:Minimum=1
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// serviceName is the resolved service name used in the store.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +optional
	ServiceName string `json:"serviceName,omitempty"`

	// The counters below are always written (no omitempty): 0 is a count, and the printer
	// columns show it.

	// desired is the number of selected pods that are eligible for registration.
	// +optional
	Desired int32 `json:"desired"`
	// registered is the number of this registry's endpoints present in the store.
	// +optional
	Registered int32 `json:"registered"`
	// warming is the number of pods being warmed up.
	// +optional
	Warming int32 `json:"warming"`
	// draining is the number of terminating pods.
	// +optional
	Draining int32 `json:"draining"`

	// drain says how long terminating pods keep serving and how long they should.
	// +optional
	Drain *DrainStatus `json:"drain,omitempty"`

	// stores reports each store the endpoints are published to (when the installation
	// publishes to several, or spec.stores names them).
	// +listType=map
	// +listMapKey=name
	// +optional
	Stores []StoreStatus `json:"stores,omitempty"`

	// endpoints lists the selected pods, sorted by name (at most 256 entries).
	// +listType=atomic
	// +optional
	Endpoints []EndpointStatus `json:"endpoints,omitempty"`
}

// ServiceRegistry publishes the endpoints of ready, warmed-up, non-terminating pods
// into an external service registry store.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sreg,categories=registrar
// +kubebuilder:validation:XValidation:rule="has(self.spec.serviceName) || (size(self.metadata.name) <= 63 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'))",message="spec.serviceName is required when metadata.name is not a DNS-1123 label",fieldPath=".spec.serviceName"
// +kubebuilder:printcolumn:name="Service",type=string,JSONPath=`.status.serviceName`
// +kubebuilder:printcolumn:name="Registered",type=integer,JSONPath=`.status.registered`
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.status.desired`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ServiceRegistry struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired publication.
	// +required
	Spec ServiceRegistrySpec `json:"spec"`

	// status is the observed publication.
	// +optional
	Status ServiceRegistryStatus `json:"status"` // always serialized, as it was with omitempty (encoding/json never omits a struct)
}

// ResolvedServiceName is spec.serviceName, or metadata.name when it is empty.
func (r *ServiceRegistry) ResolvedServiceName() string {
	if r.Spec.ServiceName != "" {
		return r.Spec.ServiceName
	}
	return r.Name
}

// ServiceRegistryList is a list of ServiceRegistry.
// +kubebuilder:object:root=true
type ServiceRegistryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ServiceRegistry `json:"items"`
}
