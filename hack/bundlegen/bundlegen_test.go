package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func defaults() options {
	return options{root: "../..", version: "0.1.0", image: "registrar:latest", pkg: "registrar",
		channels: "candidate", defaultChannel: "candidate", minKubeVersion: "1.30.0"}
}

// TestCommittedBundleIsCurrent regenerates the bundle in memory with the Makefile's
// defaults and compares it with the committed files: a stale bundle fails `go test` too,
// not only `make verify-generated`.
func TestCommittedBundleIsCurrent(t *testing.T) {
	files, err := generate(defaults())
	if err != nil {
		t.Fatal(err)
	}
	again, err := generate(defaults())
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		if !bytes.Equal(again[name], want) {
			t.Errorf("%s differs between two generations: the output is not deterministic", name)
		}
		got, err := os.ReadFile(filepath.Join("../..", name))
		if err != nil {
			t.Errorf("%v: run `make bundle` and commit the result", err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run `make bundle` and commit the result", name)
		}
	}
	committed, _ := filepath.Glob("../../bundle/manifests/*")
	if len(committed) != 2 {
		t.Errorf("bundle/manifests holds %v, want the CSV and the CRD only", committed)
	}
}

func TestFirstSentence(t *testing.T) {
	for in, want := range map[string]string{
		"seconds is the length.\nIt must cover.": "seconds is the length.",
		`timeout bounds it (e.g. "30s"). More.`:  `timeout bounds it (e.g. "30s").`,
		"no full stop":                           "no full stop",
		"one sentence.":                          "one sentence.",
		"":                                       "",
	} {
		if got := firstSentence(in); got != want {
			t.Errorf("firstSentence(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSplitCamel(t *testing.T) {
	for in, want := range map[string]string{
		"callerCacheSeconds": "Caller Cache Seconds", "ServiceRegistry": "Service Registry", "ports": "Ports",
	} {
		if got := splitCamel(in); got != want {
			t.Errorf("splitCamel(%q) = %q, want %q", in, got, want)
		}
	}
}
