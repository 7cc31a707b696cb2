package main

import (
	"strings"
	"testing"

	"github.com/registrar-dev/registrar/internal/controller"
)

func TestStatusWriteFlags(t *testing.T) {
	c, _, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.statusWritesQPS != controller.DefaultStatusWritesQPS || statusWritesQPS(c.statusWritesQPS) != controller.DefaultStatusWritesQPS {
		t.Fatalf("default --status-writes-qps=%v, want %v", c.statusWritesQPS, controller.DefaultStatusWritesQPS)
	}
	if got := statusWritesQPS(0); got >= 0 {
		t.Errorf("--status-writes-qps=0 maps to %v, want a negative (no limit) value, not 0 (the default)", got)
	}
	if _, _, err := parseFlags([]string{"--status-writes-qps=2.5"}); err != nil {
		t.Errorf("--status-writes-qps=2.5: %v", err)
	}
	if _, _, err := parseFlags([]string{"--status-writes-qps=-1"}); err == nil || !strings.Contains(err.Error(), "--status-writes-qps") {
		t.Errorf("--status-writes-qps=-1: error %v, want one naming the flag", err)
	}
}
