package fence

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

// NewCluster returns the write fence of cluster in a shared prefix, claimed in the name
// of installation (stable across the installation's replicas and restarts) by holder (this
// process). Acquire takes it only when it is free or already claimed by the same
// installation; a fence claimed by another installation is reported by Acquire, Claimed and
// every write as store.ErrClusterClaimed, and never taken. Acquire also records the shared
// layout at wire.LayoutKey, and refuses a prefix recorded with another layout.
func NewCluster(kv clientv3.KV, prefix, cluster, installation, holder string, timeout time.Duration) *Fence {
	f := New(kv, wire.ClusterFenceKey(prefix, cluster), holder, timeout)
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
