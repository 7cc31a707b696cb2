package eureka

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr"

	"github.com/registrar-dev/registrar/pkg/discovery"
)

type fixedSource struct {
	v     *View
	ready bool
}

func (s fixedSource) View() *View { return s.v }
func (s fixedSource) Ready() bool { return s.ready }

func TestNegotiate(t *testing.T) {
	for _, tc := range []struct {
		accept string
		want   Format
		err    bool
	}{
		{"", XML, false},
		{"application/json", JSON, false},
		{"application/xml", XML, false},
		{"text/xml", XML, false},
		{"*/*", XML, false},
		{"application/json, */*;q=0.5", JSON, false},
		{"application/xml;q=0.5, application/json", JSON, false},
		{"application/xml, application/json", XML, false},
		{"application/json;q=0, application/xml", XML, false},
		{"application/vnd.spring+json", JSON, false},
		{"text/html", XML, true},
		{"garbage", XML, true},
		{"garbage, application/json", JSON, false},
		{"application/json;q=abc", XML, true},
	} {
		got, err := Negotiate(tc.accept)
		if (err != nil) != tc.err || (err == nil && got != tc.want) {
			t.Errorf("Negotiate(%q) = %v, %v; want %v, err %v", tc.accept, got, err, tc.want, tc.err)
		}
	}
}

func TestHandler(t *testing.T) {
	r := NewRegistry(RegistryOptions{})
	r.Apply(discovery.Change{Added: []discovery.Instance{rec("orders", "ns", "a", "10.0.0.1", map[string]int32{"http": 80})}})
	m := NewMetrics(nil)
	h := NewHandler(fixedSource{v: r.View(), ready: true}, HandlerOptions{Metrics: m, Log: logr.Discard()})
	for _, tc := range []struct {
		name, method, path, accept string
		body                       string
		code                       int
		contains                   string
	}{
		{name: "apps json", method: "GET", path: "/eureka/apps", accept: "application/json", code: 200, contains: `"apps__hashcode":"UP_1_"`},
		{name: "apps xml by default", method: "GET", path: "/eureka/apps/", code: 200, contains: "<apps__hashcode>UP_1_</apps__hashcode>"},
		{name: "v2 prefix", method: "GET", path: "/eureka/v2/apps", accept: "application/json", code: 200, contains: `"ORDERS"`},
		{name: "delta", method: "GET", path: "/eureka/apps/delta", accept: "application/json", code: 200, contains: `"actionType":"ADDED"`},
		{name: "app lower-case", method: "GET", path: "/eureka/apps/orders", accept: "application/json", code: 200, contains: `{"application":{"name":"ORDERS"`},
		{name: "app instance", method: "GET", path: "/eureka/apps/ORDERS/a.ns", accept: "application/json", code: 200, contains: `{"instance":{"instanceId":"a.ns"`},
		{name: "instance", method: "GET", path: "/eureka/instances/a.ns", accept: "application/xml", code: 200, contains: `<instance><instanceId>a.ns`},
		{name: "vip", method: "GET", path: "/eureka/vips/orders", accept: "application/json", code: 200, contains: `"vipAddress":"orders"`},
		{name: "svip", method: "GET", path: "/eureka/svips/orders", accept: "application/json", code: 200, contains: `"secureVipAddress":"orders"`},
		{name: "head", method: "HEAD", path: "/eureka/apps", code: 200},
		{name: "unknown app", method: "GET", path: "/eureka/apps/NOPE", code: 404, contains: "not found"},
		{name: "unknown instance", method: "GET", path: "/eureka/apps/ORDERS/nope", code: 404},
		{name: "unknown vip", method: "GET", path: "/eureka/vips/nope", code: 404},
		{name: "unknown path", method: "GET", path: "/eureka/peers", code: 404},
		{name: "outside", method: "GET", path: "/apps", code: 404},
		{name: "register", method: "POST", path: "/eureka/apps/ORDERS", body: "{}", code: 405, contains: "registers pods from Kubernetes"},
		{name: "renew", method: "PUT", path: "/eureka/apps/ORDERS/a.ns", code: 405, contains: "register-with-eureka=false"},
		{name: "cancel", method: "DELETE", path: "/eureka/apps/ORDERS/a.ns", code: 405},
		{name: "status override", method: "PUT", path: "/eureka/apps/ORDERS/a.ns/status?value=OUT_OF_SERVICE", code: 405},
		{name: "status override removal", method: "DELETE", path: "/eureka/apps/ORDERS/a.ns/status", code: 405},
		{name: "metadata", method: "PUT", path: "/eureka/apps/ORDERS/a.ns/metadata?x=y", code: 405},
		{name: "not acceptable", method: "GET", path: "/eureka/apps", accept: "text/html", code: 406, contains: "application/json"},
		{name: "uri too long", method: "GET", path: "/eureka/apps/" + strings.Repeat("A", 5000), code: 414},
		{name: "body too large", method: "POST", path: "/eureka/apps/ORDERS", body: strings.Repeat("x", 70<<10), code: 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			if tc.accept != "" {
				req.Header.Set("Accept", tc.accept)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.contains) {
				t.Errorf("%s %s: %d %q; want %d containing %q", tc.method, tc.path, w.Code, w.Body.String(), tc.code, tc.contains)
			}
			if tc.code == 405 && w.Header().Get("Allow") != "GET, HEAD" {
				t.Errorf("Allow %q", w.Header().Get("Allow"))
			}
		})
	}
}

func TestHandlerNotReadyAndInflight(t *testing.T) {
	m := NewMetrics(nil)
	h := NewHandler(fixedSource{v: NewRegistry(RegistryOptions{}).View()}, HandlerOptions{Metrics: m, MaxInflight: 1})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/eureka/apps", nil))
	if w.Code != http.StatusServiceUnavailable {
		t.Errorf("not ready: %d", w.Code)
	}
	h.sem <- struct{}{} // one request in flight
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/eureka/apps", nil))
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" || !strings.Contains(w.Body.String(), "in flight") {
		t.Errorf("over the bound: %d %q", w.Code, w.Body.String())
	}
}

func TestHandlerCachesAndGzips(t *testing.T) {
	r := NewRegistry(RegistryOptions{})
	r.Apply(discovery.Change{Added: []discovery.Instance{rec("orders", "ns", "a", "10.0.0.1", map[string]int32{"http": 80})}})
	v := r.View()
	e1, hit1, _ := v.Body(KindApps, "", JSON)
	e2, hit2, _ := v.Body(KindApps, "", JSON)
	if hit1 || !hit2 || e1 != e2 {
		t.Errorf("cache: first hit %v, second hit %v, same %v", hit1, hit2, e1 == e2)
	}
	h := NewHandler(fixedSource{v: v, ready: true}, HandlerOptions{Metrics: NewMetrics(nil)})
	req := httptest.NewRequest("GET", "/eureka/apps", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	req.Header.Set("Accept", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Header().Get("Content-Encoding") != "gzip" || w.Body.Len() != len(e1.Gzip()) {
		t.Errorf("gzip: %q, %d bytes", w.Header().Get("Content-Encoding"), w.Body.Len())
	}
}
