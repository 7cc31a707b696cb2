// Package helm tests charts/registrar with the helm CLI (bin/helm-<version>, built from the
// module proxy by the Makefile and not linked into the operator): helm lint and helm template
// over the value combinations the chart documents, the chart's copies of generated files,
// the rendered chart against the kustomize installs, and a real helm install, upgrade and
// uninstall against envtest's kube-apiserver.
package helm

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/registrar-dev/registrar/test/support/helmtest"
)

const (
	root     = "../.."
	chartDir = root + "/charts/registrar"
	ns       = "registrar-system"
	release  = "registrar"
)

// helm runs the helm CLI with an isolated home and returns stdout; stderr goes into the error.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	home := t.TempDir()
	cmd := exec.CommandContext(ctx, helmtest.Bin(t), args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config",
		"HELM_DATA_HOME="+home+"/data")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// setArgs turns values into --set flags, in a stable order.
func setArgs(values map[string]string) []string {
	var out []string
	for k, v := range values {
		out = append(out, "--set", k+"="+v)
	}
	slices.Sort(out) // pairs stay adjacent: every flag is "--set", each value unique
	var args []string
	for _, v := range out {
		if v != "--set" {
			args = append(args, "--set", v)
		}
	}
	return args
}

// valueSets are the combinations the chart documents; each must lint and render.
var valueSets = map[string]map[string]string{
	"default":    nil,
	"selfSigned": {"webhook.certificate.mode": "selfSigned", "replicaCount": "1"},
	"secret": {"webhook.certificate.mode": "secret", "webhook.certificate.secretName": "my-webhook-tls",
		"webhook.certificate.caBundle": "Y2EK"},
	"clusterIssuer": {"webhook.certificate.certManager.issuerRef.kind": "ClusterIssuer",
		"webhook.certificate.certManager.issuerRef.name": "my-ca"},
	"observability": {"metrics.serviceMonitor.enabled": "true", "metrics.prometheusRule.enabled": "true", "metrics.prometheusRule.labels.release": "prometheus",
		"xds.bindAddress": ":18000", "xds.allowInsecure": "true", "xds.service.enabled": "true"},
	"xdsTLS": {"xds.bindAddress": ":18000", "xds.tls.secretName": "xds-serving", "xds.tls.clientCAKey": "ca.crt"},
	"storeTLS": {"store.endpoints": "https://etcd-0.etcd:2379\\,https://etcd-1.etcd:2379", "store.tls.secretName": "etcd-client",
		"store.prefix": "/prod/services"},
	"noWebhook":         {"webhook.enabled": "false"},
	"noLeaderElection":  {"leaderElection.enabled": "false", "replicaCount": "1", "webhook.certificate.mode": "selfSigned"},
	"embeddedStoreTiny": {"etcd.enabled": "false", "replicaCount": "1", "webhook.certificate.mode": "selfSigned"},
	"singleNodeStore":   {"etcd.replicas": "1", "etcd.persistence.deleteOnUninstall": "false", "replicaCount": "1", "webhook.certificate.mode": "selfSigned"},
}

