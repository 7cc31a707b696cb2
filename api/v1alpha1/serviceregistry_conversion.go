package v1alpha1

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// AnnotationDurations, on a ServiceRegistry converted from v1alpha1, keeps the v1alpha1
// durations that v1beta1's integer fields cannot hold exactly, so that converting back
// gives the same object: a duration that is not a whole number of the v1beta1 unit
// (milliseconds for the warm-up fields, seconds for slowStart.window; "1500us" is stored as
// timeoutMillis 1), out of the integer's range, or set to 0 where v1beta1's 0 means unset
// (warmup.timeout and requestTimeout). Its value is a JSON object from the v1alpha1 field
// (e.g. "warmup.timeout") to the duration in nanoseconds. An entry is used only while the
// v1beta1 field still holds what it converted to: a change made through v1beta1 wins, and
// the entry is dropped.
const AnnotationDurations = "discovery.registrar.dev/v1alpha1-durations"

// The v1alpha1 fields AnnotationDurations may name.
const (
	fieldWarmupTimeout        = "warmup.timeout"
	fieldWarmupRequestTimeout = "warmup.requestTimeout"
	fieldWarmupMinDuration    = "warmup.minDuration"
	fieldSlowStartWindow      = "slowStart.window"
)

var _ conversion.Convertible = &ServiceRegistry{}

// ConvertTo converts this v1alpha1 ServiceRegistry to the hub version, v1beta1. Durations
// become integers: warmup.timeout, requestTimeout and minDuration in milliseconds
// (timeoutMillis, requestTimeoutMillis, minDurationMillis), slowStart.window in seconds
// (windowSeconds), truncated toward zero; what that loses is kept in AnnotationDurations.
func (src *ServiceRegistry) ConvertTo(dstRaw conversion.Hub) error {
	dst, ok := dstRaw.(*v1beta1.ServiceRegistry)
	if !ok {
		return fmt.Errorf("convert v1alpha1 ServiceRegistry to %T: not a v1beta1 ServiceRegistry", dstRaw)
	}
	in := src.DeepCopy()
	lost := map[string]int64{}
	dst.ObjectMeta = in.ObjectMeta
	dst.Spec = specToHub(&in.Spec, lost)
	dst.Status = statusToHub(&in.Status)
	if len(lost) > 0 {
		raw, err := json.Marshal(lost)
		if err != nil {
			return fmt.Errorf("convert v1alpha1 ServiceRegistry %s/%s: encode %s: %w", src.Namespace, src.Name, AnnotationDurations, err)
		}
		if dst.Annotations == nil {
			dst.Annotations = map[string]string{}
		}
		dst.Annotations[AnnotationDurations] = string(raw)
	}
	return nil
}

// ConvertFrom converts the hub version, v1beta1, to this v1alpha1 ServiceRegistry: the
// integer durations become durations, or the exact v1alpha1 values AnnotationDurations
// kept (the annotation itself is not carried over).
func (dst *ServiceRegistry) ConvertFrom(srcRaw conversion.Hub) error {
	src, ok := srcRaw.(*v1beta1.ServiceRegistry)
	if !ok {
		return fmt.Errorf("convert %T to a v1alpha1 ServiceRegistry: not a v1beta1 ServiceRegistry", srcRaw)
	}
	in := src.DeepCopy()
	kept := map[string]int64{}
	if raw, ok := in.Annotations[AnnotationDurations]; ok {
		// An annotation that does not parse was not written by ConvertTo: it is left as it is.
		if err := json.Unmarshal([]byte(raw), &kept); err == nil {
			delete(in.Annotations, AnnotationDurations)
			if len(in.Annotations) == 0 {
				in.Annotations = nil
			}
		}
	}
	dst.ObjectMeta = in.ObjectMeta
	dst.Spec = specFromHub(&in.Spec, kept)
	dst.Status = statusFromHub(&in.Status)
	return nil
}

// toUnits is d in whole units (truncated toward zero, clamped to int32) and whether that
// is exact: whether fromUnits gives d back.
func toUnits(d time.Duration, unit time.Duration) (int32, bool) {
	n := int64(d / unit)
	switch {
	case n > math.MaxInt32:
		return math.MaxInt32, false
	case n < math.MinInt32:
		return math.MinInt32, false
	}
	return int32(n), time.Duration(n)*unit == d
}

