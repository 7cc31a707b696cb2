// Package eureka_test reads registrar's store through cmd/eureka-api's handler with a real
// Eureka client library (github.com/hudl/fargo), from a module of its own so that the
// client's dependencies stay out of registrar's. The records are written by the operator's
// etcd store (internal/store/etcd) into a real etcd.
package eureka_test

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/hudl/fargo"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/internal/eureka"
	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/store/etcd"
	"github.com/registrar-dev/registrar/pkg/discovery"
	"github.com/registrar-dev/registrar/test/support/etcdtest"
)

var srv *etcdtest.Server

func TestMain(m *testing.M) {
	os.Exit(etcdtest.Main(m, func(s *etcdtest.Server) error { srv = s; return nil }))
}

const prefix = "/registrar-eureka-test"

func endpoint(service, pod, addr string) store.Endpoint {
	return store.Endpoint{Service: service, Namespace: "shop", Pod: pod, UID: "uid-" + pod, Address: addr,
		Ports: map[string]int32{"http": 8080}, Node: "node-1", Zone: "zone-a", Cluster: "c1", Owner: "owner-uid",
		RegisteredAt: time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC)}
}

// harness is the store the operator writes and the Eureka API over it.
type harness struct {
	t     *testing.T
	st    *etcd.Store
	cli   *clientv3.Client
	url   string
	src   *eureka.Follower
	owned map[string]store.Record // key → record, as the operator keeps them
}

func start(t *testing.T) *harness {
	t.Helper()
	etcdtest.Shared(t)
	cli, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.Delete(ctx, prefix+"/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.New(discovery.Config{Client: cli, Prefix: prefix, AllServices: true,
		ProbeInterval: 200 * time.Millisecond, ProbeTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dc.Close() })
	metrics := eureka.NewMetrics(nil)
	f := eureka.NewFollower(dc, eureka.NewRegistry(eureka.RegistryOptions{}), logr.Discard(), metrics)
	rctx, rcancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = f.Run(rctx) }()
	t.Cleanup(func() { rcancel(); <-done })
	hs := httptest.NewServer(eureka.NewHandler(f, eureka.HandlerOptions{Metrics: metrics, Log: logr.Discard()}))
	t.Cleanup(hs.Close)
	return &harness{t: t, st: etcd.New(cli, etcd.Options{Prefix: prefix}), cli: cli, url: hs.URL + "/eureka", src: f, owned: map[string]store.Record{}}
}

func (h *harness) create(eps ...store.Endpoint) {
	h.t.Helper()
	byScope := map[store.Scope][]store.Endpoint{}
	for _, ep := range eps {
		s := store.Scope{Service: ep.Service, Namespace: ep.Namespace}
		byScope[s] = append(byScope[s], ep)
	}
	for scope, list := range byScope {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		recs, err := h.st.Apply(ctx, scope, store.Changes{Create: list})
		cancel()
		if err != nil {
			h.t.Fatalf("create in %v: %v", scope, err)
		}
		for _, r := range recs {
			h.owned[r.Key] = r
		}
	}
}