func TestLint(t *testing.T) {
	for name, values := range valueSets {
		t.Run(name, func(t *testing.T) {
			out, err := helm(t, append([]string{"lint", "--strict", chartDir}, setArgs(values)...)...)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
}

// renderedSet is one value set's render: every object, the manager Deployment and its args.
type renderedSet struct {
	objs map[string]*unstructured.Unstructured
	d    *unstructured.Unstructured
	args []string
}

func (r renderedSet) has(kind, name string) bool { return r.objs[kind+"/"+name] != nil }

// valueSetChecks says, per value set, what its render must hold (sets without an entry only
// have to render a manager Deployment).
var valueSetChecks = map[string]func(t *testing.T, r renderedSet){
	"secret": func(t *testing.T, r renderedSet) {
		w := r.objs["MutatingWebhookConfiguration/registrar-mutating-webhook-configuration"]
		ca, _, _ := unstructured.NestedString(w.Object["webhooks"].([]any)[0].(map[string]any), "clientConfig", "caBundle")
		if ca != "Y2EK" || r.has("Certificate", "registrar-serving-cert") || !strings.Contains(dump(r.d), "secretName: my-webhook-tls") {
			t.Errorf("secret mode: caBundle %q, Certificate rendered %v, Deployment:\n%s", ca, r.has("Certificate", "registrar-serving-cert"), dump(r.d))
		}
	},
	"clusterIssuer": func(t *testing.T, r renderedSet) {
		if r.has("Issuer", "registrar-selfsigned-issuer") || !strings.Contains(dump(r.objs["Certificate/registrar-serving-cert"]), "kind: ClusterIssuer") {
			t.Errorf("issuerRef not used:\n%s", dump(r.objs["Certificate/registrar-serving-cert"]))
		}
	},
	"observability": func(t *testing.T, r renderedSet) {
		if !r.has("Service", "registrar-metrics") || !r.has("ServiceMonitor", "registrar") || !r.has("Service", "registrar-xds") ||
			!slices.Contains(r.args, "--xds-bind-address=:18000") || !slices.Contains(r.args, "--xds-allow-insecure") ||
			!strings.Contains(dump(r.d), "containerPort: 18000") {
			t.Errorf("metrics Service, ServiceMonitor, xDS Service and port expected; rendered %v, args %v", sortedKeys(r.objs), r.args)
		}
		checkPrometheusRule(t, r.objs)
	},
	"xdsTLS": func(t *testing.T, r renderedSet) {
		for _, want := range []string{"--xds-cert-file=/etc/registrar/xds-tls/tls.crt", "--xds-key-file=/etc/registrar/xds-tls/tls.key",
			"--xds-client-ca-file=/etc/registrar/xds-tls/ca.crt"} {
			if !slices.Contains(r.args, want) {
				t.Errorf("args %v lack %s", r.args, want)
			}
		}
		if slices.Contains(r.args, "--xds-allow-insecure") || !strings.Contains(dump(r.d), "secretName: xds-serving") {
			t.Errorf("xDS TLS: args %v, Secret mounted %v", r.args, strings.Contains(dump(r.d), "secretName: xds-serving"))
		}
	},
	"storeTLS": func(t *testing.T, r renderedSet) {
		for _, want := range []string{"--store-endpoints=https://etcd-0.etcd:2379,https://etcd-1.etcd:2379", "--store-prefix=/prod/services",
			"--store-ca-file=/etc/registrar/store-tls/ca.crt", "--store-cert-file=/etc/registrar/store-tls/tls.crt", "--store-key-file=/etc/registrar/store-tls/tls.key"} {
			if !slices.Contains(r.args, want) {
				t.Errorf("args %v lack %s", r.args, want)
			}
		}
		if !strings.Contains(dump(r.d), "secretName: etcd-client") {
			t.Errorf("store TLS Secret not mounted:\n%s", dump(r.d))
		}
		// store.endpoints turns the bundled etcd off.
		if r.has("StatefulSet", "registrar-etcd") || slices.ContainsFunc(r.args, func(a string) bool { return strings.HasPrefix(a, "--store-self-signed") }) {
			t.Errorf("store.endpoints set: bundled etcd rendered anyway (args %v, objects %v)", r.args, sortedKeys(r.objs))
		}
	},
	"noWebhook": func(t *testing.T, r renderedSet) {
		if !slices.Contains(r.args, "--enable-webhook=false") || r.has("MutatingWebhookConfiguration", "registrar-mutating-webhook-configuration") ||
			r.has("Service", "registrar-webhook-service") || r.has("Certificate", "registrar-serving-cert") {
			t.Errorf("webhook disabled: args %v, rendered %v", r.args, sortedKeys(r.objs))
		}
	},
	"noLeaderElection": func(t *testing.T, r renderedSet) {
		if !slices.Contains(r.args, "--leader-elect=false") {
			t.Errorf("args %v lack --leader-elect=false", r.args)
		}
	},
	"embeddedStoreTiny": func(t *testing.T, r renderedSet) {
		if slices.ContainsFunc(r.args, func(a string) bool { return strings.HasPrefix(a, "--store-") }) ||
			r.has("StatefulSet", "registrar-etcd") || strings.Contains(dump(r.d), "REGISTRAR_STORE_ENDPOINTS") {
			t.Errorf("args %v, objects %v: no store flags and no bundled etcd expected (embedded etcd)", r.args, sortedKeys(r.objs))
		}
	},
	"default": func(t *testing.T, r renderedSet) {
		checkBundledStore(t, r, 3, "Delete")
	},
	"singleNodeStore": func(t *testing.T, r renderedSet) {
		checkBundledStore(t, r, 1, "Retain")
	},
}

// checkBundledStore: the bundled etcd with members members, its claims' policy on uninstall,
// and the manager pointed at exactly those members through the PKI flags.
func checkBundledStore(t *testing.T, r renderedSet, members int, whenDeleted string) {
	t.Helper()
	for _, k := range []string{"StatefulSet/registrar-etcd", "Secret/registrar-etcd-tls", "Service/registrar-etcd", "PodDisruptionBudget/registrar-etcd", "Role/registrar-etcd-pki", "RoleBinding/registrar-etcd-pki"} {
		if r.objs[k] == nil {
			t.Errorf("%s not rendered", k)
		}
	}
	sts := r.objs["StatefulSet/registrar-etcd"]
	if sts == nil {
		return
	}
	if n, _, _ := unstructured.NestedInt64(sts.Object, "spec", "replicas"); n != int64(members) {
		t.Errorf("etcd replicas %d, want %d", n, members)
	}
	if p, _, _ := unstructured.NestedString(sts.Object, "spec", "persistentVolumeClaimRetentionPolicy", "whenDeleted"); p != whenDeleted {
		t.Errorf("whenDeleted %q, want %q", p, whenDeleted)
	}
	var eps []string
	for i := range members {
		eps = append(eps, fmt.Sprintf("https://registrar-etcd-%d.registrar-etcd.$(POD_NAMESPACE).svc:2379", i))
	}
	if !strings.Contains(dump(r.d), "value: "+strings.Join(eps, ",")+"\n") {
		t.Errorf("manager not pointed at %v:\n%s", eps, dump(r.d))
	}
	for _, want := range []string{"--store-self-signed-secret=registrar-etcd-tls"} {
		if !slices.Contains(r.args, want) {
			t.Errorf("args %v lack %s", r.args, want)
		}
	}
	if !strings.Contains(dump(sts), fmt.Sprintf("registrar-etcd-%d=https://", members-1)) ||
		strings.Contains(dump(sts), fmt.Sprintf("registrar-etcd-%d=https://", members)) {
		t.Errorf("ETCD_INITIAL_CLUSTER does not name exactly %d members:\n%s", members, dump(sts))
	}
}

// TestTemplate renders every value set and checks what each one is for.
func TestTemplate(t *testing.T) {
	for name, values := range valueSets {
		t.Run(name, func(t *testing.T) {
			objs := renderChart(t, values)
			d := objs["Deployment/registrar-controller-manager"]
			if d == nil {
				t.Fatalf("no manager Deployment; rendered %v", sortedKeys(objs))
			}
			if check := valueSetChecks[name]; check != nil {
				check(t, renderedSet{objs: objs, d: d, args: containerArgs(t, d)})
			}
		})
	}
}

// TestTemplateRejects: misspelt or malformed values (values.schema.json) and combinations the
// manager cannot run fail at render time with a message that says what to change.
func TestTemplateRejects(t *testing.T) {
	for _, tt := range []struct {
		values map[string]string
		want   string
	}{
		{map[string]string{"webhook.certificate.mode": "vault"}, "'certManager', 'selfSigned', 'secret'"}, // values.schema.json
		{map[string]string{"replicas": "3"}, "additional properties 'replicas' not allowed"},              // a misspelt value
		{map[string]string{"xds.bindAddress": "18000"}, "/xds/bindAddress"},
		{map[string]string{"xds.bindAddress": ":18000"}, "xds.allowInsecure=true"}, // plaintext beyond the pod
		{map[string]string{"webhook.certificate.mode": "secret", "webhook.certificate.secretName": "x"}, "caBundle"},
		{map[string]string{"leaderElection.enabled": "false"}, "needs leaderElection.enabled"},
		{map[string]string{"metrics.enabled": "false", "metrics.serviceMonitor.enabled": "true"}, "needs metrics.enabled"},
	} {
		_, err := helm(t, append([]string{"template", release, chartDir, "--namespace", ns}, setArgs(tt.values)...)...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("values %v: error %v, want one mentioning %q", tt.values, err, tt.want)
		}
	}
}

// checkPrometheusRule: metrics.prometheusRule renders config/prometheus/rules.yaml's groups
// with the given labels.
func checkPrometheusRule(t *testing.T, objs map[string]*unstructured.Unstructured) {
	t.Helper()
	rule := objs["PrometheusRule/registrar-alerts"]
	if rule == nil {
		t.Fatalf("no PrometheusRule; rendered %v", sortedKeys(objs))
	}
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	if len(groups) < 2 || rule.GetLabels()["release"] != "prometheus" || !strings.Contains(dump(rule), "alert: RegistrarStoreQuorumOneFailureAway") {
		t.Errorf("PrometheusRule without the rule groups of config/prometheus/rules.yaml or its labels:\n%s", dump(rule))
	}
}

// TestChartCopiesMatchConfig: the chart's CRDs, manager rules and webhooks are byte-for-byte
// the generated files under config/ (`make manifests` copies them; this catches a chart left
// behind).
func TestChartCopiesMatchConfig(t *testing.T) {
	pairs := map[string]string{
		"config/rbac/role.yaml":                 "charts/registrar/files/manager-role.yaml",
		"config/rbac/leader_election_role.yaml": "charts/registrar/files/leader-election-role.yaml",
		"config/webhook/manifests.yaml":         "charts/registrar/files/webhook-manifests.yaml",
		"config/prometheus/rules.yaml":          "charts/registrar/files/prometheus-rules.yaml",
	}
	bases, _ := filepath.Glob(filepath.Join(root, "config/crd/bases/*.yaml"))
	chartCRDs, _ := filepath.Glob(filepath.Join(chartDir, "files/crds/*.yaml"))
	if len(bases) == 0 || len(bases) != len(chartCRDs) {
		t.Errorf("config/crd/bases has %d CRDs, charts/registrar/files/crds %d (run `make manifests`)", len(bases), len(chartCRDs))
	}
	for _, b := range bases {
		rel, _ := filepath.Rel(root, b)
		pairs[rel] = "charts/registrar/files/crds/" + filepath.Base(b)
	}
	for src, dst := range pairs {
		want, err := os.ReadFile(filepath.Join(root, src))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(root, dst))
		if err != nil {
			t.Errorf("%v (run `make manifests`)", err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from %s: run `make manifests` and commit the chart", dst, src)
		}
	}
}

// renderChart runs helm template (with CRDs) and indexes the objects by kind/name.
func renderChart(t *testing.T, values map[string]string) map[string]*unstructured.Unstructured {
	t.Helper()
	out, err := helm(t, append([]string{"template", release, chartDir, "--namespace", ns, "--include-crds"}, setArgs(values)...)...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeAll([]byte(out))
	if err != nil {
		t.Fatalf("decode helm template output: %v", err)
	}
	return objs
}

// renderKustomize builds a config/ overlay with the kustomize library (the engine of
// bin/kustomize and make build-installer).
func renderKustomize(t *testing.T, overlay string) map[string]*unstructured.Unstructured {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resMap, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(root, "config", overlay))
	if err != nil {
		t.Fatalf("kustomize build config/%s: %v", overlay, err)
	}
	out := map[string]*unstructured.Unstructured{}
	for _, r := range resMap.Resources() {
		// Through JSON, so numbers are int64 as in the decoded chart.
		b, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := utiljson.Unmarshal(b, &u.Object); err != nil {
			t.Fatal(err)
		}
		out[u.GetKind()+"/"+u.GetName()] = u
	}
	return out
}

func decodeAll(raw []byte) (map[string]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	out := map[string]*unstructured.Unstructured{}
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &u.Object); err != nil {
			return nil, err
		}
		if len(u.Object) == 0 {
			continue
		}
		key := u.GetKind() + "/" + u.GetName()
		if out[key] != nil {
			return nil, fmt.Errorf("%s rendered twice", key)
		}
		out[key] = u
	}
}

func sortedKeys(m map[string]*unstructured.Unstructured) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func containerArgs(t *testing.T, d *unstructured.Unstructured) []string {
	t.Helper()
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if len(containers) == 0 {
		t.Fatalf("no containers in %s", d.GetName())
	}
	args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	return args
}

// TestChartVersion: the chart's version and appVersion are the operator's (Makefile VERSION,
// which the OLM bundle uses too).
func TestChartVersion(t *testing.T) {
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	var version string
	for _, line := range strings.Split(string(makefile), "\n") {
		if v, ok := strings.CutPrefix(line, "VERSION ?= "); ok {
			version = strings.TrimSpace(v)
		}
	}
	chart, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(chart, &meta); err != nil {
		t.Fatal(err)
	}
	if version == "" || meta.Version != version || meta.AppVersion != version {
		t.Errorf("Chart.yaml version %q, appVersion %q; Makefile VERSION %q: keep them equal", meta.Version, meta.AppVersion, version)
	}
}
