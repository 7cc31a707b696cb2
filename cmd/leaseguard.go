package main

import (
	"flag"

	"github.com/registrar-dev/registrar/internal/leaseguard"
)

// bindLeaseGuardFlags registers the flags of the guard against mass false deregistration
// (internal/leaseguard; docs/operations.md, "Held deregistrations"). The defaults are the
// node lifecycle controller's thresholds.
func bindLeaseGuardFlags(fs *flag.FlagSet, c *leaseguard.Config) {
	fs.Float64Var(&c.Share, "node-lease-guard-share", leaseguard.DefaultShare, "Hold the deregistrations node Lease lapses would cause when they would remove more than this share of a ServiceRegistry's or of the cluster's endpoints at once (the operator being cut off from the API server is likelier than that many nodes dying); removals for the pods' own status are never held; 1 disables the guard. Like kube-controller-manager's --unhealthy-zone-threshold.")
	fs.IntVar(&c.MinNodes, "node-lease-guard-min-nodes", leaseguard.DefaultMinNodes, "Hold only when the lapsed endpoints sit on at least this many nodes with a lapsed Lease (one or two nodes do die).")
	fs.IntVar(&c.LargeClusterSize, "node-lease-guard-large-cluster-size", leaseguard.DefaultLargeClusterSize, "In a cluster with more nodes carrying endpoints than this, a hold where not every node lapsed releases its removals one node at a time at --node-lease-guard-secondary-rate (like --large-cluster-size-threshold).")
	fs.Float64Var(&c.SecondaryRate, "node-lease-guard-secondary-rate", leaseguard.DefaultSecondaryRate, "Lapsed nodes per second whose held removals are released during a partial hold in a large cluster; 0 releases none (like --secondary-node-eviction-rate).")
}
