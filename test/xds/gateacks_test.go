package xds_test

import (
	"context"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	adsclient "github.com/envoyproxy/go-control-plane/pkg/client/sotw/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

func gated(p *corev1.Pod) {
	p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: v1beta1.ReadinessGate}}
}

// setContainersReady plays the kubelet for a gated pod: its containers are ready, the pod
// is not Ready until the gate is True.
func setContainersReady(pod *corev1.Pod, ip string) {
	GinkgoHelper()
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &corev1.Pod{}
		if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(pod), cur); err != nil {
			return err
		}
		now := metav1.Now()
		cur.Status.Phase = corev1.PodRunning
		cur.Status.PodIP = ip
		cur.Status.PodIPs = []corev1.PodIP{{IP: ip}}
		cur.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: now},
		}
		return k8sClient.Status().Update(context.Background(), cur)
	})).To(Succeed())
}

func gateStatus(pod *corev1.Pod) corev1.ConditionStatus {
	cur := &corev1.Pod{}
	Expect(k8sClient.Get(context.Background(), client.ObjectKeyFromObject(pod), cur)).To(Succeed())
	for _, c := range cur.Status.Conditions {
		if c.Type == v1beta1.ReadinessGate {
			return c.Status
		}
	}
	return ""
}

// stuckClient is a raw ADS client (go-control-plane's) subscribed to every
// ClusterLoadAssignment that acknowledges its first response and then only when released.
type stuckClient struct {
	c       adsclient.ADSClient
	release chan struct{}
}

func newStuckClient(node string) *stuckClient {
	GinkgoHelper()
	ctx, cancel := context.WithCancel(context.Background())
	DeferCleanup(cancel)
	cc, err := grpc.NewClient(xdsAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(cc.Close)
	s := &stuckClient{c: adsclient.NewADSClient(ctx, &corev3.Node{Id: node}, resourcev3.EndpointType), release: make(chan struct{})}
	Expect(s.c.InitConnect(cc)).To(Succeed())
	_, err = s.c.Fetch()
	Expect(err).NotTo(HaveOccurred())
	Expect(s.c.Ack()).To(Succeed())
	go func() {
		defer GinkgoRecover()
		select {
		case <-s.release:
		case <-ctx.Done():
			return
		}
		for ctx.Err() == nil { // from now on, acknowledge everything
			if _, err := s.c.Fetch(); err != nil {
				return
			}
			if err := s.c.Ack(); err != nil {
				return
			}
		}
	}()
	return s
}

// The readiness gate waits for xDS ACKs (--xds-gate-ack-timeout, issue 17): a new pod's gate
// opens only once the connected xDS clients subscribed to its registry acknowledged it, and
// at the latest the timeout after it was pushed, whatever a stuck client does.
var _ = Describe("Readiness gate and xDS ACKs", func() {
	It("opens a gate once the subscribed clients ACKed the pod, or after the timeout", func() {
		ns := newNamespace()
		port, _ := startBackends(52, "gate-1", "gate-2", "gate-3")
		newRegistry(ns, "gate", "gate", port)
		setReady(newPod(ns, "gate-1", "gate"), "127.0.0.52", true)
		c := xdsClient("client-gate", "gate."+ns)
		Eventually(func() []string { return keys(served(c, 10)) }).WithTimeout(timeout).WithPolling(poll).Should(ConsistOf("gate-1"))

		// A client that does not acknowledge holds the gate; its ACK opens it.
		stuck := newStuckClient("stuck-a")
		p2 := newPod(ns, "gate-2", "gate", gated)
		setContainersReady(p2, "127.0.0.53")
		Eventually(func() map[string]string { return published("gate." + ns) }).WithTimeout(timeout).WithPolling(poll).
			Should(HaveKeyWithValue("gate-2", "HEALTHY"))
		pushed := time.Now()
		// The gRPC client has it (it acknowledges at once) ...
		Eventually(func() []string { return keys(served(c, 20)) }).WithTimeout(timeout).WithPolling(poll).Should(ConsistOf("gate-1", "gate-2"))
		// ... the stuck one does not: the gate stays closed.
		Consistently(func() corev1.ConditionStatus { return gateStatus(p2) }).WithTimeout(2 * time.Second).WithPolling(100 * time.Millisecond).
			ShouldNot(Equal(corev1.ConditionTrue))
		released := time.Now()
		close(stuck.release)
		Eventually(func() corev1.ConditionStatus { return gateStatus(p2) }).WithTimeout(timeout).WithPolling(poll).Should(Equal(corev1.ConditionTrue))
		GinkgoWriter.Printf("gate opened %v after the stuck client was released\n", time.Since(released))
		Expect(time.Since(pushed)).To(BeNumerically("<", gateAckTimeout), "the gate opened by the timeout, not by the ACK")

		// A client that never acknowledges holds a gate for the timeout only.
		newStuckClient("stuck-b")
		p3 := newPod(ns, "gate-3", "gate", gated)
		setContainersReady(p3, "127.0.0.54")
		Eventually(func() map[string]string { return published("gate." + ns) }).WithTimeout(timeout).WithPolling(poll).
			Should(HaveKeyWithValue("gate-3", "HEALTHY"))
		pushed = time.Now()
		Eventually(func() corev1.ConditionStatus { return gateStatus(p3) }).WithTimeout(timeout).WithPolling(poll).Should(Equal(corev1.ConditionTrue))
		waited := time.Since(pushed)
		GinkgoWriter.Printf("gate held by a dead client opened after %v (timeout %v)\n", waited, gateAckTimeout)
		Expect(waited).To(BeNumerically(">=", gateAckTimeout-time.Second), "the gate opened before the timeout although a client never acknowledged")
	})
})
