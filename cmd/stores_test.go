package main

import (
	"slices"
	"strings"
	"testing"
)

func TestStoreNames(t *testing.T) {
	tests := []struct {
		stores, zkServers string
		want              []string
		err               string
	}{
		{stores: "etcd", want: []string{"etcd"}},
		{stores: "etcd,coredns", want: []string{"etcd", "coredns"}},
		{stores: " coredns , etcd ", want: []string{"coredns", "etcd"}},
		{stores: "etcd,zookeeper", zkServers: "zk:2181", want: []string{"etcd", "zookeeper"}},
		{stores: "etcd,zookeeper", err: "--zookeeper-servers is required"},
		{stores: "etcd,consul", err: `unknown store "consul"`},
		{stores: "etcd,etcd", err: `"etcd" twice`},
		{stores: "", err: `unknown store ""`},
	}
	for _, tc := range tests {
		t.Run(tc.stores, func(t *testing.T) {
			got, err := storesConfig{stores: tc.stores, zkServers: tc.zkServers}.names()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("names() error = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("names() = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestParseFlagsStores(t *testing.T) {
	cfg, _, err := parseFlags([]string{"--stores=etcd,coredns", "--coredns-zone=example.internal", "--coredns-ttl=3s"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.stores.stores != "etcd,coredns" || cfg.stores.corednsZone != "example.internal" || cfg.stores.corednsTTL.Seconds() != 3 {
		t.Errorf("parsed %+v", cfg.stores)
	}
	if _, _, err := parseFlags([]string{"--stores=zookeeper"}); err == nil {
		t.Errorf("--stores=zookeeper without --zookeeper-servers parsed")
	}
	if cfg, _, _ := parseFlags(nil); cfg.stores.stores != "etcd" {
		t.Errorf("default --stores = %q, want etcd (unchanged)", cfg.stores.stores)
	}
}