func fromUnits(n int32, unit time.Duration) time.Duration { return time.Duration(n) * unit }

// optionalToHub converts a duration whose unset v1beta1 value is 0 (timeout,
// requestTimeout): nil is 0; a duration of 0 is recorded in lost, as 0 reads back as unset.
func optionalToHub(d *metav1.Duration, unit time.Duration, field string, lost map[string]int64) int32 {
	if d == nil {
		return 0
	}
	n, exact := toUnits(d.Duration, unit)
	if !exact || n == 0 {
		lost[field] = int64(d.Duration)
	}
	return n
}

// optionalFromHub is the inverse of optionalToHub.
func optionalFromHub(n int32, unit time.Duration, field string, kept map[string]int64) *metav1.Duration {
	if v, ok := kept[field]; ok {
		if m, _ := toUnits(time.Duration(v), unit); m == n {
			return &metav1.Duration{Duration: time.Duration(v)}
		}
	}
	if n == 0 {
		return nil
	}
	return &metav1.Duration{Duration: fromUnits(n, unit)}
}

// pointerToHub converts a duration that stays a pointer in v1beta1 (minDuration).
func pointerToHub(d *metav1.Duration, unit time.Duration, field string, lost map[string]int64) *int32 {
	if d == nil {
		return nil
	}
	n, exact := toUnits(d.Duration, unit)
	if !exact {
		lost[field] = int64(d.Duration)
	}
	return &n
}

// pointerFromHub is the inverse of pointerToHub.
func pointerFromHub(n *int32, unit time.Duration, field string, kept map[string]int64) *metav1.Duration {
	if n == nil {
		return nil
	}
	return &metav1.Duration{Duration: valueFromHub(*n, unit, field, kept)}
}

// valueToHub converts a required duration (slowStart.window).
func valueToHub(d time.Duration, unit time.Duration, field string, lost map[string]int64) int32 {
	n, exact := toUnits(d, unit)
	if !exact {
		lost[field] = int64(d)
	}
	return n
}

// valueFromHub is the inverse of valueToHub.
func valueFromHub(n int32, unit time.Duration, field string, kept map[string]int64) time.Duration {
	if v, ok := kept[field]; ok {
		if m, _ := toUnits(time.Duration(v), unit); m == n {
			return time.Duration(v)
		}
	}
	return fromUnits(n, unit)
}

func specToHub(in *ServiceRegistrySpec, lost map[string]int64) v1beta1.ServiceRegistrySpec {
	out := v1beta1.ServiceRegistrySpec{
		ServiceName: in.ServiceName,
		Selector:    in.Selector,
		Drain:       (*v1beta1.DrainSpec)(in.Drain),
		Injection:   (*v1beta1.InjectionSpec)(in.Injection),
		Stores:      in.Stores,
		DNS:         (*v1beta1.DNSSpec)(in.DNS),
		Sharing:     (*v1beta1.SharingSpec)(in.Sharing),
	}
	if in.Ports != nil {
		out.Ports = make([]v1beta1.ServicePort, len(in.Ports))
		for i := range in.Ports {
			out.Ports[i] = v1beta1.ServicePort(in.Ports[i])
		}
	}
	if w := in.Warmup; w != nil {
		out.Warmup = &v1beta1.WarmupSpec{
			Paths:                w.Paths,
			Requests:             w.Requests,
			Concurrency:          w.Concurrency,
			Port:                 w.Port,
			TimeoutMillis:        optionalToHub(w.Timeout, time.Millisecond, fieldWarmupTimeout, lost),
			RequestTimeoutMillis: optionalToHub(w.RequestTimeout, time.Millisecond, fieldWarmupRequestTimeout, lost),
			MinDurationMillis:    pointerToHub(w.MinDuration, time.Millisecond, fieldWarmupMinDuration, lost),
			OnFailure:            v1beta1.WarmupFailurePolicy(w.OnFailure),
		}
	}
	if s := in.SlowStart; s != nil {
		out.SlowStart = &v1beta1.SlowStartSpec{
			WindowSeconds:    valueToHub(s.Window.Duration, time.Second, fieldSlowStartWindow, lost),
			MinWeightPercent: s.MinWeightPercent,
		}
	}
	return out
}

