package ctl_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/registrar-dev/registrar/internal/ctl"
)

// TestCompletionScripts: `registrarctl completion bash|zsh|fish` prints a script for that
// shell (exit 0) that names the program, also when it runs as the kubectl plugin.
func TestCompletionScripts(t *testing.T) {
	for _, tt := range []struct{ shell, name, want string }{
		{"bash", "", "complete -o default -F __start_registrarctl registrarctl"},
		{"zsh", "", "#compdef registrarctl"},
		{"fish", "", "complete -c registrarctl"},
		{"bash", ctl.PluginName, "__start_kubectl-registrar kubectl-registrar"},
	} {
		t.Run(tt.shell+"/"+tt.name, func(t *testing.T) {
			var out, errOut syncBuffer
			code := ctl.Run(context.Background(), []string{"completion", tt.shell}, ctl.Env{Stdout: &out, Stderr: &errOut, Name: tt.name, Getenv: func(string) string { return "" }})
			if code != ctl.ExitOK || !strings.Contains(out.String(), tt.want) {
				t.Errorf("exit %d, stderr %q; script lacks %q:\n%.400s", code, errOut.String(), tt.want, out.String())
			}
		})
	}
}

// TestCompletionFromStore: completion of arguments reads the store (cobra's hidden
// __complete command, what the shell scripts call).
func TestCompletionFromStore(t *testing.T) {
	requireServer(t)
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", "list", ""}, []string{"orders", "payments", ":4"}},
		{[]string{"__complete", "watch", "pa"}, []string{"payments", ":4"}},
		{[]string{"__complete", "breakers", "o"}, []string{"orders", ":4"}},
		{[]string{"__complete", "get", "or"}, []string{"orders/", ":6"}},
		{[]string{"__complete", "get", "orders/"}, []string{"orders/shop/orders-a", "orders/shop/orders-b", ":4"}},
		{[]string{"__complete", "get", "orders/shop/orders-b"}, []string{"orders/shop/orders-b", ":4"}},
		{[]string{"__complete", "list", "-o", ""}, []string{"wide", "json", "yaml", "jsonpath=", ":6"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args[1:], " "), func(t *testing.T) {
			code, stdout, stderr := run(context.Background(), tt.args, storeVars())
			var got []string
			for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
				if !strings.HasPrefix(line, "Completion ended") {
					got = append(got, line)
				}
			}
			if code != ctl.ExitOK || strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("exit %d, stderr %q: got %q, want %q", code, stderr, got, tt.want)
			}
		})
	}
	// An unreachable store is a completion error (:1), not a hang or a usage error.
	vars := map[string]string{"REGISTRAR_STORE_ENDPOINTS": closedURL(t), "REGISTRAR_STORE_TIMEOUT": "1s"}
	code, stdout, _ := run(context.Background(), []string{"__complete", "list", ""}, vars)
	if code != ctl.ExitOK || !strings.HasPrefix(strings.TrimSpace(stdout), ":1") {
		t.Errorf("unreachable store: exit %d, output %q; want 0 and directive :1", code, stdout)
	}
}

// TestBashCompletion loads `registrarctl completion bash` into a real bash and completes
// `registrarctl list <TAB>` and `registrarctl get orders/<TAB>` with the built binary on
// PATH, reading the test store.
func TestBashCompletion(t *testing.T) {
	requireServer(t)
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("bash not found: %v", err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := os.WriteFile(filepath.Join(dir, "registrarctl"), buildCLI(t), 0o755); err != nil {
		t.Fatal(err)
	}
	script, err := exec.CommandContext(ctx, filepath.Join(dir, "registrarctl"), "completion", "bash").Output()
	if err != nil {
		t.Fatalf("registrarctl completion bash: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "completion.bash"), script, 0o644); err != nil {
		t.Fatal(err)
	}
	complete := func(line string) []string {
		t.Helper()
		words := strings.Fields(line)
		if strings.HasSuffix(line, " ") {
			words = append(words, "")
		}
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = "'" + w + "'"
		}
		// The script uses bash-completion's _get_comp_words_by_ref; where that package is
		// not installed, a minimal stand-in sets the same variables.
		prog := `if [ -r /usr/share/bash-completion/bash_completion ]; then . /usr/share/bash-completion/bash_completion
else _get_comp_words_by_ref() { cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}; words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; }
fi
source "$DIR/completion.bash"
COMP_WORDS=(` + strings.Join(quoted, " ") + `)
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
COMP_LINE='` + line + `'
COMP_POINT=${#COMP_LINE}
__start_registrarctl 2>/dev/null
printf '%s\n' "${COMPREPLY[@]}"`
		cmd := exec.CommandContext(ctx, bash, "--norc", "--noprofile", "-c", prog)
		cmd.Env = append(os.Environ(), "DIR="+dir, "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"),
			"REGISTRAR_STORE_ENDPOINTS="+server.Endpoint(), "REGISTRAR_STORE_TIMEOUT=30s")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("bash completion of %q: %v", line, err)
		}
		return strings.Fields(string(out))
	}
	if got := complete("registrarctl "); !contains(got, "list") || !contains(got, "breakers") || !contains(got, "completion") {
		t.Errorf("registrarctl <TAB>: %q; want the commands", got)
	}
	if got := complete("registrarctl list "); strings.Join(got, " ") != "orders payments" {
		t.Errorf("registrarctl list <TAB>: %q; want the services orders payments", got)
	}
	if got := complete("registrarctl get orders/"); strings.Join(got, " ") != "orders/shop/orders-a orders/shop/orders-b" {
		t.Errorf("registrarctl get orders/<TAB>: %q; want the instances of orders", got)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestJSONPath: -o jsonpath=TEMPLATE runs on what -o json prints, as kubectl's does.
func TestJSONPath(t *testing.T) {
	requireServer(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"list", "-o", "jsonpath={[*].address}"}, "10.0.0.1 10.0.0.2 fd00::7"},
		{[]string{"list", "orders", `-o=jsonpath={range [*]}{.pod}{"\t"}{.ports.http}{"\n"}{end}`}, "orders-a\t8080\norders-b\t8080\n"},
		{[]string{"get", "orders/shop/orders-b", "-o", "jsonpath={.node}/{.zone}"}, "node-2/eu-1b"},
		{[]string{"breakers", "payments", "-ojsonpath={[0].state} {[0].probe.caller}"}, "Open orders-7d9f-2"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := run(context.Background(), tt.args, storeVars())
			if code != ctl.ExitOK || stdout != tt.want {
				t.Errorf("exit %d, stderr %q: got %q, want %q", code, stderr, stdout, tt.want)
			}
		})
	}
	if code, _, stderr := run(context.Background(), []string{"list", "-o", "jsonpath={.unclosed"}, storeVars()); code != ctl.ExitUsage {
		t.Errorf("bad template: exit %d (stderr %q), want %d", code, stderr, ctl.ExitUsage)
	}
}

