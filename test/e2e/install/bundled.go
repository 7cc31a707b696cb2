package install

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Names of the bundled store (config/components/etcd, the chart's etcd.* with release
// "registrar").
const (
	EtcdName      = "registrar-etcd"
	EtcdSecret    = "registrar-etcd-tls"
	EtcdReplicas  = 3
	etcdPodLabel  = "app.kubernetes.io/name"
	etcdPVPrefix  = "registrar-e2e-etcd-"
	etcdServerSAN = EtcdName + "." + Namespace + ".svc"
)

// ProvideVolumes makes one hostPath PersistentVolume per member under dir, each bound in
// advance to the claim its StatefulSet will make (data-registrar-etcd-N): the single-node
// cluster has no dynamic provisioner, so the suite provides the volumes an administrator's
// provisioner would. Volumes of an earlier install are deleted first, and their directories
// emptied; the directories belong to the members' user (65532), since fsGroup does not apply
// to hostPath volumes.
func ProvideVolumes(ctx context.Context, c client.Client, dir string, n int) error {
	for i := range n {
		name := fmt.Sprintf("%s%d", etcdPVPrefix, i)
		pv := &corev1.PersistentVolume{}
		pv.Name = name
		if err := c.Delete(ctx, pv); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete PersistentVolume %s: %w", name, err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: name}, &corev1.PersistentVolume{})), nil
		}); err != nil {
			return fmt.Errorf("PersistentVolume %s of an earlier install not gone: %w", name, err)
		}
		path := filepath.Join(dir, fmt.Sprintf("etcd-%d", i))
		if err := os.RemoveAll(path); err != nil {
			return err
		}
		if err := os.MkdirAll(path, 0o700); err != nil {
			return err
		}
		if err := os.Chown(path, 65532, 65532); err != nil {
			return fmt.Errorf("give %s to the members' user: %w", path, err)
		}
		pv = &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"e2e.registrar.dev/volume": "etcd"}},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				ClaimRef:                      &corev1.ObjectReference{Namespace: Namespace, Name: fmt.Sprintf("data-%s-%d", EtcdName, i)},
				PersistentVolumeSource: corev1.PersistentVolumeSource{
					HostPath: &corev1.HostPathVolumeSource{Path: path},
				},
			},
		}
		if err := c.Create(ctx, pv); err != nil {
			return fmt.Errorf("create PersistentVolume %s: %w", name, err)
		}
	}
	return nil
}

// RemoveVolumes deletes the volumes ProvideVolumes made (released once the install's claims
// are gone) and their directories.
func RemoveVolumes(ctx context.Context, c client.Client, dir string) error {
	var pvs corev1.PersistentVolumeList
	if err := c.List(ctx, &pvs, client.MatchingLabels{"e2e.registrar.dev/volume": "etcd"}); err != nil {
		return fmt.Errorf("list PersistentVolumes: %w", err)
	}
	var errs []error
	for i := range pvs.Items {
		errs = append(errs, client.IgnoreNotFound(c.Delete(ctx, &pvs.Items[i])))
	}
	return errors.Join(append(errs, os.RemoveAll(dir))...)
}

// WaitStore waits until every member of the bundled etcd is ready.
func WaitStore(ctx context.Context, c client.Client, timeout time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		s := &appsv1.StatefulSet{}
		if c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: EtcdName}, s) != nil || s.Spec.Replicas == nil {
			return false, nil
		}
		return s.Status.ObservedGeneration == s.Generation && s.Status.ReadyReplicas == *s.Spec.Replicas &&
			s.Status.UpdatedReplicas == *s.Spec.Replicas, nil
	})
	if err != nil {
		return fmt.Errorf("the bundled etcd (%s) is not ready: %w (%s)", EtcdName, err, MembersState(ctx, c))
	}
	return nil
}

// MembersState describes the bundled etcd's pods (phase, readiness, restarts), for messages.
func MembersState(ctx context.Context, c client.Client) string {
	pods, err := members(ctx, c)
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, p := range pods {
		restarts := int32(0)
		for _, cs := range p.Status.ContainerStatuses {
			restarts += cs.RestartCount
		}
		out = append(out, fmt.Sprintf("%s %s ready=%v restarts=%d ip=%s", p.Name, p.Status.Phase, podReady(&p), restarts, p.Status.PodIP))
	}
	return strings.Join(out, "; ")
}

func members(ctx context.Context, c client.Client) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(Namespace), client.MatchingLabels{etcdPodLabel: EtcdName}); err != nil {
		return nil, fmt.Errorf("list the bundled etcd's pods: %w", err)
	}
	slices.SortFunc(pods.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods.Items, nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// StoreClient is a client of the bundled etcd as the suite's callers reach it: the members by
// their DNS names, as registrar does (the etcd client verifies each member's certificate for
// the name of its endpoint, and the certificate names the members, not their IPs), dialled at
// the pod IP each name has at the time (the host does not resolve cluster names; a member's
// pod gets a new IP when it is replaced), over TLS with the install's CA and registrar's
// client certificate from the PKI Secret.
func StoreClient(ctx context.Context, c client.Client) (*clientv3.Client, error) {
	sec := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: EtcdSecret}, sec); err != nil {
		return nil, fmt.Errorf("the bundled store's PKI Secret: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(sec.Data["ca.crt"]) {
		return nil, fmt.Errorf("secret %s: no CA in ca.crt", EtcdSecret)
	}
	cert, err := tls.X509KeyPair(sec.Data["client.crt"], sec.Data["client.key"])
	if err != nil {
		return nil, fmt.Errorf("secret %s: client certificate: %w", EtcdSecret, err)
	}
	pods, err := members(ctx, c)
	if err != nil {
		return nil, err
	}
	var endpoints []string
	for _, p := range pods {
		endpoints = append(endpoints, "https://"+net.JoinHostPort(p.Name+"."+etcdServerSAN, "2379"))
	}
	if len(endpoints) == 0 {
		return nil, fmt.Errorf("the bundled etcd has no member (%s)", MembersState(ctx, c))
	}
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		name, _, _ := strings.Cut(host, ".")
		p := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: name}, p); err != nil {
			return nil, fmt.Errorf("member %s: %w", name, err)
		}
		if p.Status.PodIP == "" {
			return nil, fmt.Errorf("member %s has no pod IP yet", name)
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", net.JoinHostPort(p.Status.PodIP, port))
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(dial)},
		TLS:         &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client of %v: %w", endpoints, err)
	}
	return cli, nil
}

// LeaderPod is the name of the bundled etcd's pod that leads, as the members report it.
func LeaderPod(ctx context.Context, cli *clientv3.Client) (string, error) {
	for _, ep := range cli.Endpoints() {
		sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		st, err := cli.Status(sctx, ep)
		cancel()
		if err != nil {
			continue
		}
		mctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		ml, err := cli.MemberList(mctx)
		cancel()
		if err != nil {
			continue
		}
		for _, m := range ml.Members {
			if m.ID == st.Leader {
				return m.Name, nil
			}
		}
	}
	return "", errors.New("no member answered with a known leader")
}
