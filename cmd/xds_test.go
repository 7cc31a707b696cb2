package main

import (
	"strings"
	"testing"
)

func TestXDSFlags(t *testing.T) {
	c, _, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.xds.bindAddress != "" {
		t.Fatalf("the xDS server is on by default (%q)", c.xds.bindAddress)
	}
	for _, bad := range [][]string{
		{"--xds-bind-address=:18000", "--xds-cert-file=c.pem"},
		{"--xds-bind-address=:18000", "--xds-client-ca-file=ca.pem"},
	} {
		if _, _, err := parseFlags(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	c, _, err = parseFlags([]string{"--xds-bind-address=:18000", "--xds-cert-file=c.pem", "--xds-key-file=k.pem", "--xds-client-ca-file=ca.pem"})
	if err != nil || c.xds.clientCAFile != "ca.pem" {
		t.Fatalf("mTLS flags: %v %+v", err, c.xds)
	}
}

func TestXDSRemoteLocalities(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{args: nil, want: false},
		{args: []string{"--xds-bind-address=127.0.0.1:18000"}, want: false},                           // store not shared
		{args: []string{"--store-shared", "--cluster-id=east", "--store-lease-ttl=60s"}, want: false}, // no xDS server
		{args: []string{"--xds-bind-address=127.0.0.1:18000", "--store-shared", "--cluster-id=east", "--store-lease-ttl=60s"}, want: true},
		{args: []string{"--xds-bind-address=127.0.0.1:18000", "--store-shared", "--cluster-id=east", "--store-lease-ttl=60s", "--xds-remote-localities=false"}, want: false},
	} {
		c, _, err := parseFlags(tc.args)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if got := followsRemote(c.xds, c.multicluster.shared); got != tc.want {
			t.Errorf("%v: follows other clusters' records %v, want %v", tc.args, got, tc.want)
		}
	}
}

// TestXDSPlaintextBind: plaintext xDS (no --xds-cert-file) binds a loopback address, unless
// --xds-allow-insecure says otherwise; the error names the flags to use.
func TestXDSPlaintextBind(t *testing.T) {
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{args: []string{"--xds-bind-address=127.0.0.1:18000"}, ok: true},
		{args: []string{"--xds-bind-address=localhost:18000"}, ok: true},
		{args: []string{"--xds-bind-address=[::1]:18000"}, ok: true},
		{args: []string{"--xds-bind-address=:18000"}},
		{args: []string{"--xds-bind-address=0.0.0.0:18000"}},
		{args: []string{"--xds-bind-address=10.0.0.1:18000"}},
		{args: []string{"--xds-bind-address=:18000", "--xds-allow-insecure"}, ok: true},
		{args: []string{"--xds-bind-address=:18000", "--xds-cert-file=c.pem", "--xds-key-file=k.pem"}, ok: true},
	} {
		_, _, err := parseFlags(tc.args)
		if tc.ok && err != nil {
			t.Errorf("%v: %v", tc.args, err)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "--xds-allow-insecure") || !strings.Contains(err.Error(), "--xds-cert-file")) {
			t.Errorf("%v: error %v, want one naming --xds-allow-insecure and --xds-cert-file", tc.args, err)
		}
	}
}