func (h *harness) remove(service, pod string) {
	h.t.Helper()
	for key, r := range h.owned {
		if r.Service == service && r.Pod == pod {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, err := h.st.Apply(ctx, store.Scope{Service: service, Namespace: r.Namespace}, store.Changes{Delete: []store.Record{r}})
			cancel()
			if err != nil {
				h.t.Fatalf("delete %s: %v", key, err)
			}
			delete(h.owned, key)
			return
		}
	}
	h.t.Fatalf("no record of %s/%s", service, pod)
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// local is a Eureka client's local registry: app → instance ID → status, updated from full
// fetches and deltas as DiscoveryClient.updateDelta does.
type local map[string]map[string]fargo.StatusType

func fromApps(apps []*fargo.Application) local {
	l := local{}
	for _, app := range apps {
		l.apply(app, "")
	}
	return l
}

func (l local) apply(app *fargo.Application, action string) {
	if l[app.Name] == nil {
		l[app.Name] = map[string]fargo.StatusType{}
	}
	for _, inst := range app.Instances {
		if action == "DELETED" {
			delete(l[app.Name], inst.InstanceId)
		} else {
			l[app.Name][inst.InstanceId] = inst.Status
		}
	}
}

// hashCode is Applications.getReconcileHashCode over the local registry, recomputed the way
// Eureka's client does after a delta.
func (l local) hashCode() string {
	counts := map[string]int{}
	for _, app := range l {
		for _, st := range app {
			counts[string(st)]++
		}
	}
	var names []string
	for s := range counts {
		names = append(names, s)
	}
	sort.Strings(names)
	out := ""
	for _, s := range names {
		out += s + "_" + itoa(counts[s]) + "_"
	}
	return out
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// delta fetches /apps/delta with fargo's own response types; actions carry actionType,
// which fargo's Instance does not decode, so it is read alongside.
func (h *harness) delta(useJSON bool) (*fargo.GetAppsResponse, map[string]string) {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, h.url+"/apps/delta", nil)
	req.Header.Set("Accept", map[bool]string{true: "application/json", false: "application/xml"}[useJSON])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		h.t.Fatalf("delta: %d %v %s", resp.StatusCode, err, body)
	}
	actions := map[string]string{}
	var r *fargo.GetAppsResponse
	if useJSON {
		var rj fargo.GetAppsResponseJson
		if err := json.Unmarshal(body, &rj); err != nil {
			h.t.Fatalf("fargo decodes the JSON delta: %v\n%s", err, body)
		}
		r = rj.Response
		var raw struct {
			Applications struct {
				Application []struct {
					Instance []struct{ InstanceID, ActionType string }
				}
			}
		}
		_ = json.Unmarshal(body, &raw)
		for _, a := range raw.Applications.Application {
			for _, i := range a.Instance {
				actions[i.InstanceID] = i.ActionType
			}
		}
	} else {
		if err := xml.Unmarshal(body, &r); err != nil {
			h.t.Fatalf("fargo decodes the XML delta: %v\n%s", err, body)
		}
		var raw struct {
			Application []struct {
				Instance []struct {
					ID     string `xml:"instanceId"`
					Action string `xml:"actionType"`
				} `xml:"instance"`
			} `xml:"application"`
		}
		_ = xml.Unmarshal(body, &raw)
		for _, a := range raw.Application {
			for _, i := range a.Instance {
				actions[i.ID] = i.Action
			}
		}
	}
	return r, actions
}

func (l local) applyDelta(r *fargo.GetAppsResponse, actions map[string]string) {
	for _, app := range r.Applications {
		for _, inst := range app.Instances {
			l.apply(&fargo.Application{Name: app.Name, Instances: []*fargo.Instance{inst}}, actions[inst.InstanceId])
		}
	}
}

func TestEurekaClient(t *testing.T) {
	for _, useJSON := range []bool{true, false} {
		name := map[bool]string{true: "json", false: "xml"}[useJSON]
		t.Run(name, func(t *testing.T) { testEurekaClient(t, useJSON) })
	}
}

