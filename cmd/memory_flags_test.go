package main

import (
	"strings"
	"testing"

	"github.com/registrar-dev/registrar/internal/memlimit"
)

func TestMemoryFlags(t *testing.T) {
	c, _, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.gcPercent != memlimit.DefaultGCPercent || c.memoryLimitRatio != 0.9 {
		t.Fatalf("defaults: --gc-percent=%d --memory-limit-ratio=%v", c.gcPercent, c.memoryLimitRatio)
	}
	for _, tc := range []struct {
		args    []string
		wantErr string // the flag the error must name; empty: no error
	}{
		{args: []string{"--gc-percent=0"}},
		{args: []string{"--gc-percent=200"}},
		{args: []string{"--gc-percent=-1"}, wantErr: "--gc-percent"},
		{args: []string{"--gc-percent=5000"}, wantErr: "--gc-percent"},
		{args: []string{"--memory-limit-ratio=1.5"}, wantErr: "--memory-limit-ratio"},
	} {
		_, _, err := parseFlags(tc.args)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("parseFlags(%v): %v", tc.args, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("parseFlags(%v) error = %v, want it to name %s", tc.args, err, tc.wantErr)
		}
	}
}
