package wire

import (
	"fmt"
	"regexp"
	"strings"
)

// Shared layout: several clusters publish into one prefix (the operator's --store-shared).
// The key keeps its three segments under the prefix, so every reader of
// {prefix}/{service}/ keeps working; the last segment carries the writer's cluster:
//
//	{prefix}/{service}/{namespace}/{cluster}.{pod}           one Endpoint, JSON; its "cluster" field is {cluster}
//	{prefix}/.registrar/layout                               "shared/v1": the prefix's layout (LayoutKey)
//	{prefix}/.registrar/clusters/{cluster}/fence             the cluster's write fence: which installation writes its keys
//	{prefix}/.registrar/clusters/{cluster}/lease             the cluster's endpoint lease ID (hex), attached to that lease
//
// A cluster ID is a DNS-1123 label (no dot), so "{cluster}." starts only that cluster's
// keys: "c1." is not a prefix of "c10.web-0".

// LayoutShared is the value of LayoutKey when several clusters share the prefix.
const LayoutShared = "shared/v1"

var clusterIDPattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// ValidateClusterID rejects a cluster ID that is not a DNS-1123 label (lower-case letters,
// digits and '-', at most 63 characters, starting and ending alphanumeric). A Kubernetes
// namespace UID is one.
func ValidateClusterID(id string) error {
	if len(id) > 63 || !clusterIDPattern.MatchString(id) {
		return fmt.Errorf("cluster ID %q is not a valid store key segment: it must be a DNS-1123 label "+
			"(lower-case letters, digits and '-', at most 63 characters, e.g. the kube-system namespace UID)", id)
	}
	return nil
}

// ClusterPod is the last key segment of pod in the shared layout: "{cluster}.{pod}".
func ClusterPod(cluster, pod string) string { return cluster + "." + pod }

// SplitClusterPod splits a shared-layout last segment into its cluster and pod; ok is false
// when the segment has no cluster part.
func SplitClusterPod(segment string) (cluster, pod string, ok bool) {
	cluster, pod, ok = strings.Cut(segment, ".")
	if !ok || ValidateClusterID(cluster) != nil || pod == "" {
		return "", "", false
	}
	return cluster, pod, true
}

// ClusterKey is the key of one endpoint of cluster in the shared layout:
// {prefix}/{service}/{namespace}/{cluster}.{pod}.
func ClusterKey(prefix, cluster, service, namespace, pod string) string {
	return Key(prefix, service, namespace, ClusterPod(cluster, pod))
}

// LayoutKey records the layout of the prefix: {prefix}/.registrar/layout.
func LayoutKey(prefix string) string { return ReservedKey(prefix, "layout") }

// ClustersDir holds each cluster's fence and lease: {prefix}/.registrar/clusters.
func ClustersDir(prefix string) string { return ReservedKey(prefix, "clusters") }

// ClusterFenceKey is the write fence of cluster: {prefix}/.registrar/clusters/{cluster}/fence.
func ClusterFenceKey(prefix, cluster string) string {
	return ReservedKey(prefix, "clusters", cluster, "fence")
}

// ClusterLeaseKey records cluster's endpoint lease: {prefix}/.registrar/clusters/{cluster}/lease.
func ClusterLeaseKey(prefix, cluster string) string {
	return ReservedKey(prefix, "clusters", cluster, "lease")
}

// FenceClaim is the value of a cluster's fence key: the installation that writes the
// cluster's keys, and the process (replica) of it that leads now.
type FenceClaim struct {
	// Installation identifies one installation of the operator in one cluster (the
	// kube-system namespace UID and the operator's namespace): another installation with
	// the same cluster ID is refused.
	Installation string `json:"installation"`
	// Holder is the leading replica (host, pid, start time).
	Holder string `json:"holder"`
}
