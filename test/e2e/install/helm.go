package install

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Release is the Helm release name that gives the chart's objects the names of
// dist/install.yaml (Namespace, ManagerName, WebhookConfigName).
const Release = "registrar"

// Helm is how HelmRegistrar runs the helm CLI.
type Helm struct {
	// Bin is the helm binary (make test-e2e passes bin/helm-<version> as E2E_HELM).
	Bin string
	// Chart is the chart directory (charts/registrar).
	Chart string
	// Kubeconfig is the cluster's admin kubeconfig.
	Kubeconfig string
}

// HelmRegistrar installs registrar with `helm upgrade --install` of charts/registrar, the way
// a user installs it, with values that adapt the manager to the harness exactly as Registrar
// adapts dist/install.yaml (HarnessValues), then waits like Registrar until the manager has
// rolled out and its self-signed webhook CA is injected.
func HelmRegistrar(ctx context.Context, c client.Client, cfg *rest.Config, h Helm, storeEndpoint string) error {
	if err := HelmUpgrade(ctx, cfg, h, storeEndpoint, "", ""); err != nil {
		return err
	}
	return WaitManager(ctx, c, "")
}

// HelmUpgrade runs `helm upgrade --install` like HelmRegistrar without waiting for the
// manager; tag (when not "") is the manager's image tag, chartVersion (when not "") the
// version written into a copy of the chart's Chart.yaml: an upgrade to a new image and chart.
func HelmUpgrade(ctx context.Context, cfg *rest.Config, h Helm, storeEndpoint, tag, chartVersion string) error {
	if h.Bin == "" {
		return fmt.Errorf("no helm binary: E2E_HELM is not set (E2E_INSTALL_METHOD=helm make test-e2e builds bin/helm-<version> and sets it)")
	}
	values, err := HarnessValues(cfg, storeEndpoint)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "registrar-e2e-helm-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	valuesFile := filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(valuesFile, values, 0o600); err != nil {
		return err
	}
	chart := h.Chart
	if chartVersion != "" {
		chart = filepath.Join(dir, "chart")
		if err := copyChart(h.Chart, chart, chartVersion); err != nil {
			return err
		}
	}
	args := []string{"upgrade", "--install", Release, chart, "--namespace", Namespace, "--create-namespace",
		"--values", valuesFile, "--kubeconfig", h.Kubeconfig, "--timeout", "3m"}
	if tag != "" {
		args = append(args, "--set", "image.tag="+tag)
	}
	return h.run(ctx, dir, args...)
}

// copyChart copies the chart at src to dst with version written into Chart.yaml.
func copyChart(src, dst, version string) error {
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if rel == "Chart.yaml" {
			b = regexp.MustCompile(`(?m)^version: .*$`).ReplaceAll(b, []byte("version: "+version))
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		return fmt.Errorf("copy the chart to %s: %w", dst, err)
	}
	return nil
}

// HarnessValues are the chart values of the e2e install: what config/default-selfsigned is
// (one replica, self-signed webhook certificate) plus what adaptManager changes for the
// harness (host network with the API server's address, ports clear of the host's, the
// locally imported image, Recreate, debug logs, the given store).
func HarnessValues(cfg *rest.Config, storeEndpoint string) ([]byte, error) {
	api, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("API server address %q: %w", cfg.Host, err)
	}
	host, port, err := net.SplitHostPort(api.Host)
	if err != nil {
		return nil, fmt.Errorf("API server address %q: %w", cfg.Host, err)
	}
	values := map[string]any{
		"image":        map[string]any{"repository": "registrar.dev/registrar", "tag": "local", "pullPolicy": "Never"},
		"replicaCount": 1,
		"webhook":      map[string]any{"certificate": map[string]any{"mode": "selfSigned"}},
		"metrics":      map[string]any{"port": 18080},
		"healthProbe":  map[string]any{"port": 18081},
		"extraArgs":    []string{"--zap-log-level=debug"},
		"env": []map[string]string{
			{"name": "KUBERNETES_SERVICE_HOST", "value": host},
			{"name": "KUBERNETES_SERVICE_PORT", "value": port},
		},
		"hostNetwork": true,
		"dnsPolicy":   "ClusterFirstWithHostNet",
		"strategy":    map[string]any{"type": "Recreate"},
	}
	if storeEndpoint != "" { // else the bundled etcd (etcd.enabled, the chart's default)
		values["store"] = map[string]any{"endpoints": storeEndpoint}
	}
	return yaml.Marshal(values)
}

// run runs the helm CLI with its cache, config and data under dir (an isolated home).
func (h Helm) run(ctx context.Context, dir string, args ...string) error {
	cmd := exec.CommandContext(ctx, h.Bin, args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+dir+"/cache", "HELM_CONFIG_HOME="+dir+"/config", "HELM_DATA_HOME="+dir+"/data")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %v: %w\n%s", h.Bin, args, err, out.String())
	}
	return nil
}
