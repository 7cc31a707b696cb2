package etcd

import (
	"fmt"

	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/pkg/wire"
)

// Shared layout (Options.Cluster set): several clusters publish into one prefix, each
// installation under its own cluster ID (see pkg/wire, cluster.go). The Store is the one
// place that enforces "a writer only ever touches its own cluster's records":
//   - every key it builds, lists, scans or watches is {scope}{cluster}.{pod} of its cluster:
//     another cluster's keys are never listed, so never planned against;
//   - a listed record whose value names another cluster is nobody's (empty Owner);
//   - Apply refuses (ErrForeignCluster) a create or update whose endpoint names another
//     cluster, and a delete or update of a record that is not its cluster's;
//   - every write is guarded by the cluster's fence, which a different installation
//     claiming the same cluster ID cannot take (ErrClusterClaimed).

// shared reports whether the Store writes the shared layout.
func (s *Store) shared() bool { return s.opts.Cluster != "" }

// podSegment is the last key segment of pod: "{cluster}.{pod}" when shared, else pod.
func (s *Store) podSegment(pod string) string {
	if s.shared() {
		return wire.ClusterPod(s.opts.Cluster, pod)
	}
	return pod
}

// listPrefix is the prefix of the scope's keys this Store may touch: its cluster's when
// shared, else the scope's.
func (s *Store) listPrefix(scope store.Scope) string {
	if s.shared() {
		return s.scopePrefix(scope) + s.opts.Cluster + "."
	}
	return s.scopePrefix(scope)
}

// ownSegment reports whether a last key segment is one of this Store's, and its pod.
func (s *Store) ownSegment(segment string) (string, bool) {
	if !s.shared() {
		return segment, true
	}
	cluster, pod, ok := wire.SplitClusterPod(segment)
	if !ok || cluster != s.opts.Cluster {
		return "", false
	}
	return pod, true
}

// disownForeign clears the Owner of a listed record whose value names another cluster.
func (s *Store) disownForeign(rec *store.Record) {
	if s.shared() && rec.Cluster != s.opts.Cluster {
		rec.Owner = ""
	}
}

// checkClusters refuses changes that would touch another cluster's records.
func (s *Store) checkClusters(scope store.Scope, c store.Changes) error {
	if !s.shared() {
		return nil
	}
	own := func(what string, ep *store.Endpoint) error {
		if ep.Cluster != s.opts.Cluster {
			return fmt.Errorf("%s %s/%s of cluster %q by cluster %q: %w", what, scope.Namespace, ep.Pod, ep.Cluster, s.opts.Cluster, store.ErrForeignCluster)
		}
		return nil
	}
	ownRecord := func(what string, r *store.Record) error {
		if err := own(what, &r.Endpoint); err != nil {
			return err
		}
		if r.Key != "" && r.Key != s.Key(scope, r.Pod) {
			return fmt.Errorf("%s key %s by cluster %q: %w", what, r.Key, s.opts.Cluster, store.ErrForeignCluster)
		}
		return nil
	}
	for i := range c.Create {
		if err := own("create", &c.Create[i]); err != nil {
			return err
		}
	}
	for i := range c.Update {
		if err := ownRecord("update", &c.Update[i].Old); err != nil {
			return err
		}
		if err := own("update", &c.Update[i].New); err != nil {
			return err
		}
	}
	for i := range c.Delete {
		if err := ownRecord("delete", &c.Delete[i]); err != nil {
			return err
		}
	}
	return nil
}
