package warmup

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

func TestSpecOf(t *testing.T) {
	reg := func(w v1beta1.WarmupSpec) *v1beta1.ServiceRegistry {
		return &v1beta1.ServiceRegistry{Spec: v1beta1.ServiceRegistrySpec{
			Ports: []v1beta1.ServicePort{{Name: "http"}, {Name: "admin"}}, Warmup: &w}}
	}
	ports := map[string]int32{"http": 8080, "admin": 9090}
	for _, tc := range []struct {
		name    string
		reg     *v1beta1.ServiceRegistry
		want    Spec
		wantErr string
	}{
		{name: "defaults: the first port, one request at a time", reg: reg(v1beta1.WarmupSpec{Paths: []string{"/a", "/b"}}),
			want: Spec{URLs: []string{"http://10.0.0.1:8080/a", "http://10.0.0.1:8080/b"}, Requests: 1, Concurrency: 1,
				RequestTimeout: time.Duration(v1beta1.DefaultWarmupRequestTimeoutMillis) * time.Millisecond,
				Timeout:        time.Duration(v1beta1.DefaultWarmupTimeoutMillis) * time.Millisecond}},
		{name: "a named port and every knob", reg: reg(v1beta1.WarmupSpec{Port: "admin", Paths: []string{"/"}, Requests: 20, Concurrency: 4,
			RequestTimeoutMillis: 250, TimeoutMillis: 9000, MinDurationMillis: ptrTo[int32](3000)}),
			want: Spec{URLs: []string{"http://10.0.0.1:9090/"}, Requests: 20, Concurrency: 4,
				RequestTimeout: 250 * time.Millisecond, Timeout: 9 * time.Second, MinDuration: 3 * time.Second}},
		{name: "a port the pod does not resolve", reg: reg(v1beta1.WarmupSpec{Port: "grpc", Paths: []string{"/"}}),
			wantErr: `warm-up port "grpc" is not resolved for pod p`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SpecOf(tc.reg, "p", "10.0.0.1", ports)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("SpecOf = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }
