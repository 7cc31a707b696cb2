package v1beta1

import (
	"encoding/json"
	"reflect"
	"testing"
)

// wireObject is a v1beta1 ServiceRegistry with every field set, including those whose zero
// is a value (drain.seconds, injection.enabled, warmup.minDurationMillis, the status
// counters): stored objects and status patches must read and write back the same JSON.
const wireObject = `{
 "apiVersion": "discovery.registrar.dev/v1beta1", "kind": "ServiceRegistry",
 "metadata": {"name": "web", "namespace": "shop", "generation": 3},
 "spec": {
  "serviceName": "web",
  "selector": {"matchLabels": {"app": "web"}},
  "ports": [{"name": "http", "port": 8080}, {"name": "metrics", "targetPort": "metrics"}],
  "warmup": {"paths": ["/healthz"], "requests": 10, "concurrency": 2, "port": "http",
             "timeoutMillis": 30000, "requestTimeoutMillis": 2000, "minDurationMillis": 0, "onFailure": "Block"},
  "drain": {"seconds": 0, "callerCacheSeconds": 5},
  "injection": {"enabled": false},
  "stores": ["etcd", "coredns"],
  "slowStart": {"windowSeconds": 60, "minWeightPercent": 10},
  "dns": {"ttlSeconds": 5}
 },
 "status": {
  "observedGeneration": 3,
  "conditions": [{"type": "Ready", "status": "True", "observedGeneration": 3,
                  "lastTransitionTime": "2026-11-30T10:00:00Z", "reason": "AllRegistered", "message": "1 of 1"}],
  "serviceName": "web",
  "desired": 0, "registered": 0, "warming": 0, "draining": 0,
  "drain": {"seconds": 0, "callerCacheSeconds": 5, "deregistrationLagMillis": 40, "recommendedSeconds": 6},
  "stores": [{"name": "etcd", "registered": 0, "synced": false, "message": "dial tcp: timeout"}],
  "endpoints": [{"pod": "web-0", "uid": "u-1", "ip": "10.0.0.1", "state": "Draining", "reason": "PodTerminating",
                 "since": "2026-11-30T10:00:00Z", "drainUntil": "2026-11-30T10:00:15Z"}]
 }
}`

func TestWireShapeRoundTrips(t *testing.T) {
	for name, in := range map[string]string{
		"full object": wireObject,
		// Fields that were always written stay written (0 and false are values); optional
		// ones that were omitted stay omitted.
		"minimal status": `{"metadata": {"name": "web"}, "spec": {"selector": {"matchLabels": {"app": "web"}}},
		  "status": {"desired": 0, "registered": 0, "warming": 0, "draining": 0,
		    "drain": {"seconds": 15, "callerCacheSeconds": 0, "recommendedSeconds": 0},
		    "stores": [{"name": "etcd", "registered": 0, "synced": true}],
		    "endpoints": [{"pod": "web-0", "state": "Pending"}]}}`,
	} {
		t.Run(name, func(t *testing.T) {
			var reg ServiceRegistry
			if err := json.Unmarshal([]byte(in), &reg); err != nil {
				t.Fatalf("unmarshal: %v", err)
			}
			out, err := json.Marshal(&reg)
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			var want, got map[string]any
			if err := json.Unmarshal([]byte(in), &want); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatal(err)
			}
			// metadata gains "creationTimestamp": null, as it always did.
			delete(got["metadata"].(map[string]any), "creationTimestamp")
			if !reflect.DeepEqual(want, got) {
				t.Errorf("round trip changed the JSON:\n in: %s\nout: %s", in, out)
			}
		})
	}
}

// A spec built in Go without drain.seconds or injection.enabled leaves them to the CRD
// defaults instead of sending 0 / false.
func TestUnsetDefaultedFieldsAreOmitted(t *testing.T) {
	out, err := json.Marshal(ServiceRegistrySpec{Drain: &DrainSpec{}, Injection: &InjectionSpec{}})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if d := got["drain"].(map[string]any); len(d) != 0 {
		t.Errorf("drain = %v, want {} (seconds left to the default)", d)
	}
	if i := got["injection"].(map[string]any); len(i) != 0 {
		t.Errorf("injection = %v, want {} (enabled left to the default)", i)
	}
}
