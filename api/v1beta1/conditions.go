package v1beta1

// This file is registrar's vocabulary: the condition types a ServiceRegistry reports, their
// reasons, the reasons of the pod readiness gate and of status.endpoints, the reasons of the
// Events registrar records, and the defaults more than one component applies. Every
// component uses these constants; `make docs` renders them into docs/reference.md.
//
// Conventions (as in cluster-api): a condition's doc says what True, False and Unknown mean;
// a reason's doc ends with a "Used by:" line naming the conditions (and other places) that
// carry it. Reasons are CamelCase; messages are for people and say what to do.

// Condition types reported in ServiceRegistryStatus.Conditions.
const (
	// ConditionReady reports whether every store of the registry holds exactly the endpoints
	// of its eligible pods.
	//
	//   - True (AllRegistered): every eligible pod is registered.
	//   - False: some eligible pod is not registered yet, or cannot be; the reason says why
	//     and the message names the pods.
	//   - Unknown: not used.
	ConditionReady = "Ready"

	// ConditionStoreSynced reports whether the last write to (or listing of) the store
	// succeeded.
	//
	//   - True (Synced): the store answered and holds what registrar wrote.
	//   - False (StoreUnreachable): a store call failed; registrar retries with backoff and
	//     deletes nothing because of the outage. The message carries the store's error and,
	//     with several stores, names the failing one.
	//   - Unknown: not used.
	ConditionStoreSynced = "StoreSynced"

	// ConditionDrainSufficient reports whether spec.drain.seconds covers the callers'
	// staleness: their cache TTL plus registrar's measured deregistration lag.
	//
	//   - True (DrainCoversCallers): terminating pods keep serving long enough.
	//   - False (DrainTooShort): raise spec.drain.seconds to status.drain.recommendedSeconds.
	//   - Unknown: not used.
	ConditionDrainSufficient = "DrainSufficient"

	// ConditionConfigured, on a ServiceRegistry generated from a Deployment's annotations,
	// reports whether those annotations could be parsed. Absent on hand-written registries.
	//
	//   - True (AnnotationsValid): every registrar.dev/ annotation is valid.
	//   - False (InvalidAnnotation): some are not; the valid ones still apply, the message
	//     names the others.
	//   - Unknown: not used.
	ConditionConfigured = "Configured"

	// ConditionReconciling is the kstatus (sigs.k8s.io/cli-utils) "abnormal-true" condition
	// GitOps tools read as "in progress": present only while True.
	//
	//   - True (WarmingUp, NotInStore, StoreUnreachable for the first 2 minutes of an
	//     outage): the registry is converging.
	//   - False, Unknown: not used; the condition is removed instead.
	ConditionReconciling = "Reconciling"

	// ConditionStalled is the kstatus "abnormal-true" condition GitOps tools read as
	// "failed": present only while True.
	//
	//   - True (InvalidSelector, KeyConflict, ServiceNameOwnedElsewhere, InvalidAnnotation,
	//     StoreUnreachable after 2 minutes): the registry cannot converge without a change by
	//     a person.
	//   - False, Unknown: not used; the condition is removed instead.
	ConditionStalled = "Stalled"

	// ConditionPodsInjected, on a registry with spec.injection.enabled, reports whether
	// every selected pod went through registrar's webhook. Absent without injection.
	//
	//   - True (AllPodsInjected): every selected pod carries the readiness gate and the
	//     preStop drain.
	//   - False (PodsNotInjected): some pods were admitted while the webhook was unreachable
	//     (its failurePolicy is Ignore) or predate the registry; they register without
	//     warm-up and exit without a drain. Restart their rollout once the webhook is up.
	//   - Unknown: not used.
	ConditionPodsInjected = "PodsInjected"

	// ConditionXDSPublished reports whether the registry is served over xDS. Present only
	// when the operator runs an xDS server (--xds-bind-address).
	//
	//   - True (Published): its endpoints are in the xDS caches.
	//   - False (InvalidXDSResourceName, XDSResourceNameConflict, NoPorts, XDSBuildFailed):
	//     it is not served; the message says why.
	//   - Unknown: not used.
	ConditionXDSPublished = "XDSPublished"

	// ConditionStoreHealthy reports the health of the stores the registry publishes to, as
	// registrar's self-monitoring sees them (issue 19): the etcd cluster's consensus and
	// storage layers, and the canary that writes a synthetic endpoint and reads it back
	// through the callers' path. The same verdict for every registry of a store; the
	// operator-wide summary is the metric registrar_store_healthy. Absent until the first
	// probe, and for stores registrar does not monitor (ZooKeeper).
	//
	//   - True (StoreHealthy): leader present, quorum held with a member to spare (or a
	//     single member), no alarm, database below 95% of its quota, canary succeeding.
	//   - False (StoreUnreachable, QuorumLost, NoLeader, StoreAlarm, CanaryFailing,
	//     QuorumAtRisk, DatabaseNearQuota): the message names the store and what to do.
	//   - Unknown: not used.
	ConditionStoreHealthy = "StoreHealthy"
)

