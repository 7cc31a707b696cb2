package regstatus

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

func TestPodsInjectedCondition(t *testing.T) {
	now := time.Unix(1000, 0)
	many := make([]Unmutated, 7)
	for i := range many {
		many[i] = Unmutated{Pod: fmt.Sprintf("web-%d", i), Lacks: "the readiness gate and the preStop drain"}
	}
	for _, tt := range []struct {
		name     string
		in       *Injection
		want     metav1.ConditionStatus
		reason   string
		contains []string
	}{
		{name: "injection not enabled: no condition", in: nil},
		{name: "all injected", in: &Injection{}, want: metav1.ConditionTrue, reason: v1beta1.ReasonAllPodsInjected},
		{name: "one bypassed", in: &Injection{Unmutated: []Unmutated{{Pod: "web-1", Lacks: "the preStop drain"}}},
			want: metav1.ConditionFalse, reason: v1beta1.ReasonPodsNotInjected, contains: []string{"web-1 (lacks the preStop drain)", "rollout restart"}},
		{name: "many: five named", in: &Injection{Unmutated: many}, want: metav1.ConditionFalse, reason: v1beta1.ReasonPodsNotInjected,
			contains: []string{"7 selected pod(s)", "web-4", "and 2 more"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := Build(v1beta1.ServiceRegistryStatus{}, Input{Generation: 1, ServiceName: "web", Stored: nil, Injection: tt.in, Now: now})
			c := meta.FindStatusCondition(st.Conditions, v1beta1.ConditionPodsInjected)
			if tt.in == nil {
				if c != nil {
					t.Fatalf("condition %+v, want none", c)
				}
				return
			}
			if c == nil || c.Status != tt.want || c.Reason != tt.reason {
				t.Fatalf("condition %+v, want %s/%s", c, tt.want, tt.reason)
			}
			for _, s := range tt.contains {
				if !strings.Contains(c.Message, s) {
					t.Errorf("message %q lacks %q", c.Message, s)
				}
			}
			if strings.Contains(c.Message, "web-5") {
				t.Errorf("message names more than five pods: %q", c.Message)
			}
		})
	}
}
