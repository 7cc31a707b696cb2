package regstatus

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// DefaultStoreStallAfter is how long the store may stay unreachable before a registry
// reports Stalled=True: long enough for a leader change or a rolling restart of etcd,
// short enough that a GitOps tool reports the failure instead of waiting for its timeout.
const DefaultStoreStallAfter = 2 * time.Minute

// health is the verdict of the kstatus conditions: at most one of them is True.
type health struct {
	stalled, reconciling bool
	reason, message      string
}

// healthConditions sets the "abnormal-true" conditions kstatus (sigs.k8s.io/cli-utils)
// and the GitOps tools built on it (Flux, Argo CD) read: Stalled=True when the registry
// cannot make progress without a change by a person, Reconciling=True while it is still
// converging. Each is removed when it would be False, as kstatus recommends, so a healthy
// registry carries neither; with neither, kstatus falls back to the Ready condition.
func healthConditions(st *v1beta1.ServiceRegistryStatus, old v1beta1.ServiceRegistryStatus, in Input) {
	h := judge(st, old, in)
	removeCondition(&st.Conditions, v1beta1.ConditionStalled)
	removeCondition(&st.Conditions, v1beta1.ConditionReconciling)
	typ := v1beta1.ConditionReconciling
	switch {
	case h.stalled:
		typ = v1beta1.ConditionStalled
	case !h.reconciling:
		return
	}
	// Keep the transition time of a condition that stays True.
	if was := meta.FindStatusCondition(old.Conditions, typ); was != nil && was.Status == metav1.ConditionTrue {
		st.Conditions = append(st.Conditions, *was)
	}
	setCondition(st, in.Generation, in.Now, typ, true, h.reason, h.message)
}

// judge decides between stalled, reconciling and neither, most severe first.
func judge(st *v1beta1.ServiceRegistryStatus, old v1beta1.ServiceRegistryStatus, in Input) health {
	switch {
	case in.Refused != "":
		return health{stalled: true, reason: v1beta1.ReasonServiceNameOwnedElsewhere, message: in.Refused}
	case in.SelectorErr != nil:
		return health{stalled: true, reason: v1beta1.ReasonInvalidSelector,
			message: fmt.Sprintf("fix spec.selector: %v", in.SelectorErr)}
	case in.StoreErr != nil:
		return storeHealth(old, in)
	case len(in.Conflicts) > 0:
		return health{stalled: true, reason: v1beta1.ReasonKeyConflict,
			message: "another ServiceRegistry or installation owns the store keys of some pods; give this registry a distinct spec.serviceName (see the Ready condition)"}
	case in.Config.Generated && in.Config.Problems != "":
		return health{stalled: true, reason: v1beta1.ReasonInvalidAnnotation,
			message: "fix the Deployment's registrar.dev/ annotations: " + in.Config.Problems}
	case st.Warming > 0:
		return health{reconciling: true, reason: v1beta1.ReasonWarmingUp,
			message: fmt.Sprintf("%d pods are warming up before they are registered", st.Warming)}
	case notInStore(st.Endpoints) > 0:
		return health{reconciling: true, reason: v1beta1.ReasonNotInStore,
			message: fmt.Sprintf("%d eligible pods are not in the store yet", notInStore(st.Endpoints))}
	}
	return health{}
}

// storeHealth is Reconciling while the store has been unreachable for less than
// StoreStallAfter (the reconciler retries with backoff), Stalled after that. The outage
// starts at the transition time of the StoreSynced=False condition the last status carried.
func storeHealth(old v1beta1.ServiceRegistryStatus, in Input) health {
	since := in.Now
	if c := meta.FindStatusCondition(old.Conditions, v1beta1.ConditionStoreSynced); c != nil && c.Status == metav1.ConditionFalse {
		since = c.LastTransitionTime.Time
	}
	limit := in.StoreStallAfter
	if limit <= 0 {
		limit = DefaultStoreStallAfter
	}
	// The messages name when the outage began, not how long it lasts: a message that
	// changed on every retry would write the status, and so trigger a reconcile, each time.
	start := since.UTC().Format(time.RFC3339)
	if in.Now.Sub(since) >= limit {
		return health{stalled: true, reason: v1beta1.ReasonStoreUnreachable,
			message: fmt.Sprintf("store %s has been unreachable since %s (more than %s); check its endpoints, TLS and network policy: %v", in.StoreName, start, limit, in.StoreErr)}
	}
	return health{reconciling: true, reason: v1beta1.ReasonStoreUnreachable,
		message: fmt.Sprintf("retrying store %s with backoff (unreachable since %s): %v", in.StoreName, start, in.StoreErr)}
}