// TestHelpAndLegacyFlags: --help per command, the kubectl plugin's name in help, and the
// single-dash long flags registrarctl accepted before cobra.
func TestHelpAndLegacyFlags(t *testing.T) {
	requireServer(t)
	var out, errOut syncBuffer
	code := ctl.Run(context.Background(), []string{"get", "--help"}, ctl.Env{Stdout: &out, Stderr: &errOut, Name: ctl.PluginName, Getenv: func(string) string { return "" }})
	if code != ctl.ExitOK || !strings.Contains(out.String(), "kubectl registrar get SERVICE/[NAMESPACE/]POD") {
		t.Errorf("kubectl registrar get --help: exit %d:\n%s", code, out.String())
	}
	for _, args := range [][]string{
		{"-store-endpoints=" + server.Endpoint(), "list", "orders", "-output", "json"},
		{"list", "-store-endpoints", server.Endpoint(), "-store-prefix=/registrar/services", "orders"},
	} {
		code, stdout, stderr := run(context.Background(), args, map[string]string{"REGISTRAR_STORE_ENDPOINTS": "http://127.0.0.1:1"})
		if code != ctl.ExitOK || !strings.Contains(stdout, "orders-a") {
			t.Errorf("registrarctl %q: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
	if code, stdout, _ := run(context.Background(), []string{"-help"}, storeVars()); code != ctl.ExitOK || !strings.Contains(stdout, "Available Commands") {
		t.Errorf("registrarctl -help: exit %d, %q", code, stdout)
	}
}

// TestKubectlPlugin runs the binary as kubectl runs a plugin: kubectl-registrar on PATH is
// `kubectl registrar`, and kubectl completes its arguments through kubectl_complete-registrar
// (cmd/registrarctl, installed by make build-registrarctl). Needs kubectl on PATH.
func TestKubectlPlugin(t *testing.T) {
	requireServer(t)
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not on PATH: the plugin cannot be run through it here")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := os.WriteFile(filepath.Join(dir, ctl.PluginName), buildCLI(t), 0o755); err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile("../../cmd/registrarctl/kubectl_complete-registrar")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kubectl_complete-registrar"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	kc := func(args ...string) (string, int) {
		t.Helper()
		cmd := exec.CommandContext(ctx, kubectl, args...)
		cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"),
			"REGISTRAR_STORE_ENDPOINTS="+server.Endpoint(), "REGISTRAR_STORE_TIMEOUT=30s", "KUBECONFIG="+filepath.Join(dir, "none"))
		out, err := cmd.Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		}
		if err != nil {
			t.Fatalf("kubectl %v: %v", args, err)
		}
		return string(out), 0
	}
	if out, code := kc("registrar", "list", "orders", "-o", "jsonpath={[*].pod}"); code != 0 || out != "orders-a orders-b" {
		t.Errorf("kubectl registrar list orders: exit %d, %q", code, out)
	}
	if _, code := kc("registrar", "get", "orders/shop/nope"); code != ctl.ExitNotFound {
		t.Errorf("kubectl registrar get of a missing instance: exit %d, want %d (kubectl passes the plugin's code on)", code, ctl.ExitNotFound)
	}
	if out, code := kc("registrar", "--help"); code != 0 || !strings.Contains(out, "kubectl registrar [command]") {
		t.Errorf("kubectl registrar --help: exit %d:\n%s", code, out)
	}
	if out, _ := kc("__complete", "registrar", "list", ""); !strings.Contains(out, "orders\npayments\n") {
		t.Errorf("kubectl __complete registrar list: %q; want the services", out)
	}
}

var cli struct {
	once sync.Once
	bin  []byte
	err  error
}

// buildCLI builds cmd/registrarctl once per test binary and returns the executable.
func buildCLI(t *testing.T) []byte {
	t.Helper()
	cli.once.Do(func() {
		dir, err := os.MkdirTemp("", "registrarctl-build-")
		if err != nil {
			cli.err = err
			return
		}
		defer os.RemoveAll(dir)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, "registrarctl"), "../../cmd/registrarctl")
		// Without cgo, as make build-registrarctl builds it (and so from the same build cache).
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := build.CombinedOutput()
		if err != nil {
			cli.err = fmt.Errorf("go build ./cmd/registrarctl: %w\n%s", err, out)
			return
		}
		cli.bin, cli.err = os.ReadFile(filepath.Join(dir, "registrarctl"))
	})
	if cli.err != nil {
		t.Fatal(cli.err)
	}
	return cli.bin
}
