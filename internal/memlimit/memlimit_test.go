package memlimit

import (
	"errors"
	"testing"
	"testing/fstest"
)

func TestSoft(t *testing.T) {
	const mi = int64(1) << 20
	v2 := func(s string) fstest.MapFS { return fstest.MapFS{v2File: {Data: []byte(s)}} }
	v1 := func(s string) fstest.MapFS { return fstest.MapFS{v1File: {Data: []byte(s)}} }
	for _, tc := range []struct {
		name       string
		fs         fstest.MapFS
		ratio      float64
		goMemLimit string
		want       int64
		wantErr    bool
	}{
		{name: "cgroup v2 limit", fs: v2("536870912\n"), ratio: 0.9, want: 512 * mi * 9 / 10},
		{name: "cgroup v2 unlimited", fs: v2("max\n"), ratio: 0.9},
		{name: "cgroup v1 limit", fs: v1("268435456"), ratio: 0.5, want: 128 * mi},
		{name: "cgroup v1 unlimited", fs: v1("9223372036854771712"), ratio: 0.9},
		{name: "v2 wins over v1", fs: fstest.MapFS{v2File: {Data: []byte("1048576")}, v1File: {Data: []byte("2097152")}}, ratio: 1, want: mi},
		{name: "no cgroup files", fs: fstest.MapFS{}, ratio: 0.9},
		{name: "GOMEMLIMIT set", fs: v2("536870912"), ratio: 0.9, goMemLimit: "300MiB"},
		{name: "disabled", fs: v2("536870912"), ratio: 0},
		{name: "ratio above 1", fs: v2("536870912"), ratio: 1.5, wantErr: true},
		{name: "negative ratio", fs: v2("536870912"), ratio: -0.1, wantErr: true},
		{name: "garbage in the file", fs: v2("lots"), ratio: 0.9, wantErr: true},
		{name: "zero limit", fs: v2("0"), ratio: 0.9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Soft(tc.fs, tc.ratio, tc.goMemLimit)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if d.Limit != tc.want {
				t.Fatalf("limit = %d, want %d (%s)", d.Limit, tc.want, d.Reason)
			}
			if err == nil && d.Reason == "" {
				t.Fatal("no reason given")
			}
		})
	}
}

func TestContainerLimitNoLimit(t *testing.T) {
	if _, err := ContainerLimit(fstest.MapFS{}); !errors.Is(err, ErrNoLimit) {
		t.Fatalf("err = %v, want ErrNoLimit", err)
	}
}