// Reasons of the StoreHealthy condition (besides StoreUnreachable).
const (
	// ReasonStoreHealthy: the store's cluster and canary are healthy.
	// Used by: StoreHealthy.
	ReasonStoreHealthy = "StoreHealthy"
	// ReasonQuorumLost: fewer etcd members answer than quorum needs; writes fail until
	// members return.
	// Used by: StoreHealthy.
	ReasonQuorumLost = "QuorumLost"
	// ReasonNoLeader: no etcd member reports a leader; writes wait for an election.
	// Used by: StoreHealthy.
	ReasonNoLeader = "NoLeader"
	// ReasonStoreAlarm: an etcd alarm (NOSPACE, CORRUPT) is raised; with NOSPACE every
	// write is refused until the database is compacted, defragmented and the alarm disarmed.
	// Used by: StoreHealthy.
	ReasonStoreAlarm = "StoreAlarm"
	// ReasonCanaryFailing: consecutive canary rounds failed: a synthetic endpoint was not
	// written, or not seen through the callers' path in time; callers may not see changes.
	// Used by: StoreHealthy.
	ReasonCanaryFailing = "CanaryFailing"
	// ReasonQuorumAtRisk: a member of a multi-member etcd cluster is down and one more
	// failure would lose quorum; restore the member.
	// Used by: StoreHealthy.
	ReasonQuorumAtRisk = "QuorumAtRisk"
	// ReasonDatabaseNearQuota: the etcd database is above 95% of its quota; compact and
	// defragment, or raise the quota.
	// Used by: StoreHealthy.
	ReasonDatabaseNearQuota = "DatabaseNearQuota"
)

