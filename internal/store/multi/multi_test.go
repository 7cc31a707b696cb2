package multi_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/store/multi"
)

// nop is a store that is never called: name resolution does no I/O.
type nop struct{}

func (nop) List(context.Context, store.Scope) ([]store.Record, error) { return nil, nil }
func (nop) Apply(context.Context, store.Scope, store.Changes) ([]store.Record, error) {
	return nil, nil
}

func names(targets []multi.Named) []string {
	out := []string{}
	for _, t := range targets {
		out = append(out, t.Name)
	}
	return out
}

func TestTargets(t *testing.T) {
	s, err := multi.New([]multi.Named{{"etcd", nop{}}, {"coredns", nop{}}, {"zookeeper", nop{}}}, []string{"etcd"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		stores  string
		want    []string
		missing string
	}{
		{stores: "", want: []string{"etcd"}},
		{stores: "coredns,etcd", want: []string{"coredns", "etcd"}},
		{stores: "etcd,etcd", want: []string{"etcd"}},
		{stores: "consul,etcd", want: []string{"etcd"}, missing: `["consul"]`},
		{stores: "consul", want: []string{}, missing: `["consul"]`},
	} {
		got, err := s.Targets(splitNames(tc.stores))
		if !reflect.DeepEqual(names(got), tc.want) {
			t.Errorf("Targets(%q) = %v, want %v", tc.stores, names(got), tc.want)
		}
		switch {
		case tc.missing == "" && err != nil:
			t.Errorf("Targets(%q): %v", tc.stores, err)
		case tc.missing != "" && (!errors.Is(err, multi.ErrNotConfigured) || !strings.Contains(err.Error(), tc.missing)):
			t.Errorf("Targets(%q) error = %v, want ErrNotConfigured naming %s", tc.stores, err, tc.missing)
		}
	}
	if got := s.Names(); !reflect.DeepEqual(got, []string{"etcd", "coredns", "zookeeper"}) {
		t.Errorf("Names() = %v", got)
	}
}

func TestNewRejects(t *testing.T) {
	for name, tc := range map[string]struct {
		stores   []multi.Named
		defaults []string
	}{
		"duplicate":         {stores: []multi.Named{{"etcd", nop{}}, {"etcd", nop{}}}, defaults: []string{"etcd"}},
		"empty name":        {stores: []multi.Named{{"", nop{}}}, defaults: []string{""}},
		"no store":          {stores: []multi.Named{{"etcd", nil}}, defaults: []string{"etcd"}},
		"unknown default":   {stores: []multi.Named{{"etcd", nop{}}}, defaults: []string{"coredns"}},
		"no default at all": {stores: []multi.Named{{"etcd", nop{}}}, defaults: nil},
	} {
		if _, err := multi.New(tc.stores, tc.defaults); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
}

// splitNames is a comma-separated list as a registry's spec.stores ("" : none).
func splitNames(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
