package enqueue

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// TestRegisteredPodGone: the startup triage picks the registries whose status reports a pod
// Registered that the cache no longer holds (deleted while no operator ran), or holds as a
// new pod of the same name; not those whose registered pods are all there, nor for pods the
// status reports in another state.
func TestRegisteredPodGone(t *testing.T) {
	pods := map[types.NamespacedName]types.UID{
		{Namespace: "shop", Name: "web-a"}:  "a1",
		{Namespace: "shop", Name: "web-b"}:  "b2",
		{Namespace: "other", Name: "web-z"}: "z1",
	}
	ep := func(pod, uid string, state v1beta1.EndpointState) v1beta1.EndpointStatus {
		return v1beta1.EndpointStatus{Pod: pod, UID: uid, State: state}
	}
	for _, tc := range []struct {
		name string
		eps  []v1beta1.EndpointStatus
		want bool
	}{
		{"every registered pod there", []v1beta1.EndpointStatus{ep("web-a", "a1", v1beta1.EndpointRegistered), ep("web-b", "b2", v1beta1.EndpointRegistered)}, false},
		{"no endpoints", nil, false},
		{"a registered pod deleted", []v1beta1.EndpointStatus{ep("web-a", "a1", v1beta1.EndpointRegistered), ep("web-c", "c1", v1beta1.EndpointRegistered)}, true},
		{"a registered pod replaced by one of the same name", []v1beta1.EndpointStatus{ep("web-b", "b1", v1beta1.EndpointRegistered)}, true},
		{"a pod gone that was not registered", []v1beta1.EndpointStatus{ep("web-c", "c1", v1beta1.EndpointUnready)}, false},
		{"another namespace's pod of that name does not count", []v1beta1.EndpointStatus{ep("web-z", "z1", v1beta1.EndpointRegistered)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := &v1beta1.ServiceRegistry{}
			reg.Namespace, reg.Name = "shop", "web"
			reg.Status.Endpoints = tc.eps
			if got := RegisteredPodGone(reg, pods); got != tc.want {
				t.Errorf("RegisteredPodGone = %v, want %v", got, tc.want)
			}
		})
	}
}
