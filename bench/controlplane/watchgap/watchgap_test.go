package watchgap

import (
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

func status(code int32, reason metav1.StatusReason) *metav1.Status {
	return &metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason, Message: string(reason)}
}

func TestOnEvent(t *testing.T) {
	pod := &corev1.Pod{}
	for _, tt := range []struct {
		name string
		ev   watch.Event
		want Step
	}{
		{"added", watch.Event{Type: watch.Added, Object: pod}, Handle},
		{"modified", watch.Event{Type: watch.Modified, Object: pod}, Handle},
		{"deleted", watch.Event{Type: watch.Deleted, Object: pod}, Handle},
		{"bookmark", watch.Event{Type: watch.Bookmark, Object: pod}, Skip},
		{"410 expired", watch.Event{Type: watch.Error, Object: status(410, metav1.StatusReasonExpired)}, Relist},
		{"410 gone", watch.Event{Type: watch.Error, Object: status(410, metav1.StatusReasonGone)}, Relist},
		{"500", watch.Event{Type: watch.Error, Object: status(500, metav1.StatusReasonInternalError)}, Resume},
		{"429", watch.Event{Type: watch.Error, Object: status(429, metav1.StatusReasonTooManyRequests)}, Resume},
		{"an error without a status", watch.Event{Type: watch.Error, Object: pod}, Resume},
		{"an unknown type", watch.Event{Type: "WHAT", Object: pod}, Resume},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := OnEvent(tt.ev); got != tt.want {
				t.Errorf("OnEvent = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestOnError(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	for _, tt := range []struct {
		name string
		err  error
		want Step
	}{
		{"resource version too old", apierrors.NewResourceExpired("too old resource version: 1 (200)"), Relist},
		{"gone", &apierrors.StatusError{ErrStatus: *status(410, metav1.StatusReasonGone)}, Relist},
		{"timeout", apierrors.NewTimeoutError("later", 1), Resume},
		{"throttled", apierrors.NewTooManyRequests("busy", 1), Resume},
		{"not found", apierrors.NewNotFound(gr, "x"), Resume},
		{"connection refused", errors.New("dial tcp: connection refused"), Resume},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := OnError(tt.err); got != tt.want {
				t.Errorf("OnError(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestDiff(t *testing.T) {
	for _, tt := range []struct {
		name          string
		known, listed map[string]bool
		entered, left []string
	}{
		{"nothing changed", map[string]bool{"a": true, "b": false}, map[string]bool{"a": true, "b": false}, nil, nil},
		{"became ready", map[string]bool{"a": false}, map[string]bool{"a": true}, []string{"a"}, nil},
		{"became unready", map[string]bool{"a": true}, map[string]bool{"a": false}, nil, []string{"a"}},
		{"deleted while in", map[string]bool{"a": true, "b": true}, map[string]bool{"b": true}, nil, []string{"a"}},
		{"deleted while out", map[string]bool{"a": false}, map[string]bool{}, nil, nil},
		{"created in", map[string]bool{}, map[string]bool{"z": true, "y": true}, []string{"y", "z"}, nil},
		{"created out", nil, map[string]bool{"a": false}, nil, nil},
		{"both ways, sorted", map[string]bool{"d": true, "c": true, "a": false}, map[string]bool{"a": true, "b": true}, []string{"a", "b"}, []string{"c", "d"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			entered, left := Diff(tt.known, tt.listed)
			if !slices.Equal(entered, tt.entered) || !slices.Equal(left, tt.left) {
				t.Errorf("Diff = %v, %v; want %v, %v", entered, left, tt.entered, tt.left)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
		1600 * time.Millisecond, 3200 * time.Millisecond, 5 * time.Second, 5 * time.Second}
	for i, w := range want {
		if got := Backoff(i); got != w {
			t.Errorf("Backoff(%d) = %v, want %v", i, got, w)
		}
	}
	if got := Backoff(1000); got != 5*time.Second {
		t.Errorf("Backoff(1000) = %v", got)
	}
	if got := Backoff(-1); got != 100*time.Millisecond {
		t.Errorf("Backoff(-1) = %v", got)
	}
}