func testEurekaClient(t *testing.T, useJSON bool) {
	h := start(t)
	h.create(endpoint("orders", "orders-1", "10.36.0.1"), endpoint("orders", "orders-2", "10.36.0.2"),
		endpoint("billing", "billing-1", "10.36.1.1"))
	eventually(t, "ready", h.src.Ready)
	conn := fargo.NewConn(h.url)
	conn.UseJson = useJSON
	conn.Timeout = 10 * time.Second

	// Full fetch.
	var apps map[string]*fargo.Application
	eventually(t, "three instances in the full fetch", func() bool {
		var err error
		apps, err = conn.GetApps()
		return err == nil && len(apps) == 2 && apps["ORDERS"] != nil && len(apps["ORDERS"].Instances) == 2
	})
	checkInstance(t, apps["ORDERS"].Instances[0])
	var list []*fargo.Application
	for _, a := range apps {
		list = append(list, a)
	}
	client := fromApps(list)

	// One application, one VIP.
	app, err := conn.GetApp("orders")
	if err != nil || len(app.Instances) != 2 {
		t.Fatalf("GetApp: %v %v", app, err)
	}
	if _, err := conn.GetApp("nope"); err == nil {
		t.Error("GetApp(nope) found something")
	}
	vip, err := conn.GetInstancesByVIPAddress("billing", false)
	if err != nil || len(vip) != 1 || vip[0].InstanceId != "billing-1.shop" {
		t.Fatalf("GetInstancesByVIPAddress: %v %v", vip, err)
	}

	// A change: one added, one deleted; the delta carries both and the hash code the
	// client recomputes after applying it matches.
	h.create(endpoint("orders", "orders-3", "10.36.0.3"))
	h.remove("billing", "billing-1")
	eventually(t, "the change in the full fetch", func() bool {
		a, err := conn.GetApps()
		return err == nil && a["ORDERS"] != nil && len(a["ORDERS"].Instances) == 3 && (a["BILLING"] == nil || len(a["BILLING"].Instances) == 0)
	})
	checkDelta(t, h, client, useJSON)

	// The deleted instance is gone from every endpoint.
	if _, err := conn.GetApp("billing"); err == nil {
		t.Error("GetApp(billing) still answers after its last instance left")
	}
	if _, err := conn.GetInstancesByVIPAddress("billing", false); err == nil {
		t.Error("VIP billing still answers")
	}

	// Registration is refused with an explanation.
	err = conn.RegisterInstance(&fargo.Instance{HostName: "vm-1", App: "LEGACY", IPAddr: "10.0.0.9", Port: 8080, Status: fargo.UP,
		DataCenterInfo: fargo.DataCenterInfo{Name: fargo.MyOwn}})
	if code, ok := fargo.HTTPResponseStatusCode(err); !ok || code != http.StatusMethodNotAllowed {
		t.Errorf("RegisterInstance: %v, want 405", err)
	}
}

// checkInstance checks the fields of orders-1 as fargo decoded them.
func checkInstance(t *testing.T, o1 *fargo.Instance) {
	t.Helper()
	if o1.InstanceId != "orders-1.shop" || o1.App != "ORDERS" || o1.IPAddr != "10.36.0.1" || o1.HostName != "10.36.0.1" ||
		o1.Port != 8080 || !o1.PortEnabled || o1.Status != fargo.UP || o1.VipAddress != "orders" ||
		o1.DataCenterInfo.Name != fargo.MyOwn {
		t.Errorf("instance as fargo reads it: %+v", o1)
	}
	if zone, err := o1.Metadata.GetString("zone"); err != nil || zone != "zone-a" {
		t.Errorf("metadata zone %q %v", zone, err)
	}
	if o1.LeaseInfo.RegistrationTimestamp != time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC).UnixMilli() {
		t.Errorf("registration timestamp %d", o1.LeaseInfo.RegistrationTimestamp)
	}
}

// checkDelta fetches the delta after orders-3 was added and billing-1 deleted, applies it to
// the client's copy as Eureka's client does and compares the hash codes.
func checkDelta(t *testing.T, h *harness, client local, useJSON bool) {
	t.Helper()
	r, actions := h.delta(useJSON)
	if actions["orders-3.shop"] != "ADDED" || actions["billing-1.shop"] != "DELETED" {
		t.Errorf("delta actions %v", actions)
	}
	client.applyDelta(r, actions)
	if got := client.hashCode(); got != r.AppsHashcode || got != "UP_3_" {
		t.Errorf("hash code recomputed by the client %q, server's %q, want UP_3_", got, r.AppsHashcode)
	}
	if len(client["BILLING"]) != 0 || len(client["ORDERS"]) != 3 {
		t.Errorf("client's registry after the delta: %v", client)
	}
	if r.VersionsDelta < 2 {
		t.Errorf("versions__delta %d, want it to have increased", r.VersionsDelta)
	}
}
