package manifests

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resource"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

const (
	etcdName   = "registrar-etcd"
	etcdSecret = "registrar-etcd-tls"
	// storeTLSDir is where the manager writes the store PKI's CA and client certificate
	// (cmd's --store-self-signed-dir default); its root filesystem is read-only.
	storeTLSDir = "/tmp/registrar-store-tls"
)

// TestBundledStore: both kustomize installs bring the etcd of config/components/etcd (three
// members over TLS, a PodDisruptionBudget, a volume each) and point the manager at it with
// the self-signed store PKI, which the manager can write where it expects to.
func TestBundledStore(t *testing.T) {
	for _, dir := range []string{"default", "default-selfsigned"} {
		t.Run(dir, func(t *testing.T) {
			checkBundledStore(t, render(t, dir), 3)
		})
	}
}

// TestBundledStoreSingleNode: config/components/etcd-single-node after config/components/etcd
// gives one member, and the manager reaches exactly that member.
func TestBundledStoreSingleNode(t *testing.T) {
	for _, base := range []string{"default", "default-selfsigned"} {
		t.Run(base, func(t *testing.T) {
			abs, err := filepath.Abs("../../config")
			if err != nil {
				t.Fatal(err)
			}
			// kustomize takes other kustomizations by relative path only.
			dir := t.TempDir()
			rel, err := filepath.Rel(dir, abs)
			if err != nil {
				t.Fatal(err)
			}
			k := "resources:\n- " + filepath.Join(rel, base) + "\ncomponents:\n- " + filepath.Join(rel, "components/etcd-single-node") + "\n"
			if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o600); err != nil {
				t.Fatal(err)
			}
			resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
			if err != nil {
				t.Fatalf("kustomize build: %v", err)
			}
			objs := map[string]*resource.Resource{}
			for _, r := range resMap.Resources() {
				objs[r.GetKind()+"/"+r.GetName()] = r
			}
			checkBundledStore(t, objs, 1)
		})
	}
}

func checkBundledStore(t *testing.T, objs map[string]*resource.Resource, members int) {
	t.Helper()
	s := decode[appsv1.StatefulSet](t, objs, "StatefulSet/"+etcdName)
	if s.Namespace != ns || s.Spec.Replicas == nil || int(*s.Spec.Replicas) != members || s.Spec.ServiceName != etcdName {
		t.Errorf("etcd StatefulSet %s/%s replicas %v serviceName %q, want %d members behind %s", s.Namespace, s.Name, s.Spec.Replicas, s.Spec.ServiceName, members, etcdName)
	}
	if len(s.Spec.VolumeClaimTemplates) != 1 || s.Spec.VolumeClaimTemplates[0].Name != "data" {
		t.Errorf("etcd volumeClaimTemplates %+v, want one named data", s.Spec.VolumeClaimTemplates)
	}
	ps := s.Spec.Template.Spec
	if ps.Affinity == nil || ps.Affinity.PodAntiAffinity == nil || len(ps.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 0 {
		t.Errorf("etcd members have no preferred anti-affinity: %+v", ps.Affinity)
	}
	if !slices.ContainsFunc(ps.Volumes, func(v corev1.Volume) bool { return v.Secret != nil && v.Secret.SecretName == etcdSecret }) {
		t.Errorf("etcd members do not mount %s: %+v", etcdSecret, ps.Volumes)
	}
	c := ps.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if got := strings.Count(env["ETCD_INITIAL_CLUSTER"], "="); got != members {
		t.Errorf("ETCD_INITIAL_CLUSTER %q names %d members, want %d", env["ETCD_INITIAL_CLUSTER"], got, members)
	}
	for _, k := range []string{"ETCD_CLIENT_CERT_AUTH", "ETCD_PEER_CLIENT_CERT_AUTH"} {
		if env[k] != "true" {
			t.Errorf("%s = %q, want true", k, env[k])
		}
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("etcd resources %+v", c.Resources)
	}
	checkEtcdObjects(t, objs)
	checkManagerStore(t, objs, members)
}

// checkEtcdObjects: the members' headless Service, their PodDisruptionBudget and the PKI
// Secret, installed empty.
func checkEtcdObjects(t *testing.T, objs map[string]*resource.Resource) {
	t.Helper()
	svc := decode[corev1.Service](t, objs, "Service/"+etcdName)
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("etcd Service clusterIP %q publishNotReadyAddresses %v, want headless and publishing", svc.Spec.ClusterIP, svc.Spec.PublishNotReadyAddresses)
	}
	pdb := decode[policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget/"+etcdName)
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("etcd PodDisruptionBudget maxUnavailable %v, want 1", pdb.Spec.MaxUnavailable)
	}
	if sec := decode[corev1.Secret](t, objs, "Secret/"+etcdSecret); len(sec.Data) != 0 || len(sec.StringData) != 0 {
		t.Errorf("the PKI Secret ships with data %v: the manager fills it", sec.Data)
	}
}

// checkManagerStore: the manager keeps the store PKI and reaches the members over TLS.
func checkManagerStore(t *testing.T, objs map[string]*resource.Resource, members int) {
	t.Helper()
	d := decode[appsv1.Deployment](t, objs, "Deployment/"+manager)
	mc := d.Spec.Template.Spec.Containers[0]
	args := strings.Join(mc.Args, " ")
	if !strings.Contains(args, "--store-self-signed-secret="+etcdSecret) || !strings.Contains(args, "--store-self-signed-hosts=*."+etcdName+".$(POD_NAMESPACE).svc") {
		t.Errorf("manager args %q do not keep the store PKI in %s for the members' names", args, etcdSecret)
	}
	if strings.Contains(args, "--store-endpoints=") {
		t.Errorf("manager args %q name a store other than the bundled one", args)
	}
	var endpoints string
	for _, e := range mc.Env {
		if e.Name == "REGISTRAR_STORE_ENDPOINTS" {
			endpoints = e.Value
		}
	}
	if eps := strings.Split(endpoints, ","); len(eps) != members || !strings.HasPrefix(eps[0], "https://"+etcdName+"-0."+etcdName+".$(POD_NAMESPACE).svc:2379") {
		t.Errorf("manager REGISTRAR_STORE_ENDPOINTS %q, want the %d members over TLS", endpoints, members)
	}
	// The manager writes the PKI's files under storeTLSDir: a writable volume must be there.
	mount := slices.IndexFunc(mc.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == storeTLSDir })
	if mount < 0 {
		t.Fatalf("manager mounts nothing at %s (read-only root filesystem): %+v", storeTLSDir, mc.VolumeMounts)
	}
	if !slices.ContainsFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
		return v.Name == mc.VolumeMounts[mount].Name && v.EmptyDir != nil
	}) {
		t.Errorf("manager volume %q (mounted at %s) is not an emptyDir of the pod: %+v", mc.VolumeMounts[mount].Name, storeTLSDir, d.Spec.Template.Spec.Volumes)
	}
}
