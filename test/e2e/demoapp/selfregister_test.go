package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/test/support/etcdtest"
)

// startEtcd starts a real etcd (the binary of hack/envtest-assets.sh) or fails the test.
func startEtcd(t *testing.T) *clientv3.Client {
	t.Helper()
	if _, err := etcdtest.Binary(); err != nil {
		t.Fatalf("self-registration needs a real etcd (make test sets ETCD_BIN): %v", err)
	}
	srv, err := etcdtest.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	cli, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// present reports whether key exists, and its lease.
func present(t *testing.T, cli *clientv3.Client, key string) (bool, clientv3.LeaseID, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	if len(resp.Kvs) == 0 {
		return false, 0, nil
	}
	return true, clientv3.LeaseID(resp.Kvs[0].Lease), resp.Kvs[0].Value
}

func TestSelfRegistration(t *testing.T) {
	cli := startEtcd(t)
	ctx := context.Background()
	const ttl = 2 * time.Second

	t.Run("keepalive holds the key past its TTL; stopping leaves it to expire", func(t *testing.T) {
		reg := &SelfRegistration{Client: cli, Prefix: "/ttl/services/demo/", Pod: "demo-a", Address: "10.0.0.1:8080", TTL: ttl, KeepAlive: 300 * time.Millisecond}
		if err := reg.Register(ctx); err != nil {
			t.Fatal(err)
		}
		ok, lease, value := present(t, cli, "/ttl/services/demo/demo-a")
		if !ok || lease == 0 {
			t.Fatalf("key not written with a lease (present %v lease %x)", ok, lease)
		}
		var e Entry
		if err := json.Unmarshal(value, &e); err != nil || e != (Entry{Address: "10.0.0.1:8080", Pod: "demo-a"}) {
			t.Errorf("value %s (%v), want address and pod", value, err)
		}
		ttlResp, err := cli.TimeToLive(ctx, lease)
		if err != nil || ttlResp.GrantedTTL != int64(ttl/time.Second) {
			t.Errorf("lease TTL %+v (%v), want granted %s", ttlResp, err, ttl)
		}

		runCtx, stop := context.WithCancel(ctx)
		stopped := make(chan struct{})
		go func() { reg.Run(runCtx); close(stopped) }()
		time.Sleep(2 * ttl) // the key must outlive its TTL only through the keepalives
		if ok, _, _ := present(t, cli, reg.Key()); !ok {
			t.Fatal("key expired although kept alive")
		}
		stop() // a crash: no deregistration
		<-stopped
		if ok, _, _ := present(t, cli, reg.Key()); !ok {
			t.Fatal("key gone right after the heartbeats stopped; want it listed until the TTL")
		}
		deadline := time.Now().Add(ttl + 10*time.Second)
		for ok, _, _ := present(t, cli, reg.Key()); ok; ok, _, _ = present(t, cli, reg.Key()) {
			if time.Now().After(deadline) {
				t.Fatal("key still listed long after its TTL")
			}
			time.Sleep(100 * time.Millisecond) // waiting for etcd's lease expiry
		}
	})

	t.Run("deregister deletes the key at once", func(t *testing.T) {
		reg := &SelfRegistration{Client: cli, Prefix: "/ttl/services/demo", Pod: "demo-b", Address: "10.0.0.2:8080", TTL: 15 * time.Second, KeepAlive: 5 * time.Second}
		if err := reg.Register(ctx); err != nil {
			t.Fatal(err)
		}
		if ok, _, _ := present(t, cli, "/ttl/services/demo/demo-b"); !ok {
			t.Fatal("not registered")
		}
		if err := reg.Deregister(ctx); err != nil {
			t.Fatal(err)
		}
		if ok, _, _ := present(t, cli, reg.Key()); ok {
			t.Error("key still present after Deregister")
		}
	})

	t.Run("a lost lease is registered again", func(t *testing.T) {
		reg := &SelfRegistration{Client: cli, Prefix: "/ttl/services/demo", Pod: "demo-c", Address: "10.0.0.3:8080", TTL: 15 * time.Second, KeepAlive: 100 * time.Millisecond}
		if err := reg.Register(ctx); err != nil {
			t.Fatal(err)
		}
		_, lease, _ := present(t, cli, reg.Key())
		if _, err := cli.Revoke(ctx, lease); err != nil { // as if it had expired
			t.Fatal(err)
		}
		runCtx, stop := context.WithCancel(ctx)
		defer stop()
		go reg.Run(runCtx)
		deadline := time.Now().Add(10 * time.Second)
		for {
			if ok, l, _ := present(t, cli, reg.Key()); ok && l != lease {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("not registered again with a new lease")
			}
			time.Sleep(50 * time.Millisecond)
		}
	})

	t.Run("a deregistered instance stays deregistered while its heartbeat loop still runs", func(t *testing.T) {
		// A graceful shutdown deregisters and then serves out its grace period; the
		// heartbeat loop must not take the revoked lease for a lost one and register again.
		reg := &SelfRegistration{Client: cli, Prefix: "/ttl/services/demo", Pod: "demo-d", Address: "10.0.0.4:8080", TTL: 15 * time.Second, KeepAlive: 100 * time.Millisecond}
		if err := reg.Register(ctx); err != nil {
			t.Fatal(err)
		}
		runCtx, stop := context.WithCancel(ctx)
		defer stop()
		go reg.Run(runCtx)
		if err := reg.Deregister(ctx); err != nil {
			t.Fatal(err)
		}
		for end := time.Now().Add(time.Second); time.Now().Before(end); {
			if ok, _, _ := present(t, cli, reg.Key()); ok {
				t.Fatal("registered again after Deregister")
			}
			time.Sleep(50 * time.Millisecond) // ten heartbeat intervals must pass without a registration
		}
	})
}
