// Command demoapp is the demo service of the end-to-end tests: a static HTTP server whose
// pods registrar registers. It counts warm-up hits, exposes a readiness endpoint, and records
// SIGTERM so that a test can count requests that reached a pod after it began terminating.
//
//	/         work: 200 {"pod","hostname","served_at"} after --work-delay
//	/warmup   200; counted in /stats warmup_hits
//	/ready    200 once --ready-after has passed; 503 after SIGTERM with --fail-ready-on-sigterm
//	/healthz  200
//	/stats    {"warmup_hits","requests","started_at","sigterm_at","after_sigterm_requests"}
//	POST /fault/hang?for=15s    every request (probes too) waits until the hang ends
//	POST /fault/oom?restarts=2  crash now (allocate past the memory limit), and again after
//	                            each of the next 2 restarts (--crash-state-file)
//
// Every response carries X-Pod and X-After-Sigterm: true|false. With --self-register-etcd
// it also registers itself in etcd under a lease kept alive by hand (the TTL heartbeat
// baseline), and leaves the key to expire on SIGTERM unless
// --self-register-deregister-on-sigterm.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		log.Printf("demoapp: %v", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	logger := log.New(os.Stderr, "", log.LstdFlags|log.Lmicroseconds|log.LUTC)
	hostname, _ := os.Hostname()
	cfg := Config{Hostname: hostname, Pod: os.Getenv("POD_NAME"), Log: logger}
	if cfg.Pod == "" {
		cfg.Pod = hostname
	}
	fs := flag.NewFlagSet("demoapp", flag.ContinueOnError)
	listen := fs.String("listen", ":8080", "address to serve HTTP on")
	fs.DurationVar(&cfg.WorkDelay, "work-delay", 0, "time / works before answering")
	fs.DurationVar(&cfg.ReadyAfter, "ready-after", 0, "/ready answers 503 until this long after start")
	fs.BoolVar(&cfg.FailReadyOnSigterm, "fail-ready-on-sigterm", false, "/ready answers 503 after SIGTERM")
	fs.DurationVar(&cfg.ShutdownGrace, "shutdown-grace", 0, "keep accepting requests this long after SIGTERM (0: stop accepting at once)")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", 10*time.Second, "bound on waiting for in-flight requests at shutdown")
	fs.StringVar(&cfg.CrashStateFile, "crash-state-file", "", "file (on a volume that outlives the container) counting the crashes to come; enables POST /fault/oom")
	fs.Int64Var(&cfg.OOMAfterRequests, "oom-after-requests", 50, "in a crash loop, crash again after serving this many work requests")
	etcd := fs.String("self-register-etcd", "", "comma-separated etcd endpoints; enables self-registration")
	prefix := fs.String("self-register-prefix", "/ttl/services/demo", "key prefix of the self-registration")
	ttl := fs.Duration("self-register-ttl", 15*time.Second, "lease TTL of the self-registration")
	keepalive := fs.Duration("self-register-keepalive", 5*time.Second, "lease refresh interval")
	address := fs.String("self-register-address", "", "IP:PORT to register (default $POD_IP and the --listen port)")
	deregister := fs.Bool("self-register-deregister-on-sigterm", false, "revoke the registration on SIGTERM")
	if err := fs.Parse(args); err != nil {
		return err
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if *etcd != "" {
		reg, err := selfRegister(ctx, *etcd, *prefix, cfg.Pod, *address, *listen, *ttl, *keepalive, logger)
		if err != nil {
			_ = ln.Close()
			return err
		}
		defer reg.Client.Close()
		go reg.Run(ctx) // heartbeats go on through the shutdown grace, as a real client's would
		if *deregister {
			cfg.OnSigterm = func() {
				dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer dcancel()
				if err := reg.Deregister(dctx); err != nil {
					logger.Printf("deregister: %v", err)
				}
			}
		}
	}

	app := New(cfg)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		logger.Printf("got %v", <-sigs)
		app.Sigterm()
	}()
	logger.Printf("pod %s serving on %s", cfg.Pod, ln.Addr())
	return app.Serve(ln)
}

// selfRegister connects to etcd and registers the pod once.
func selfRegister(ctx context.Context, endpoints, prefix, pod, address, listen string,
	ttl, keepalive time.Duration, logger *log.Logger) (*SelfRegistration, error) {
	if address == "" {
		_, port, err := net.SplitHostPort(listen)
		if err != nil || os.Getenv("POD_IP") == "" {
			return nil, fmt.Errorf("--self-register-address is empty and $POD_IP with --listen %q gives none", listen)
		}
		address = net.JoinHostPort(os.Getenv("POD_IP"), port)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(endpoints, ","),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	reg := &SelfRegistration{Client: cli, Prefix: prefix, Pod: pod, Address: address, TTL: ttl, KeepAlive: keepalive, Log: logger}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := reg.Register(rctx); err != nil {
		_ = cli.Close()
		return nil, err
	}
	return reg, nil
}
