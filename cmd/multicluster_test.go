package main

import (
	"strings"
	"testing"
)

func TestClusterFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{nil, ""},
		{[]string{"--cluster-id=Not_A_Label"}, ""}, // only the value's field without --store-shared
		{[]string{"--store-shared", "--store-lease-ttl=30s"}, "needs an explicit --cluster-id"},
		{[]string{"--store-shared", "--cluster-id=east", "--store-lease-ttl=0"}, "needs --store-lease-ttl"},
		{[]string{"--store-shared", "--cluster-id=a/b", "--store-lease-ttl=30s"}, "not a valid store key segment"},
		{[]string{"--store-shared", "--cluster-id=east.1", "--store-lease-ttl=30s"}, "not a valid store key segment"},
		{[]string{"--store-shared", "--cluster-id=east", "--store-lease-ttl=30s", "--stores=etcd,coredns"}, "--stores=etcd only"},
		{[]string{"--store-shared", "--cluster-id=east", "--store-lease-ttl=30s"}, ""},
		{[]string{"--store-shared", "--cluster-id=8f1c2a3e-1b2c-4d5e-9f00-0123456789ab", "--store-lease-ttl=30s"}, ""},
	} {
		c, _, err := parseFlags(tc.args)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("parseFlags(%v): %v", tc.args, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("parseFlags(%v) error = %v, want it to say %q", tc.args, err, tc.wantErr)
		case err == nil && c.multicluster.shared && c.multicluster.clusterID == "":
			t.Errorf("parseFlags(%v): shared without an ID", tc.args)
		}
	}
}