// Reasons of the ServiceRegistry's conditions and of status.endpoints[].reason.
const (
	// ReasonAllRegistered: every eligible pod's endpoint is in the store.
	// Used by: Ready.
	ReasonAllRegistered = "AllRegistered"
	// ReasonNotInStore: eligible pods are not in the store yet (the write is under way).
	// Used by: Ready, Reconciling, status.endpoints.
	ReasonNotInStore = "NotInStore"
	// ReasonStoreNotSynced: the store could not be updated; see StoreSynced.
	// Used by: Ready.
	ReasonStoreNotSynced = "StoreNotSynced"
	// ReasonKeyConflict: the store keys of some pods are owned by another ServiceRegistry or
	// installation; give this registry a distinct spec.serviceName.
	// Used by: Ready, Stalled, status.endpoints.
	ReasonKeyConflict = "KeyConflict"
	// ReasonServiceNameOwnedElsewhere: the registry's service name belongs to another
	// namespace (that of the name's oldest ServiceRegistry, named in the message), which
	// does not share it with this one (spec.sharing.namespaces): the registry publishes
	// nothing, and its records are removed from the stores (docs/security.md, "Tenancy").
	// Also the Warning Event on the registry.
	// Used by: Ready, Stalled, status.endpoints, readiness gate, Events.
	ReasonServiceNameOwnedElsewhere = "ServiceNameOwnedElsewhere"
	// ReasonSelectorOverlap: an older ServiceRegistry of the same service and namespace also
	// selects some of this registry's pods; it publishes them, this one leaves them alone.
	// Used by: Ready, status.endpoints.
	ReasonSelectorOverlap = "SelectorOverlap"
	// ReasonNamedPortMissing: a spec.ports[].targetPort names no container port of the pod,
	// which is not registered.
	// Used by: Ready, status.endpoints.
	ReasonNamedPortMissing = "NamedPortMissing"
	// ReasonInvalidSelector: spec.selector cannot be used (unparsable, or selects every
	// pod); no new pod is registered and only still-eligible endpoints are kept.
	// Used by: Ready, Stalled, status.endpoints.
	ReasonInvalidSelector = "InvalidSelector"
	// ReasonSynced: the store answered and holds what registrar wrote.
	// Used by: StoreSynced.
	ReasonSynced = "Synced"
	// ReasonStoreUnreachable: a store call failed (down, unreachable, timed out, refused).
	// Also the reason of the Warning Event when deletion waits for the store.
	// Used by: StoreSynced, StoreHealthy, Reconciling, Stalled, Events.
	ReasonStoreUnreachable = "StoreUnreachable"
	// ReasonClusterIdentityClash: the store is shared by several clusters (--store-shared)
	// and this cluster's ID is claimed by another installation (its write fence names it),
	// or the prefix is laid out for one cluster only: nothing is written until each cluster
	// has its own --cluster-id (docs/multicluster.md).
	// Used by: StoreSynced, Events.
	ReasonClusterIdentityClash = "ClusterIdentityClash"
	// ReasonDrainCoversCallers: spec.drain.seconds covers the callers' staleness.
	// Used by: DrainSufficient.
	ReasonDrainCoversCallers = "DrainCoversCallers"
	// ReasonDrainTooShort: spec.drain.seconds is shorter than the callers' cache TTL plus
	// the measured deregistration lag.
	// Used by: DrainSufficient.
	ReasonDrainTooShort = "DrainTooShort"
	// ReasonAnnotationsValid: the Deployment's registrar.dev/ annotations are valid.
	// Used by: Configured.
	ReasonAnnotationsValid = "AnnotationsValid"
	// ReasonInvalidAnnotation: a registrar.dev/ annotation of the Deployment could not be
	// parsed (also the Warning Event on the Deployment).
	// Used by: Configured, Stalled, Events.
	ReasonInvalidAnnotation = "InvalidAnnotation"
	// ReasonWarmingUp: pods are warming up before they are registered.
	// Used by: Reconciling, status.endpoints.
	ReasonWarmingUp = "WarmingUp"
	// ReasonContainerRestarted: a container of the pod restarted after its warm-up (a
	// SIGKILL or OOM kill the kubelet recovered from, possibly before the API server ever
	// showed the pod not ready): the new process is warmed up again before it is registered.
	// Used by: status.endpoints, Deregistered Event.
	ReasonContainerRestarted = "ContainerRestarted"
	// ReasonWarmedUp: the pod finished its warm-up and is registered.
	// Used by: status.endpoints.
	ReasonWarmedUp = "WarmedUp"
	// ReasonWarmupFailed: the pod's warm-up failed under onFailure: Block; delete the pod to
	// try again.
	// Used by: status.endpoints.
	ReasonWarmupFailed = "WarmupFailed"
	// ReasonAllPodsInjected: every selected pod went through the webhook.
	// Used by: PodsInjected.
	ReasonAllPodsInjected = "AllPodsInjected"
	// ReasonPodsNotInjected: some selected pods lack the readiness gate or the preStop drain.
	// Used by: PodsInjected.
	ReasonPodsNotInjected = "PodsNotInjected"
	// ReasonXDSPublished: the registry's endpoints are in the xDS caches.
	// Used by: XDSPublished.
	ReasonXDSPublished = "Published"
	// ReasonInvalidXDSResourceName: the registry's service name cannot name an xDS resource.
	// Used by: XDSPublished.
	ReasonInvalidXDSResourceName = "InvalidXDSResourceName"
	// ReasonXDSResourceNameConflict: another registry already serves the same xDS resource
	// name.
	// Used by: XDSPublished.
	ReasonXDSResourceNameConflict = "XDSResourceNameConflict"
	// ReasonNoPorts: spec.ports is empty, so there is no port to publish over xDS.
	// Used by: XDSPublished.
	ReasonNoPorts = "NoPorts"
	// ReasonXDSBuildFailed: the xDS resources of the registry could not be built.
	// Used by: XDSPublished.
	ReasonXDSBuildFailed = "XDSBuildFailed"

	// ReasonPodTerminating: the pod's deletion has started (it drains).
	// Used by: status.endpoints, Deregistered Event.
	ReasonPodTerminating = "PodTerminating"
	// ReasonPodFailed: the pod's phase is Failed.
	// Used by: status.endpoints, Deregistered Event.
	ReasonPodFailed = "PodFailed"
	// ReasonPodSucceeded: the pod's phase is Succeeded.
	// Used by: status.endpoints, Deregistered Event.
	ReasonPodSucceeded = "PodSucceeded"
	// ReasonPodPhaseUnknown: the pod's phase is Unknown.
	// Used by: status.endpoints, Deregistered Event.
	ReasonPodPhaseUnknown = "PodPhaseUnknown"
	// ReasonPodNotRunning: the pod is not running yet.
	// Used by: status.endpoints.
	ReasonPodNotRunning = "PodNotRunning"
	// ReasonNoPodIP: the pod has no IP yet.
	// Used by: status.endpoints.
	ReasonNoPodIP = "NoPodIP"
	// ReasonContainersNotReady: the pod's containers are not ready.
	// Used by: status.endpoints, readiness gate, Deregistered Event.
	ReasonContainersNotReady = "ContainersNotReady"
	// ReasonContainersReady: the pod's containers are ready and it is registered.
	// Used by: status.endpoints.
	ReasonContainersReady = "ContainersReady"
	// ReasonNodeLeaseExpired: the pod's node stopped renewing its Lease for longer than
	// --node-lease-timeout; the pod comes back when the node renews it.
	// Used by: status.endpoints, Deregistered Event.
	ReasonNodeLeaseExpired = "NodeLeaseExpired"
	// ReasonPodDeleted: the pod is gone (the Deregistered Event then goes to the registry).
	// Used by: Deregistered Event.
	ReasonPodDeleted = "PodDeleted"
)

