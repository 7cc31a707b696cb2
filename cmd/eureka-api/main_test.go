package main

import (
	"flag"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"--store-endpoints=http://etcd:2379"}, ""},
		{nil, "--store-endpoints is required"},
		{[]string{"--store-endpoints=http://etcd:2379", "--tls-cert-file=c"}, "--tls-cert-file and --tls-key-file"},
		{[]string{"--store-endpoints=http://etcd:2379", "--store-key-file=k"}, "--store-cert-file and --store-key-file"},
		{[]string{"--store-endpoints=http://etcd:2379", "--listen="}, "--listen"},
	} {
		var o options
		fs := flagSet()
		o.bind(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		err := o.validate()
		if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.err)
		}
	}
}

func flagSet() *flag.FlagSet { return flag.NewFlagSet("t", flag.ContinueOnError) }
