package metrics_test

import (
	"strings"
	"testing"

	"github.com/registrar-dev/registrar/test/support/metrics"
)

func TestParse(t *testing.T) {
	const text = `# HELP a_total A.
# TYPE a_total counter
a_total{op="apply",store="etcd"} 3
a_total{op="list",store="etcd"} 4.5
b 7
malformed
c{x="1"} NaN-ish
`
	ss, err := metrics.Parse(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 3 {
		t.Fatalf("parsed %d samples, want 3: %+v", len(ss), ss)
	}
	if got := ss.Sum("a_total"); got != 7.5 {
		t.Errorf("Sum(a_total) = %v, want 7.5", got)
	}
	by := ss.BySeries()
	if by[`a_total{op="apply",store="etcd"}`] != 3 || by["b"] != 7 {
		t.Errorf("BySeries = %v", by)
	}
	if ss[0].Labels != `op="apply",store="etcd"` {
		t.Errorf("labels = %q", ss[0].Labels)
	}
}