// ReadinessGate is the pod readiness gate (and pod condition type) that only registrar
// sets True, after warm-up and after the store acknowledged the endpoint.
const ReadinessGate = "registrar.dev/ready"

// Reasons of the ReadinessGate condition on pods. GateWarmedUp and GateRegistered record
// durably, on the pod, that warm-up finished, so an operator restart neither re-warms nor
// forgets.
const (
	// GateWarmingUp: False while warm-up requests are in flight.
	GateWarmingUp = ReasonWarmingUp
	// GateWarmedUp: False, warm-up done, waiting for the store's acknowledgement.
	GateWarmedUp = ReasonWarmedUp
	// GateWarmupFailed: False, warm-up failed under onFailure: Block; delete the pod to retry.
	GateWarmupFailed = ReasonWarmupFailed
	// GateServiceNameOwnedElsewhere: False, the registry selecting the pod is refused its
	// service name (another namespace owns it); a gate already True is left True.
	GateServiceNameOwnedElsewhere = ReasonServiceNameOwnedElsewhere
	// GateRegistered: True, the store acknowledged the endpoint.
	GateRegistered = "Registered"
	// GateNotReady: False, the containers stopped being ready (the next start warms up again).
	GateNotReady = ReasonContainersNotReady
	// GateReleased: True, no ServiceRegistry manages the pod any more (its registry was
	// deleted, stopped selecting it, or was never created), so registrar set the gate True
	// to let the pod become Ready rather than strand it; the message says why.
	GateReleased = "Released"
)

