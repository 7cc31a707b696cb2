// Command eureka-api serves registrar's store through Netflix Eureka's REST API (read-only),
// so Spring Cloud Netflix's Eureka client and other Eureka clients find the pods registrar
// registers without code changes. It is stateless: every replica lists and watches the
// store itself. docs/eureka.md describes what it serves and its flags.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/registrar-dev/registrar/internal/eureka"
	"github.com/registrar-dev/registrar/internal/store/etcd/etcdclient"
	"github.com/registrar-dev/registrar/pkg/discovery"
)

type options struct {
	storeEndpoints                  string
	storeCA, storeCert, storeKey    string
	prefix                          string
	listen, metricsListen           string
	tlsCert, tlsKey                 string
	maxInflight                     int
	maxURIBytes                     int
	deltaRetention                  time.Duration
	deltaMax                        int
	readHeaderTimeout, writeTimeout time.Duration
	idleTimeout, shutdownTimeout    time.Duration
}

func (o *options) bind(fs *flag.FlagSet) {
	fs.StringVar(&o.storeEndpoints, "store-endpoints", "", "Comma-separated etcd client URLs of the store the operator writes (required).")
	fs.StringVar(&o.storeCA, "store-ca-file", "", "CA bundle to verify the store's TLS certificate.")
	fs.StringVar(&o.storeCert, "store-cert-file", "", "Client certificate for the store (with --store-key-file).")
	fs.StringVar(&o.storeKey, "store-key-file", "", "Client key for the store.")
	fs.StringVar(&o.prefix, "prefix", discovery.DefaultPrefix, "Key prefix the operator writes under (its --store-prefix).")
	fs.StringVar(&o.listen, "listen", ":8761", "Address of the Eureka API (Eureka's port is 8761).")
	fs.StringVar(&o.metricsListen, "metrics-listen", ":8080", "Address of /metrics, /healthz and /readyz (plain HTTP); empty disables it.")
	fs.StringVar(&o.tlsCert, "tls-cert-file", "", "Serve the Eureka API over TLS with this certificate (with --tls-key-file).")
	fs.StringVar(&o.tlsKey, "tls-key-file", "", "Key of --tls-cert-file.")
	fs.IntVar(&o.maxInflight, "max-inflight", 256, "Requests answered at once; more are refused at once with 503 and Retry-After (never queued).")
	fs.IntVar(&o.maxURIBytes, "max-uri-bytes", 4096, "Longest request URI; longer is 414.")
	fs.DurationVar(&o.deltaRetention, "delta-retention", eureka.DefaultDeltaRetention, "How long a change stays in /eureka/apps/delta (Eureka's default 3m).")
	fs.IntVar(&o.deltaMax, "delta-max", eureka.DefaultDeltaMax, "Most changes kept in the delta window; the oldest go first (clients then fall back to a full fetch).")
	fs.DurationVar(&o.readHeaderTimeout, "read-header-timeout", 5*time.Second, "Time a client has to send its request headers.")
	fs.DurationVar(&o.writeTimeout, "write-timeout", 30*time.Second, "Time to read a request and write its response; a slower client is cut off.")
	fs.DurationVar(&o.idleTimeout, "idle-timeout", 2*time.Minute, "Keep-alive connections idle longer are closed.")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 10*time.Second, "Time to finish requests in flight on SIGTERM.")
}

func (o *options) validate() error {
	switch {
	case strings.TrimSpace(o.storeEndpoints) == "":
		return errors.New("--store-endpoints is required: the etcd the operator writes to (eureka-api has no embedded store)")
	case (o.tlsCert == "") != (o.tlsKey == ""):
		return errors.New("--tls-cert-file and --tls-key-file go together")
	case (o.storeCert == "") != (o.storeKey == ""):
		return errors.New("--store-cert-file and --store-key-file go together")
	case o.listen == "":
		return errors.New("--listen must not be empty")
	}
	return nil
}

func main() {
	var o options
	o.bind(flag.CommandLine)
	zopts := zap.Options{}
	zopts.BindFlags(flag.CommandLine)
	flag.Parse()
	log := zap.New(zap.UseFlagOptions(&zopts)).WithName("eureka-api")
	if err := o.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "eureka-api:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, log); err != nil {
		log.Error(err, "exiting")
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, log logr.Logger) error {
	cli, err := etcdclient.New(etcdclient.Config{Endpoints: strings.Split(o.storeEndpoints, ","),
		CAFile: o.storeCA, CertFile: o.storeCert, KeyFile: o.storeKey})
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	dc, err := discovery.New(discovery.Config{Client: cli, Prefix: o.prefix, AllServices: true,
		OnReconnect: func(r discovery.Reconnect) {
			log.Info("store watch reconnecting", "attempt", r.Attempt, "delay", r.Delay, "err", r.Err)
		}})
	if err != nil {
		return fmt.Errorf("watch of the store: %w", err)
	}
	defer func() { _ = dc.Close() }()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := eureka.NewMetrics(reg)
	follower := eureka.NewFollower(dc, eureka.NewRegistry(eureka.RegistryOptions{
		DeltaRetention: o.deltaRetention, DeltaMax: o.deltaMax}), log.WithName("registry"), metrics)
	api := &http.Server{
		Addr: o.listen,
		Handler: eureka.NewHandler(follower, eureka.HandlerOptions{MaxInflight: o.maxInflight, MaxURIBytes: o.maxURIBytes,
			Log: log.WithName("api"), Metrics: metrics}),
		ReadHeaderTimeout: o.readHeaderTimeout, ReadTimeout: o.writeTimeout, WriteTimeout: o.writeTimeout,
		IdleTimeout: o.idleTimeout, MaxHeaderBytes: 64 << 10,
	}
	if o.tlsCert != "" {
		api.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	servers := []*http.Server{api}
	if o.metricsListen != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Timeout: 10 * time.Second}))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
		mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
			if !follower.Ready() {
				http.Error(w, "the first listing of the store is not loaded yet", http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("ok\n"))
		})
		servers = append(servers, &http.Server{Addr: o.metricsListen, Handler: mux, ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute})
	}

	errc := make(chan error, len(servers)+1)
	go func() { errc <- follower.Run(ctx) }()
	for i, s := range servers {
		go func() {
			var err error
			if i == 0 && o.tlsCert != "" {
				err = s.ListenAndServeTLS(o.tlsCert, o.tlsKey)
			} else {
				err = s.ListenAndServe()
			}
			if !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("serve %s: %w", s.Addr, err)
			}
		}()
	}
	log.Info("serving", "listen", o.listen, "metricsListen", o.metricsListen, "tls", o.tlsCert != "",
		"prefix", o.prefix, "store", o.storeEndpoints)
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	for _, s := range servers {
		if err := s.Shutdown(sctx); err != nil {
			log.Error(err, "shutdown", "addr", s.Addr)
		}
	}
	return runErr
}
