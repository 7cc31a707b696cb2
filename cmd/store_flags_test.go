package main

import (
	"net"
	"net/url"
	"testing"
)

// TestEmbeddedStoreLoopbackByDefault: without --store-endpoints the operator runs an embedded
// etcd; by default its client and peer URLs are on loopback, so it is not reachable from
// other hosts (or pods) unless the operator is told otherwise.
func TestEmbeddedStoreLoopbackByDefault(t *testing.T) {
	t.Setenv("REGISTRAR_STORE_ENDPOINTS", "")
	c, _, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.storeEndpoints != "" {
		t.Fatalf("store endpoints default to %q, want none (embedded)", c.storeEndpoints)
	}
	for name, raw := range map[string]string{"client": c.embeddedClientURL, "peer": c.embeddedPeerURL} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("%s URL %q: %v", name, raw, err)
		}
		if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsLoopback() {
			t.Errorf("embedded %s URL %q is not on a loopback IP", name, raw)
		}
	}
}
