package controller_test

import (
	"context"
	"encoding/json"
	"path"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/store"
)

const (
	timeout = 10 * time.Second
	poll    = 20 * time.Millisecond
)

func key(service, ns, pod string) string { return path.Join(storePrefix, service, ns, pod) }

// storedEndpoint reads one key back from the store with the suite's separate client.
// It returns nil when the key is absent.
func storedEndpoint(k string) (*store.Endpoint, int64) {
	GinkgoHelper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := storeClient.Get(ctx, k)
	Expect(err).NotTo(HaveOccurred())
	if len(resp.Kvs) == 0 {
		return nil, 0
	}
	var ep store.Endpoint
	Expect(json.Unmarshal(resp.Kvs[0].Value, &ep)).To(Succeed())
	return &ep, resp.Kvs[0].ModRevision
}

// storedPods lists the pod names under {prefix}/{service}/{ns}/.
func storedPods(service, ns string) []string {
	GinkgoHelper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := storeClient.Get(ctx, key(service, ns, "")+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	Expect(err).NotTo(HaveOccurred())
	pods := []string{}
	for _, kv := range resp.Kvs {
		pods = append(pods, path.Base(string(kv.Key)))
	}
	return pods
}

func eventuallyStored(service, ns string) AsyncAssertion {
	return Eventually(func() []string { return storedPods(service, ns) }).WithTimeout(timeout).WithPolling(poll)
}

func putRaw(k string, value any) {
	GinkgoHelper()
	b, err := json.Marshal(value)
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = storeClient.Put(ctx, k, string(b))
	Expect(err).NotTo(HaveOccurred())
}

// newRegistry creates a ServiceRegistry selecting app=<app> with an "http" port 8080 and a
// "metrics" port resolved from the container port named "metrics".
func newRegistry(ns, name, app string) *v1beta1.ServiceRegistry {
	GinkgoHelper()
	reg := &v1beta1.ServiceRegistry{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1beta1.ServiceRegistrySpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			Ports: []v1beta1.ServicePort{
				{Name: "http", Port: 8080},
				{Name: "metrics", TargetPort: "metrics"},
			},
		},
	}
	Expect(k8sClient.Create(context.Background(), reg)).To(Succeed())
	DeferCleanup(deleteRegistry, reg)
	return reg
}

// deleteRegistry deletes reg and waits until its finalizer ran, so no spec leaves work
// behind for the operator (envtest has no namespace controller to clean up).
func deleteRegistry(reg *v1beta1.ServiceRegistry) {
	GinkgoHelper()
	err := k8sClient.Delete(context.Background(), reg)
	if apierrors.IsNotFound(err) {
		return
	}
	Expect(err).NotTo(HaveOccurred())
	Eventually(func() bool {
		return apierrors.IsNotFound(k8sClient.Get(context.Background(), client.ObjectKeyFromObject(reg), &v1beta1.ServiceRegistry{}))
	}).WithTimeout(timeout).Should(BeTrue(), "ServiceRegistry %s was not finalized", reg.Name)
}

func getRegistry(reg *v1beta1.ServiceRegistry) *v1beta1.ServiceRegistry {
	GinkgoHelper()
	out := &v1beta1.ServiceRegistry{}
	Expect(k8sClient.Get(context.Background(), client.ObjectKeyFromObject(reg), out)).To(Succeed())
	return out
}

func condition(reg *v1beta1.ServiceRegistry, typ string) func() *metav1.Condition {
	return func() *metav1.Condition {
		return meta.FindStatusCondition(getRegistry(reg).Status.Conditions, typ)
	}
}

func haveCondition(status metav1.ConditionStatus, reason string) OmegaMatcher {
	return And(Not(BeNil()), WithTransform(func(c *metav1.Condition) metav1.ConditionStatus { return c.Status }, Equal(status)),
		WithTransform(func(c *metav1.Condition) string { return c.Reason }, Equal(reason)))
}

// newPod creates a pod that the kubelet has not started yet.
func newPod(ns, name string, labels map[string]string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	GinkgoHelper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "example.invalid/app:1",
			Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9090}},
		}}},
	}
	for _, m := range mutate {
		m(pod)
	}
	Expect(k8sClient.Create(context.Background(), pod)).To(Succeed())
	return pod
}

// setPodStatus plays the kubelet: phase, IP and the ContainersReady/Ready conditions. Like
// the kubelet it keeps conditions it does not own (registrar's gate); extra conditions are
// set as given.
func setPodStatus(pod *corev1.Pod, phase corev1.PodPhase, ip string, ready bool, extra ...*corev1.PodCondition) {
	GinkgoHelper()
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		return updatePodStatus(pod, phase, ip, ready, extra)
	})).To(Succeed())
}

func updatePodStatus(pod *corev1.Pod, phase corev1.PodPhase, ip string, ready bool, extra []*corev1.PodCondition) error {
	cur := &corev1.Pod{}
	if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(pod), cur); err != nil {
		return err
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	now := metav1.Now()
	cur.Status.Phase = phase
	cur.Status.PodIP = ip
	cur.Status.PodIPs = nil
	if ip != "" {
		cur.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	}
	conditions := []corev1.PodCondition{
		{Type: corev1.ContainersReady, Status: status, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: status, LastTransitionTime: now},
	}
	for _, c := range cur.Status.Conditions {
		if c.Type != corev1.ContainersReady && c.Type != corev1.PodReady && !hasType(extra, c.Type) {
			conditions = append(conditions, c)
		}
	}
	for _, c := range extra {
		conditions = append(conditions, *c)
	}
	cur.Status.Conditions = conditions
	if err := k8sClient.Status().Update(context.Background(), cur); err != nil {
		return err
	}
	*pod = *cur
	return nil
}

// updateRegistry applies mutate to the latest version of reg, retrying on conflicts with
// the operator's own writes.
func updateRegistry(reg *v1beta1.ServiceRegistry, mutate func(*v1beta1.ServiceRegistry)) {
	GinkgoHelper()
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := getRegistry(reg)
		mutate(cur)
		return k8sClient.Update(context.Background(), cur)
	})).To(Succeed())
}

func readyPod(ns, name string, labels map[string]string, ip string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	GinkgoHelper()
	pod := newPod(ns, name, labels, mutate...)
	setPodStatus(pod, corev1.PodRunning, ip, true)
	return pod
}

func deletePodNow(pod *corev1.Pod) {
	GinkgoHelper()
	Expect(k8sClient.Delete(context.Background(), pod, client.GracePeriodSeconds(0))).To(Succeed())
}

func hasType(conditions []*corev1.PodCondition, t corev1.PodConditionType) bool {
	for _, c := range conditions {
		if c.Type == t {
			return true
		}
	}
	return false
}
