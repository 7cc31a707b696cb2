package controller_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// Issue 34, defect 10: the owner index (storesync) forgets a registry once it is deleted,
// so that it does not grow with every registry the operator ever saw.
var _ = Describe("The owner index of renames", func() {
	It("holds nothing of registries that were deleted", func() {
		ns := newNamespace()
		const n = 5
		var uids []types.UID
		var regs []*v1beta1.ServiceRegistry
		for i := range n {
			app := fmt.Sprintf("app-%d", i)
			reg := newRegistry(ns, app, app)
			readyPod(ns, app+"-1", map[string]string{"app": app}, fmt.Sprintf("10.0.1.%d", i+1))
			eventuallyStored(app, ns).Should(ConsistOf(app + "-1"))
			uids = append(uids, getRegistry(reg).UID)
			regs = append(regs, reg)
		}
		Eventually(func() int { return operator.r.OwnerIndexHolds(uids...) }).WithTimeout(timeout).Should(Equal(n),
			"the owner index never recorded the registries: the test proves nothing")
		for _, reg := range regs {
			deleteRegistry(reg)
		}
		Eventually(func() int { return operator.r.OwnerIndexHolds(uids...) }).WithTimeout(timeout).Should(BeZero(),
			"the owner index still holds deleted registries")
	})
})
