package zookeeper_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/store/zookeeper"
)

// curatorClasspath is Debian's Curator 5 (libcurator-discovery-java) with its dependencies.
func curatorClasspath(t *testing.T) string {
	t.Helper()
	dir := "/usr/share/java"
	jars := []string{"curator-x-discovery.jar", "curator-framework.jar", "curator-client.jar", "zookeeper.jar",
		"guava.jar", "jackson-databind.jar", "jackson-core.jar", "jackson-annotations.jar", "slf4j-api.jar", "slf4j-nop.jar"}
	for i, j := range jars {
		jars[i] = filepath.Join(dir, j)
		if _, err := os.Stat(jars[i]); err != nil {
			t.Fatalf("%v: the Curator reader needs Debian's libcurator-discovery-java (hack/zookeeper.sh installs it; make test runs it)", err)
		}
	}
	return strings.Join(jars, ":")
}

// TestCuratorReadsInstances runs Apache Curator's ServiceDiscovery (Java) over what the Store
// wrote: with registrar's default payload class (read through a stand-in of Spring Cloud
// Zookeeper's ZookeeperInstance) and with java.util.LinkedHashMap for plain Curator callers.
func TestCuratorReadsInstances(t *testing.T) {
	srv := requireServer(t)
	cp := curatorClasspath(t)
	classes := t.TempDir()
	src := "testdata/curator/"
	javac := exec.Command("javac", "-d", classes, "-cp", cp, src+"CuratorRead.java",
		src+"org/springframework/cloud/zookeeper/discovery/ZookeeperInstance.java")
	if out, err := javac.CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	for _, tc := range []struct{ mode, payloadClass string }{
		{"spring", ""},
		{"map", "java.util.LinkedHashMap"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			f := newFixture(t, nil, zookeeper.Options{PayloadClass: tc.payloadClass})
			plain := ep("web-1")
			plain.Address, plain.Ports = "10.0.0.2", map[string]int32{"http": 8080}
			f.apply(t, store.Changes{Create: []store.Endpoint{ep("web-0"), plain}})

			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "java", "-cp", classes+":"+cp, "CuratorRead", srv.Addr, f.base, "web", tc.mode)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("CuratorRead: %v\n%s", err, out)
			}
			want := "web shop.web-0 10.0.0.1 8080 8443 DYNAMIC true https://10.0.0.1:8443 owner=reg-uid\n" +
				"web shop.web-1 10.0.0.2 8080 null DYNAMIC true http://10.0.0.2:8080 owner=reg-uid\n"
			if string(out) != want {
				t.Errorf("Curator read\n%s\nwant\n%s", out, want)
			}
		})
	}
}
