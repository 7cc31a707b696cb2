package manifests

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestEurekaAPIInstall renders config/eureka-api (config/default plus the eureka-api
// component): the manager install unchanged, a hardened 2-replica eureka-api Deployment in
// registrar's namespace with probes and resources, reading the manager's store, and a Service
// that selects its pods and not the manager's.
func TestEurekaAPIInstall(t *testing.T) {
	objs := render(t, "eureka-api")
	checkCommon(t, objs)
	base := render(t, "default")
	for key := range base {
		if _, ok := objs[key]; !ok {
			t.Errorf("%s of config/default missing", key)
		}
	}
	d := decode[appsv1.Deployment](t, objs, "Deployment/registrar-eureka-api")
	if d.Namespace != ns || *d.Spec.Replicas != 2 {
		t.Errorf("namespace %q replicas %d", d.Namespace, *d.Spec.Replicas)
	}
	pod := d.Spec.Template.Spec
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v", psc)
	}
	c := pod.Containers[0]
	for _, p := range containerProblems(c) {
		t.Errorf("container %s: %s", c.Name, p)
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("probes %+v %+v", c.ReadinessProbe, c.LivenessProbe)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v", c.Resources)
	}
	mgr := decode[appsv1.Deployment](t, objs, "Deployment/"+manager)
	// The store a container reaches: --store-endpoints, else (and for $(VAR)) the
	// REGISTRAR_STORE_ENDPOINTS of its environment (the bundled store, config/components/etcd).
	storeArg := func(c corev1.Container) string {
		v := ""
		for _, a := range c.Args {
			if strings.HasPrefix(a, "--store-endpoints=") {
				v = strings.TrimPrefix(a, "--store-endpoints=")
			}
		}
		if v == "" || v == "$(REGISTRAR_STORE_ENDPOINTS)" {
			for _, e := range c.Env {
				if e.Name == "REGISTRAR_STORE_ENDPOINTS" {
					v = e.Value
				}
			}
		}
		return v
	}
	if got, want := storeArg(c), storeArg(mgr.Spec.Template.Spec.Containers[0]); got == "" || got != want {
		t.Errorf("eureka-api %q, manager %q: not the same store", got, want)
	}
	svc := decode[corev1.Service](t, objs, "Service/registrar-eureka-api")
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	if svc.Namespace != ns || !sel.Matches(labels.Set(d.Spec.Template.Labels)) || sel.Matches(labels.Set(mgr.Spec.Template.Labels)) {
		t.Errorf("Service %s/%s selector %v: eureka-api pods %v, manager pods %v", svc.Namespace, svc.Name, svc.Spec.Selector, d.Spec.Template.Labels, mgr.Spec.Template.Labels)
	}
	mgrSel := labels.SelectorFromSet(mgr.Spec.Selector.MatchLabels)
	if mgrSel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Error("the manager's selector selects eureka-api pods")
	}
}
