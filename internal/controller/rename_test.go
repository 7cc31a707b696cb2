package controller_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// Rename must not orphan records (issue 13, hole 10): which services hold a registry's
// records is found in the store (each value carries its owner), not only in
// status.serviceName, which is written asynchronously and can be lost in a crash.
var _ = Describe("Renaming a registry's service", Serial, func() {
	It("removes the records under the old name even when status.serviceName never recorded it", func() {
		ctx := context.Background()
		ns := newNamespace()
		reg := newRegistry(ns, "web", "web")
		readyPod(ns, "web-1", web, "10.0.0.1")
		readyPod(ns, "web-2", web, "10.0.0.2")
		eventuallyStored("web", ns).Should(ConsistOf("web-1", "web-2"))

		// The operator dies right after the rename lands, before it wrote any status of it,
		// and the status it had written is lost too (a status write that never landed).
		operator.stop()
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur := getRegistry(reg)
			cur.Spec.ServiceName = "web-renamed"
			return k8sClient.Update(ctx, cur)
		})).To(Succeed())
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur := getRegistry(reg)
			cur.Status.ServiceName = ""
			return k8sClient.Status().Update(ctx, cur)
		})).To(Succeed())
		Expect(getRegistry(reg).Status.ServiceName).To(BeEmpty())

		operator = startOperator()
		eventuallyStored("web-renamed", ns).Should(ConsistOf("web-1", "web-2"))
		eventuallyStored("web", ns).Should(BeEmpty(), "the records under the old service name were orphaned")
		Eventually(func() string { return getRegistry(reg).Status.ServiceName }).WithTimeout(timeout).Should(Equal("web-renamed"))

		deleteRegistry(reg)
		eventuallyStored("web-renamed", ns).Should(BeEmpty())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(reg), &v1beta1.ServiceRegistry{})).NotTo(Succeed())
	})
})
