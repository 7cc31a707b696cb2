package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

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

// NewClusterFence returns the write fence of cluster in a shared prefix, claimed in the name
// of installation (stable across the installation's replicas and restarts) by holder (this
// process). Acquire takes it only when it is free or already claimed by the same
// installation; a fence claimed by another installation is reported by Acquire, Claimed and
// every write as store.ErrClusterClaimed, and never taken. Acquire also records the shared
// layout at wire.LayoutKey, and refuses a prefix recorded with another layout.
func NewClusterFence(kv clientv3.KV, prefix, cluster, installation, holder string, timeout time.Duration) *Fence {
	f := NewFence(kv, wire.ClusterFenceKey(prefix, cluster), holder, timeout)
	f.installation, f.layoutKey, f.cluster = installation, wire.LayoutKey(prefix), cluster
	return f
}

// Claimed is the error that keeps this fence from being taken (store.ErrClusterClaimed or a
// layout mismatch), nil when none.
func (f *Fence) Claimed() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.claimErr
}

// claim takes a cluster fence in one transaction: the layout marker is absent or shared,
// and the fence is absent or claimed by this installation (at the revision read).
func (f *Fence) claim(ctx context.Context) (int64, error) {
	value, err := json.Marshal(wire.FenceClaim{Installation: f.installation, Holder: f.id})
	if err != nil {
		return 0, err
	}
	for range 5 { // a concurrent change of the fence or the marker: read again
		resp, err := f.kv.Get(ctx, f.key)
		if err != nil {
			return 0, fmt.Errorf("read write fence %s: %w", f.key, err)
		}
		fenceCmp := clientv3.Compare(clientv3.CreateRevision(f.key), "=", 0)
		if len(resp.Kvs) == 1 {
			var cur wire.FenceClaim
			if json.Unmarshal(resp.Kvs[0].Value, &cur) != nil || cur.Installation != f.installation {
				err := fmt.Errorf("cluster %q: the write fence %s is held by installation %q, this is installation %q: "+
					"two installations were given the same --cluster-id; give each cluster its own, or delete the fence key "+
					"if that installation is gone for good: %w", f.cluster, f.key, cur.Installation, f.installation, store.ErrClusterClaimed)
				f.setClaimErr(err)
				return 0, err
			}
			fenceCmp = clientv3.Compare(clientv3.ModRevision(f.key), "=", resp.Kvs[0].ModRevision)
		}
		layoutOK := clientv3.Compare(clientv3.CreateRevision(f.layoutKey), "=", 0)
		txn, err := f.kv.Txn(ctx).If(fenceCmp, layoutOK).
			Then(clientv3.OpPut(f.layoutKey, wire.LayoutShared), clientv3.OpPut(f.key, string(value))).
			Else(clientv3.OpGet(f.layoutKey)).Commit()
		if err != nil {
			return 0, fmt.Errorf("take write fence %s: %w", f.key, err)
		}
		if txn.Succeeded {
			f.setClaimErr(nil)
			return txn.Header.Revision, nil
		}
		if kvs := txn.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
			if string(kvs[0].Value) != wire.LayoutShared {
				err := fmt.Errorf("prefix layout %s is %q, not %q: this prefix is written by installations without --store-shared; "+
					"use another --store-prefix: %w", f.layoutKey, kvs[0].Value, wire.LayoutShared, store.ErrClusterClaimed)
				f.setClaimErr(err)
				return 0, err
			}
			// The marker is right: put the fence alone under the same guard.
			txn, err = f.kv.Txn(ctx).If(fenceCmp).Then(clientv3.OpPut(f.key, string(value))).Commit()
			if err != nil {
				return 0, fmt.Errorf("take write fence %s: %w", f.key, err)
			}
			if txn.Succeeded {
				f.setClaimErr(nil)
				return txn.Header.Revision, nil
			}
		}
	}
	return 0, fmt.Errorf("take write fence %s: it kept changing while read", f.key)
}

func (f *Fence) setClaimErr(err error) {
	f.mu.Lock()
	f.claimErr = err
	f.mu.Unlock()
}

// CheckLayout refuses a prefix recorded as shared (wire.LayoutKey) to an installation that
// writes the single-cluster layout. A store that cannot be read is not refused.
func CheckLayout(ctx context.Context, kv clientv3.KV, prefix string) error {
	resp, err := kv.Get(ctx, wire.LayoutKey(prefix))
	if err != nil || len(resp.Kvs) == 0 {
		return nil // unreachable at start: the fence and every write report it
	}
	if v := string(resp.Kvs[0].Value); v != "" && !strings.EqualFold(v, "single") {
		return fmt.Errorf("store prefix %s is laid out %q (several clusters share it): run with --store-shared and a --cluster-id, or use another --store-prefix", wire.Prefix(prefix), v)
	}
	return nil
}
