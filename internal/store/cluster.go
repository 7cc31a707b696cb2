package store

import "errors"

// ErrClusterClaimed is returned by Apply when the store is shared by several clusters and
// this cluster's ID is claimed by a different installation (its fence names another
// installation): two installations were given one cluster ID. Nothing is written until the
// misconfiguration is fixed.
var ErrClusterClaimed = errors.New("cluster ID claimed by another installation")

// ErrForeignCluster is returned by Apply when a change would create, overwrite or delete a
// record of another cluster than the store's own: a writer only ever touches its cluster's
// records.
var ErrForeignCluster = errors.New("record of another cluster")
