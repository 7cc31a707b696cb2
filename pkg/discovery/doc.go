// Package discovery is the caller's side of registrar: it finds the live instances of a
// service that the registrar operator keeps in etcd, and picks one for each call.
//
// The operator writes one key per ready, warmed-up, non-terminating pod,
// {prefix}/{service}/{namespace}/{pod}, whose value is a JSON object (see Instance), and
// deletes it on the pod event that makes the pod ineligible. A Client lists
// {prefix}/{service}/ once and then watches it (push, not poll), so a removal reaches the
// caller within one watch round trip instead of a cache TTL. With Config.Namespace it lists
// and watches {prefix}/{service}/{namespace}/ only: the instances one namespace registered,
// for callers that must not receive another namespace's instances of a shared service name.
// With Config.AllServices it lists and watches {prefix}/ : every service's instances, for
// servers that answer for every registry (cmd/eureka-api).
//
// What a Client guarantees:
//
//   - The instance list is an immutable snapshot sorted by key, replaced atomically; Pick and
//     All never touch the network.
//   - When the store is unreachable it keeps serving the last known-good list, and
//     Staleness/LastSync say how old it is. Emptying the list because the registry is down
//     would turn a registry outage into a full outage.
//   - Reconnects wait an exponential backoff with full jitter (a uniform draw in
//     [0, min(max, base*2^attempt))), so a fleet of callers that lost the store together does
//     not come back together.
//   - A watch resumes from the last revision it saw; when that revision was compacted the
//     client lists again.
//   - Passive ejection: ReportFailure takes an instance out of rotation for a cool-down, but
//     never more than MaxEjectionPercent of the instances at once (Envoy's
//     max_ejection_percent guard), so a bad network day cannot eject the whole service.
//   - Do retries an idempotent call on a different instance.
//   - Circuit breakers (BreakerConfig): Do goes through a Closed → Open → Half-Open breaker
//     for the service and one per endpoint, tripping on the failure rate or the slow-call
//     rate over a sliding window, with a jittered open duration and a half-open concurrency
//     guard; no goroutine or timer per call. With BreakerConfig.Coordinated the service's
//     breaker is shared by every caller through the store, under
//     {prefix}/.registrar/breakers/{service}/ (see BreakerPrefix): decided from a watch
//     cache (no store round trip per call), opened by a quorum of callers, probed by exactly
//     one caller holding a leased permit, and falling back to the local breaker when the
//     store is slow or unreachable. docs/breakers.md says when to use which.
//
// The package depends only on the etcd client and pkg/wire (the store's key layout and value
// format, standard library only); it does not import registrar's internals.
// Prometheus metrics are in the discoverymetrics subpackage.
package discovery
