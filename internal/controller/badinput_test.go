package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/registrar-dev/registrar/api/v1alpha1"
)

// invalidSpec is one ServiceRegistry the API server must refuse, and the field its message
// must name.
type invalidSpec struct {
	name  string
	spec  string // the JSON of spec
	field string // substring the error must contain: the field path
	also  string // another substring (the rule's message), optional
}

const okSelector = `"selector":{"matchLabels":{"app":"x"}}`
const okPorts = `"ports":[{"name":"http","port":8080}]`

// invalidSpecs are hostile or malformed specs: each must be rejected by the CRD's OpenAPI
// schema or CEL rules (config/crd/bases) with a message naming the field.
var invalidSpecs = []invalidSpec{
	{"empty selector", `{"selector":{}}`, "spec.selector", "selector must not be empty"},
	{"empty matchLabels", `{"selector":{"matchLabels":{}}}`, "spec.selector", "selector must not be empty"},
	{"missing selector", `{` + okPorts + `}`, "spec.selector", "Required value"},
	{"serviceName not a label", `{"serviceName":"Not_A_Label",` + okSelector + `}`, "spec.serviceName", ""},
	{"serviceName with a slash", `{"serviceName":"a/b",` + okSelector + `}`, "spec.serviceName", ""},
	{"serviceName dot-dot", `{"serviceName":"..",` + okSelector + `}`, "spec.serviceName", ""},
	{"serviceName of 64 characters", `{"serviceName":"` + strings.Repeat("a", 64) + `",` + okSelector + `}`, "spec.serviceName", ""},
	{"duplicate port names", `{` + okSelector + `,"ports":[{"name":"http","port":1},{"name":"http","port":2}]}`, "spec.ports", "ports[].name must be unique"},
	{"port and targetPort", `{` + okSelector + `,"ports":[{"name":"http","port":1,"targetPort":"http"}]}`, "spec.ports[0]", "exactly one of port or targetPort"},
	{"neither port nor targetPort", `{` + okSelector + `,"ports":[{"name":"http"}]}`, "spec.ports[0]", "exactly one of port or targetPort"},
	{"port 0", `{` + okSelector + `,"ports":[{"name":"http","port":0}]}`, "spec.ports[0].port", ""},
	{"port 70000", `{` + okSelector + `,"ports":[{"name":"http","port":70000}]}`, "spec.ports[0].port", ""},
	{"port as a string", `{` + okSelector + `,"ports":[{"name":"http","port":"eighty"}]}`, "spec.ports[0].port", ""},
	{"upper-case port name", `{` + okSelector + `,"ports":[{"name":"HTTP","port":80}]}`, "spec.ports[0].name", ""},
	{"targetPort of 16 characters", `{` + okSelector + `,"ports":[{"name":"http","targetPort":"abcdefghijklmnop"}]}`, "spec.ports[0].targetPort", ""},
	{"33 ports", `{` + okSelector + `,"ports":[` + manyPorts(33) + `]}`, "spec.ports", "Too many"},
	{"negative drain", `{` + okSelector + `,"drain":{"seconds":-1}}`, "spec.drain.seconds", ""},
	{"drain over an hour", `{` + okSelector + `,"drain":{"seconds":3601}}`, "spec.drain.seconds", ""},
	{"drain as a string", `{` + okSelector + `,"drain":{"seconds":"ten"}}`, "spec.drain.seconds", ""},
	{"negative caller cache", `{` + okSelector + `,"drain":{"callerCacheSeconds":-5}}`, "spec.drain.callerCacheSeconds", ""},
	{"zero warm-up requests", `{` + okSelector + `,` + okPorts + `,"warmup":{"paths":["/"],"requests":0}}`, "spec.warmup.requests", ""},
	{"a million warm-up requests", `{` + okSelector + `,` + okPorts + `,"warmup":{"paths":["/"],"requests":1000000}}`, "spec.warmup.requests", ""},
	{"negative warm-up requests", `{` + okSelector + `,` + okPorts + `,"warmup":{"paths":["/"],"requests":-10}}`, "spec.warmup.requests", ""},
	{"warm-up concurrency 65", `{` + okSelector + `,` + okPorts + `,"warmup":{"paths":["/"],"concurrency":65}}`, "spec.warmup.concurrency", ""},
	{"warm-up without paths", `{` + okSelector + `,` + okPorts + `,"warmup":{"paths":[]}}`, "spec.warmup.paths", ""},
	{"warm-up path without slash", `{` + okSelector + `,` + okPorts + `,"warmup":{"paths":["healthz"]}}`, "spec.warmup.paths[0]", ""},
	{"warm-up path with CRLF", `{` + okSelector + `,` + okPorts + `,"warmup":{"paths":["/x\r\nHost: evil"]}}`, "spec.warmup.paths[0]", ""},
	{"warm-up path with a space", `{` + okSelector + `,` + okPorts + `,"warmup":{"paths":["/a b"]}}`, "spec.warmup.paths[0]", ""},
	{"17 warm-up paths", `{` + okSelector + `,` + okPorts + `,"warmup":{"paths":[` + strings.TrimSuffix(strings.Repeat(`"/p",`, 17), ",") + `]}}`, "spec.warmup.paths", "Too many"},
	{"warm-up path of 1025 bytes", `{` + okSelector + `,` + okPorts + `,"warmup":{"paths":["/` + strings.Repeat("a", 1024) + `"]}}`, "spec.warmup.paths[0]", ""},
	{"warm-up timeout not a duration", `{` + okSelector + `,` + okPorts + `,"warmup":{"paths":["/"],"timeout":"abc"}}`, "spec.warmup.timeout", ""},
	{"negative warm-up timeout", `{` + okSelector + `,` + okPorts + `,"warmup":{"paths":["/"],"timeout":"-5s"}}`, "spec.warmup.timeout", ""},
	{"warm-up timeout of two days", `{` + okSelector + `,` + okPorts + `,"warmup":{"paths":["/"],"timeout":"48h"}}`, "spec.warmup.timeout", "between 1s and 1h"},
	{"zero request timeout", `{` + okSelector + `,` + okPorts + `,"warmup":{"paths":["/"],"requestTimeout":"0s"}}`, "spec.warmup.requestTimeout", "between 10ms and 5m"},
	{"minDuration longer than timeout", `{` + okSelector + `,` + okPorts + `,"warmup":{"paths":["/"],"timeout":"10s","minDuration":"20s"}}`, "spec.warmup.minDuration", "must not be longer than timeout"},
	{"requestTimeout longer than timeout", `{` + okSelector + `,` + okPorts + `,"warmup":{"paths":["/"],"timeout":"2s","requestTimeout":"3s"}}`, "spec.warmup.requestTimeout", "must not be longer than timeout"},
	{"warm-up without ports", `{` + okSelector + `,"warmup":{"paths":["/"]}}`, "spec.warmup", "needs at least one entry in ports"},
	{"warm-up port naming no port", `{` + okSelector + `,` + okPorts + `,"warmup":{"paths":["/"],"port":"grpc"}}`, "spec.warmup.port", "must name an entry of ports"},
	{"unknown onFailure", `{` + okSelector + `,` + okPorts + `,"warmup":{"paths":["/"],"onFailure":"Retry"}}`, "spec.warmup.onFailure", ""},
}

