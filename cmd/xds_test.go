package main

import "testing"

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
