package manifests

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/kustomize/api/resource"
)

// rules returns every RBAC rule rendered in objs, by the Role or ClusterRole holding it.
func rules(t *testing.T, objs map[string]*resource.Resource) map[string][]rbacv1.PolicyRule {
	t.Helper()
	out := map[string][]rbacv1.PolicyRule{}
	for key, r := range objs {
		switch r.GetKind() {
		case "ClusterRole":
			out[key] = decode[rbacv1.ClusterRole](t, objs, key).Rules
		case "Role":
			out[key] = decode[rbacv1.Role](t, objs, key).Rules
		}
	}
	return out
}

// TestRBACLeastPrivilege renders config/rbac (generated from the +kubebuilder:rbac markers)
// and both installs, and checks every rule (see ruleProblems).
func TestRBACLeastPrivilege(t *testing.T) {
	for _, dir := range []string{"rbac", "default", "default-selfsigned"} {
		t.Run(dir, func(t *testing.T) {
			all := rules(t, render(t, dir))
			if len(all) == 0 {
				t.Fatal("no Role or ClusterRole rendered")
			}
			for role, rs := range all {
				for i, r := range rs {
					if storePKIRule(role, r) {
						continue
					}
					for _, p := range ruleProblems(r) {
						t.Errorf("%s rule %d: %s: %+v", role, i, p, r)
					}
				}
			}
		})
	}
}

// ruleProblems lists what makes an RBAC rule more than least privilege: a wildcard verb,
// resource, API group or resource name; a verb that escalates (escalate, bind, impersonate);
// non-resource URLs; any access to Secrets (the store's TLS client certificate, when used,
// is mounted from its Secret by the kubelet, not read through the API), to exec, attach or
// token requests; and writes to pods (registrar only patches pods/status).
func ruleProblems(r rbacv1.PolicyRule) []string {
	var out []string
	if len(r.Verbs) == 0 || len(r.Resources) == 0 {
		out = append(out, "no explicit verbs or resources")
	}
	for _, field := range [][]string{r.Verbs, r.APIGroups, r.Resources, r.ResourceNames} {
		for _, s := range field {
			if strings.Contains(s, "*") {
				out = append(out, fmt.Sprintf("wildcard %q", s))
			}
		}
	}
	for _, v := range r.Verbs {
		if slices.Contains([]string{"escalate", "bind", "impersonate"}, v) {
			out = append(out, fmt.Sprintf("escalating verb %q", v))
		}
	}
	if len(r.NonResourceURLs) > 0 {
		out = append(out, fmt.Sprintf("non-resource URLs %v", r.NonResourceURLs))
	}
	for _, res := range r.Resources {
		if strings.HasPrefix(res, "secrets") || slices.Contains([]string{"pods/exec", "pods/attach", "pods/portforward", "serviceaccounts/token"}, res) {
			out = append(out, fmt.Sprintf("access to %s", res))
		}
	}
	if slices.Contains(r.Resources, "pods") && slices.ContainsFunc(r.Verbs, func(v string) bool {
		return slices.Contains([]string{"create", "update", "patch", "delete", "deletecollection"}, v)
	}) {
		out = append(out, "writes pods")
	}
	return out
}

// storePKIRule is the only access to Secrets an install grants: the manager reads and fills
// the bundled store's PKI Secret (config/components/etcd) and the self-signed webhook
// certificate's Secret (config/default-selfsigned), each by name, get and update only (the
// install creates them).
func storePKIRule(role string, r rbacv1.PolicyRule) bool {
	secret := map[string]string{"Role/registrar-etcd-pki": "registrar-etcd-tls", "Role/registrar-webhook-cert": "registrar-webhook-self-signed-cert"}[role]
	return secret != "" && slices.Equal(r.APIGroups, []string{""}) &&
		slices.Equal(r.Resources, []string{"secrets"}) && slices.Equal(r.ResourceNames, []string{secret}) &&
		!slices.ContainsFunc(r.Verbs, func(v string) bool { return v != "get" && v != "update" })
}

// TestRuleProblemsCatches shows that the RBAC check rejects what it is meant to.
func TestRuleProblemsCatches(t *testing.T) {
	bad := map[string]rbacv1.PolicyRule{
		"wildcard verb":     {APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"*"}},
		"wildcard group":    {APIGroups: []string{"*"}, Resources: []string{"pods"}, Verbs: []string{"get"}},
		"wildcard resource": {APIGroups: []string{""}, Resources: []string{"*"}, Verbs: []string{"get"}},
		"subresources":      {APIGroups: []string{""}, Resources: []string{"pods/*"}, Verbs: []string{"get"}},
		"secrets":           {APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}},
		"escalate":          {APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}, Verbs: []string{"escalate"}},
		"exec":              {APIGroups: []string{""}, Resources: []string{"pods/exec"}, Verbs: []string{"create"}},
		"pod writes":        {APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"delete"}},
		"non-resource":      {NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}},
	}
	for name, r := range bad {
		if len(ruleProblems(r)) == 0 {
			t.Errorf("%s: %+v passes the check", name, r)
		}
	}
	ok := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods/status"}, Verbs: []string{"patch"}}
	if p := ruleProblems(ok); len(p) != 0 {
		t.Errorf("pods/status patch: %v", p)
	}
}

// TestManagerHardened: in both installs the manager runs as non-root, with a read-only root
// filesystem, no privilege escalation, no capabilities, the runtime's default seccomp
// profile, no host namespaces and no hostPath volumes.
func TestManagerHardened(t *testing.T) {
	for _, dir := range []string{"default", "default-selfsigned"} {
		t.Run(dir, func(t *testing.T) {
			pod := decode[appsv1.Deployment](t, render(t, dir), "Deployment/"+manager).Spec.Template.Spec
			psc := pod.SecurityContext
			if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
				t.Errorf("pod securityContext.runAsNonRoot is not true: %+v", psc)
			}
			if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("pod seccompProfile is not RuntimeDefault: %+v", psc)
			}
			if psc != nil && psc.RunAsUser != nil && *psc.RunAsUser == 0 {
				t.Error("pod runs as uid 0")
			}
			if pod.HostNetwork || pod.HostPID || pod.HostIPC {
				t.Error("manager shares a host namespace")
			}
			for _, v := range pod.Volumes {
				if v.HostPath != nil {
					t.Errorf("volume %s is a hostPath", v.Name)
				}
			}
			for _, c := range pod.Containers {
				for _, p := range containerProblems(c) {
					t.Errorf("container %s: %s", c.Name, p)
				}
			}
		})
	}
}

func containerProblems(c corev1.Container) []string {
	sc := c.SecurityContext
	if sc == nil {
		return []string{"no securityContext"}
	}
	var out []string
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		out = append(out, "readOnlyRootFilesystem is not true")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		out = append(out, "allowPrivilegeEscalation is not false")
	}
	if sc.Privileged != nil && *sc.Privileged {
		out = append(out, "privileged")
	}
	if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
		out = append(out, fmt.Sprintf("capabilities %+v, want drop ALL and add none", sc.Capabilities))
	}
	if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
		out = append(out, "runs as uid 0")
	}
	return out
}