func manyPorts(n int) string {
	ports := make([]string, n)
	for i := range ports {
		ports[i] = fmt.Sprintf(`{"name":"p%d","port":%d}`, i, 1000+i)
	}
	return strings.Join(ports, ",")
}

var _ = Describe("Hostile input", func() {
	var (
		ctx context.Context
		ns  string
	)
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace()
	})

	// healthy creates a registry with one registered pod, to show that it keeps its
	// registration whatever else the test throws at the operator.
	healthy := func() func() {
		GinkgoHelper()
		newRegistry(ns, "healthy", "healthy")
		readyPod(ns, "healthy-1", map[string]string{"app": "healthy"}, "10.1.0.1")
		eventuallyStored("healthy", ns).Should(ConsistOf("healthy-1"))
		return func() {
			GinkgoHelper()
			Consistently(func() []string { return storedPods("healthy", ns) }).WithTimeout(timeout / 5).WithPolling(poll).
				Should(ConsistOf("healthy-1"), "the healthy registry lost its registration")
			Expect(getRegistry(&v1alpha1.ServiceRegistry{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "healthy"}}).Status.Registered).To(Equal(int32(1)))
		}
	}

	It("rejects hostile ServiceRegistry specs at the API server, naming the field", func() {
		stillServing := healthy()
		Expect(len(invalidSpecs)).To(BeNumerically(">=", 20))
		for i, tc := range invalidSpecs {
			var spec map[string]any
			Expect(json.Unmarshal([]byte(tc.spec), &spec)).To(Succeed(), tc.name)
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": v1alpha1.GroupVersion.String(), "kind": "ServiceRegistry",
				"metadata": map[string]any{"namespace": ns, "name": fmt.Sprintf("bad-%d", i)},
				"spec":     spec,
			}}
			err := k8sClient.Create(ctx, u)
			Expect(err).To(HaveOccurred(), "%s: the API server accepted %s", tc.name, tc.spec)
			Expect(err.Error()).To(ContainSubstring(tc.field), tc.name)
			Expect(err.Error()).To(ContainSubstring(tc.also), tc.name)
			GinkgoWriter.Printf("%-36s -> %s\n", tc.name, err)
		}
		var list v1alpha1.ServiceRegistryList
		Expect(k8sClient.List(ctx, &list)).To(Succeed())
		for _, r := range list.Items {
			Expect(r.Name).NotTo(HavePrefix("bad-"))
		}
		stillServing()
	})
})