// Reasons of the Events registrar records (besides a Normal or Warning Event with the
// condition's reason whenever a ServiceRegistry condition changes status or reason).
const (
	// EventRegistered (Normal, on the pod): its endpoint was written to the store.
	EventRegistered = "Registered"
	// EventDeregistered (Normal, on the pod, or on the registry when the pod is gone): its
	// endpoint left the store; the note gives the endpoint reason.
	EventDeregistered = "Deregistered"
	// EventWarmedUp (Normal, on the pod): warm-up finished.
	EventWarmedUp = "WarmedUp"
	// EventWarmupFailed (Warning, on the pod): warm-up failed; under onFailure: Proceed the
	// pod is registered anyway.
	EventWarmupFailed = "WarmupFailed"
	// EventGateReleased (Normal, on the pod): registrar set the gate True on a pod no
	// ServiceRegistry manages any more.
	EventGateReleased = "GateReleased"
	// EventStoreRepaired (Warning, on the registry): an owned record was changed in a store
	// by something else and registrar repaired it.
	EventStoreRepaired = "StoreRepaired"
	// EventPreStopKept (Warning, on the registry): a serving container of a new pod already
	// had a preStop hook, which the webhook left alone; the drain applies only if that hook
	// waits long enough.
	EventPreStopKept = "PreStopKept"
	// EventInvalidAnnotation (Warning, on the Deployment): a registrar.dev/ annotation could
	// not be parsed.
	EventInvalidAnnotation = ReasonInvalidAnnotation
	// EventRegistryConflict (Warning, on the Deployment): a ServiceRegistry with the
	// Deployment's name exists and is not controlled by the Deployment; registrar leaves it
	// alone.
	EventRegistryConflict = "ServiceRegistryConflict"
	// EventRegistryCreated (Normal, on the Deployment): registrar.dev/service made the
	// operator create its ServiceRegistry.
	EventRegistryCreated = "ServiceRegistryCreated"
	// EventRegistryDeleted (Normal, on the Deployment): registrar.dev/service was removed and
	// the ServiceRegistry deleted.
	EventRegistryDeleted = "ServiceRegistryDeleted"
)

// Defaults shared by the webhook, the reconciler and the manager's flags.
const (
	// DefaultDrainSeconds is spec.drain.seconds when spec.drain is unset (the CRD's default
	// of drain.seconds; cmd's reference test checks that they agree).
	DefaultDrainSeconds int32 = 15
	// DefaultCallerCacheSeconds is the default of --caller-cache-seconds: the callers' cache
	// TTL assumed by the drain advice when spec.drain.callerCacheSeconds is unset.
	DefaultCallerCacheSeconds = 5
)

// Warm-up defaults: the CRD's defaults of spec.warmup.timeoutMillis and
// requestTimeoutMillis, applied by the reconciler to a spec read without them.
const (
	DefaultWarmupTimeoutMillis        int32 = 30000
	DefaultWarmupRequestTimeoutMillis int32 = 2000
)

// The guard against mass false deregistration (issue 19): node Lease lapses that would remove
// more than --node-lease-guard-share of a registry's (or the cluster's) endpoints at once are
// held, as the operator being cut off from the API server is likelier than that many nodes
// dying (docs/operations.md, "Held deregistrations").
const (
	// ConditionDeregistrationHeld reports that registrar keeps endpoints in the store although
	// their nodes' Leases lapsed, because too many lapsed at once. Present only while True.
	//
	//   - True (NodeLeasesLapsedInCluster, NodeLeasesLapsedInRegistry): the message says how
	//     many endpoints are kept and the share of lapsed endpoints and nodes; check the
	//     operator's connection to the API server and the node Leases in kube-node-lease.
	//     Removals for the pods' own status (not ready, terminating, deleted) still happen.
	//   - False, Unknown: not used; the condition is removed when the Leases are renewed or
	//     the share falls under the threshold. Nodes still lapsed then get a fresh
	//     --node-lease-timeout from that moment: their pods leave if they stay silent.
	ConditionDeregistrationHeld = "DeregistrationHeld"

	// ReasonNodeLeasesLapsedInCluster: more than --node-lease-guard-share of the cluster's
	// endpoints sit on nodes whose Lease lapsed (on at least --node-lease-guard-min-nodes
	// nodes); their removals are held.
	// Used by: DeregistrationHeld.
	ReasonNodeLeasesLapsedInCluster = "NodeLeasesLapsedInCluster"
	// ReasonNodeLeasesLapsedInRegistry: more than --node-lease-guard-share of this registry's
	// endpoints sit on nodes whose Lease lapsed (on at least --node-lease-guard-min-nodes
	// nodes); their removals are held.
	// Used by: DeregistrationHeld.
	ReasonNodeLeasesLapsedInRegistry = "NodeLeasesLapsedInRegistry"
	// ReasonDeregistrationHeld: the pod's node Lease lapsed but its endpoint is kept in the
	// store, as too many lapsed at once (see DeregistrationHeld).
	// Used by: status.endpoints.
	ReasonDeregistrationHeld = "DeregistrationHeld"

	// EventDeregistrationResumed (Normal, on the registry): the node Lease guard stopped
	// holding; pods of nodes still lapsed leave if their nodes stay silent for another
	// --node-lease-timeout.
	EventDeregistrationResumed = "DeregistrationResumed"
)