func specFromHub(in *v1beta1.ServiceRegistrySpec, kept map[string]int64) ServiceRegistrySpec {
	out := ServiceRegistrySpec{
		ServiceName: in.ServiceName,
		Selector:    in.Selector,
		Drain:       (*DrainSpec)(in.Drain),
		Injection:   (*InjectionSpec)(in.Injection),
		Stores:      in.Stores,
		DNS:         (*DNSSpec)(in.DNS),
		Sharing:     (*SharingSpec)(in.Sharing),
	}
	if in.Ports != nil {
		out.Ports = make([]ServicePort, len(in.Ports))
		for i := range in.Ports {
			out.Ports[i] = ServicePort(in.Ports[i])
		}
	}
	if w := in.Warmup; w != nil {
		out.Warmup = &WarmupSpec{
			Paths:          w.Paths,
			Requests:       w.Requests,
			Concurrency:    w.Concurrency,
			Port:           w.Port,
			Timeout:        optionalFromHub(w.TimeoutMillis, time.Millisecond, fieldWarmupTimeout, kept),
			RequestTimeout: optionalFromHub(w.RequestTimeoutMillis, time.Millisecond, fieldWarmupRequestTimeout, kept),
			MinDuration:    pointerFromHub(w.MinDurationMillis, time.Millisecond, fieldWarmupMinDuration, kept),
			OnFailure:      WarmupFailurePolicy(w.OnFailure),
		}
	}
	if s := in.SlowStart; s != nil {
		out.SlowStart = &SlowStartSpec{
			Window:           metav1.Duration{Duration: valueFromHub(s.WindowSeconds, time.Second, fieldSlowStartWindow, kept)},
			MinWeightPercent: s.MinWeightPercent,
		}
	}
	return out
}

func statusToHub(in *ServiceRegistryStatus) v1beta1.ServiceRegistryStatus {
	out := v1beta1.ServiceRegistryStatus{
		Conditions:         in.Conditions,
		ObservedGeneration: in.ObservedGeneration,
		ServiceName:        in.ServiceName,
		Desired:            in.Desired,
		Registered:         in.Registered,
		Warming:            in.Warming,
		Draining:           in.Draining,
		Drain:              (*v1beta1.DrainStatus)(in.Drain),
	}
	if in.Stores != nil {
		out.Stores = make([]v1beta1.StoreStatus, len(in.Stores))
		for i := range in.Stores {
			out.Stores[i] = v1beta1.StoreStatus(in.Stores[i])
		}
	}
	if in.Endpoints != nil {
		out.Endpoints = make([]v1beta1.EndpointStatus, len(in.Endpoints))
		for i, e := range in.Endpoints {
			out.Endpoints[i] = v1beta1.EndpointStatus{
				Pod: e.Pod, UID: e.UID, IP: e.IP, State: v1beta1.EndpointState(e.State), Reason: e.Reason,
				Since: e.Since, DrainUntil: e.DrainUntil,
			}
		}
	}
	return out
}

func statusFromHub(in *v1beta1.ServiceRegistryStatus) ServiceRegistryStatus {
	out := ServiceRegistryStatus{
		Conditions:         in.Conditions,
		ObservedGeneration: in.ObservedGeneration,
		ServiceName:        in.ServiceName,
		Desired:            in.Desired,
		Registered:         in.Registered,
		Warming:            in.Warming,
		Draining:           in.Draining,
		Drain:              (*DrainStatus)(in.Drain),
	}
	if in.Stores != nil {
		out.Stores = make([]StoreStatus, len(in.Stores))
		for i := range in.Stores {
			out.Stores[i] = StoreStatus(in.Stores[i])
		}
	}
	if in.Endpoints != nil {
		out.Endpoints = make([]EndpointStatus, len(in.Endpoints))
		for i, e := range in.Endpoints {
			out.Endpoints[i] = EndpointStatus{
				Pod: e.Pod, UID: e.UID, IP: e.IP, State: EndpointState(e.State), Reason: e.Reason,
				Since: e.Since, DrainUntil: e.DrainUntil,
			}
		}
	}
	return out
}
