// Package store defines the narrow interface between registrar's controllers and an external
// service registry. Controllers compute a plan of Changes (see internal/plan) and hand it to a
// Store; backends (etcd first) live in sub-packages.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/registrar-dev/registrar/pkg/wire"
)

// ErrConflict is returned by Apply when a record changed in the store since it was listed,
// so the caller must list again before it writes. It is how concurrent writers are fenced.
var ErrConflict = errors.New("store changed since it was read")

// ErrFenced is returned by Apply when this writer no longer holds the store's write fence:
// another replica became leader and took the fence since. The caller must stop writing.
var ErrFenced = errors.New("write fence taken by a newer leader")

// Endpoint is one live instance of a service, as serialised into the store: the wire
// format that callers read (pkg/wire, shared with pkg/discovery).
type Endpoint = wire.Endpoint

// Record is an Endpoint as read back from the store, with the store's version of it.
// A record whose value could not be decoded has an empty Owner, so nobody owns it and
// registrar never deletes or overwrites it.
type Record struct {
	Endpoint
	// Key is the full store key of the record.
	Key string
	// Revision is the store's version of the record, used to guard updates and deletes.
	Revision int64
}

// Scope addresses the keys of one service in one namespace: the unit a ServiceRegistry
// writes and the unit of one Apply.
type Scope struct {
	Service   string
	Namespace string
	// TTL is the record TTL for backends whose records have one (DNS); zero means the
	// backend's default. Other backends ignore it.
	TTL time.Duration
}

// Update replaces the value of an existing record.
type Update struct {
	Old Record
	New Endpoint
}

// Changes is what one Apply writes: creates, updates and deletes in one scope.
type Changes struct {
	Create []Endpoint
	Update []Update
	Delete []Record
}

// Len is the number of writes in c.
func (c Changes) Len() int { return len(c.Create) + len(c.Update) + len(c.Delete) }

// Store is an external service registry.
type Store interface {
	// List returns every record in the scope, whoever owns it.
	List(ctx context.Context, scope Scope) ([]Record, error)
	// Apply writes the changes, whatever their number, atomically where the backend allows
	// it: one transaction per service, split only when larger than the backend's limits on
	// one transaction (etcd: its operations, comparisons included, the write guard's too;
	// ZooKeeper: operations and bytes), which are the backend's business, never the
	// caller's. Each part is all or nothing and carries every guard (the write fence
	// included), and the parts land in order, so a watcher may see a split change half
	// done. A create fails when the key exists; an update or delete fails when the record's
	// revision moved on; either failure returns ErrConflict. On success it returns the
	// records as now stored for every created or updated endpoint. On any error the caller
	// must List again before its next Apply: a split change may have partly landed.
	Apply(ctx context.Context, scope Scope, changes Changes) ([]Record, error)
}

// Change is one change of a key under a Store's keys, as a Watcher reports it.
type Change struct {
	// Service and Namespace name the scope of the key; Pod its pod.
	Service, Namespace, Pod string
	// Revision is the store's revision of the change: a put's new Revision, a delete's
	// revision.
	Revision int64
	// Deleted is true when the key was removed.
	Deleted bool
}

// Watcher is implemented by a Store that can report every change of its keys, whoever made
// it, so that the caller repairs an owned record changed behind its back.
type Watcher interface {
	// Watch calls changed for every change of the Store's keys from now on, until ctx ends,
	// resuming by itself after errors. It calls missed when changes may have been lost (the
	// store compacted the history it would resume from): the caller must re-read every
	// scope. It returns errors.ErrUnsupported when the Store cannot watch (the caller then
	// relies on a periodic re-read alone).
	Watch(ctx context.Context, changed func(Change), missed func()) error
}

// Scanner is implemented by a Store that can list every record it holds, across scopes, so
// that the records of an owner are found wherever they are (a registry renamed while its
// status was not yet written). Each Record's Service and Namespace are those of its key.
type Scanner interface {
	ListAll(ctx context.Context) ([]Record, error)
}
