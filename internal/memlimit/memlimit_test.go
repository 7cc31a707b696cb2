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

func TestGCPercent(t *testing.T) {
	for _, tc := range []struct {
		name    string
		percent int
		goGC    string
		want    int
		wantErr bool
	}{
		{name: "registrar's default", percent: DefaultGCPercent, want: DefaultGCPercent},
		{name: "a flag value", percent: 200, want: 200},
		{name: "GOGC wins", percent: DefaultGCPercent, goGC: "100"},
		{name: "GOGC=off wins too", percent: 30, goGC: "off"},
		{name: "0 keeps Go's default", percent: 0},
		{name: "the largest", percent: MaxGCPercent, want: MaxGCPercent},
		{name: "negative", percent: -1, wantErr: true},
		{name: "too large", percent: MaxGCPercent + 1, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := GCPercent(tc.percent, tc.goGC)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if p.Percent != tc.want {
				t.Fatalf("percent = %d, want %d (%s)", p.Percent, tc.want, p.Reason)
			}
			if err == nil && p.Reason == "" {
				t.Fatal("no reason given")
			}
		})
	}
}
