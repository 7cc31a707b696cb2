package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

func TestDoReconcileRunsPhasesInOrderUntilAnError(t *testing.T) {
	var ran []string
	phase := func(name string, res ctrl.Result, err error) reconcilePhase {
		return func(context.Context, *reconcileScope) (ctrl.Result, error) {
			ran = append(ran, name)
			return res, err
		}
	}
	boom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		phases  []reconcilePhase
		wantRan string
		want    ctrl.Result
		wantErr error
	}{
		{"all pass, soonest requeue wins", []reconcilePhase{
			phase("a", ctrl.Result{RequeueAfter: 30 * time.Second}, nil),
			phase("b", ctrl.Result{}, nil),
			phase("c", ctrl.Result{RequeueAfter: time.Second}, nil),
		}, "abc", ctrl.Result{RequeueAfter: time.Second}, nil},
		{"an error stops the later phases", []reconcilePhase{
			phase("a", ctrl.Result{RequeueAfter: time.Second}, nil),
			phase("b", ctrl.Result{}, boom),
			phase("c", ctrl.Result{}, nil),
		}, "ab", ctrl.Result{}, boom},
		{"nothing asked", []reconcilePhase{phase("a", ctrl.Result{}, nil)}, "a", ctrl.Result{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran = nil
			got, err := doReconcile(context.Background(), &reconcileScope{}, tc.phases)
			if strings.Join(ran, "") != tc.wantRan || got != tc.want || !errors.Is(err, tc.wantErr) {
				t.Errorf("ran %v, got %+v, %v; want %s, %+v, %v", ran, got, err, tc.wantRan, tc.want, tc.wantErr)
			}
		})
	}
}
