package eureka

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
)

// Source is what the handler serves: the current view, and whether the first listing of the
// store is loaded.
type Source interface {
	View() *View
	Ready() bool
}

// HandlerOptions bounds what a request may cost.
type HandlerOptions struct {
	// MaxInflight bounds the requests answered at once (default 256); the next is refused
	// at once with 503 and Retry-After, never queued.
	MaxInflight int
	// MaxURIBytes bounds the request URI (default 4096): longer is 414.
	MaxURIBytes int
	// MaxBodyBytes bounds a request body (default 64 KiB): larger is 413. No endpoint reads
	// a body; the bound only refuses uploads early.
	MaxBodyBytes int64
	Log          logr.Logger
	Metrics      *Metrics // required
}

func (o HandlerOptions) withDefaults() HandlerOptions {
	if o.MaxInflight <= 0 {
		o.MaxInflight = 256
	}
	if o.MaxURIBytes <= 0 {
		o.MaxURIBytes = 4096
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 64 << 10
	}
	return o
}

// refusal is the body of every write (register, renew, cancel, status and metadata
// overrides): registrar registers pods from Kubernetes.
const refusal = "registrar's Eureka API is read-only: registrar registers pods from Kubernetes " +
	"(ServiceRegistry or the registrar.dev/service annotation) and removes them when they stop being ready, " +
	"so there is nothing to register, renew or cancel here. Set eureka.client.register-with-eureka=false. " +
	"Instances outside Kubernetes (VMs) are added by writing their records to the store under the prefix " +
	"(docs/eureka.md, \"Registration\"), or by keeping them in your existing Eureka server during a migration.\n"

// Path segments and the metrics label of refused requests.
const (
	segApps          = "apps"
	endpointRejected = "rejected"
)

// route is a parsed request path.
type route struct {
	endpoint string // metrics label
	kind     string // cache kind; "" for writes and unknown paths
	arg      string
	write    bool // a Eureka write endpoint: refused
}

// parseRoute maps a path under /eureka/ (or Netflix's /eureka/v2/) to a route. ok is false
// for a path that is no Eureka endpoint.
func parseRoute(method, path string) (r route, ok bool) {
	rest, found := strings.CutPrefix(path, "/eureka/")
	if !found {
		return route{}, false
	}
	rest = strings.TrimPrefix(rest, "v2/")
	seg := strings.Split(strings.Trim(rest, "/"), "/")
	for _, s := range seg {
		if s == "" {
			return route{}, false
		}
	}
	get := method == http.MethodGet || method == http.MethodHead
	switch {
	case len(seg) == 1 && seg[0] == segApps:
		return route{endpoint: segApps, kind: KindApps, write: !get}, true
	case len(seg) == 2 && seg[0] == segApps && seg[1] == "delta":
		return route{endpoint: "apps_delta", kind: KindDelta, write: !get}, true
	case len(seg) == 2 && seg[0] == segApps:
		return route{endpoint: "app", kind: KindApp, arg: seg[1], write: !get}, true // POST registers
	case len(seg) == 3 && seg[0] == segApps:
		return route{endpoint: "app_instance", kind: KindAppInstance, arg: seg[1] + "/" + seg[2], write: !get}, true // PUT renews, DELETE cancels
	case len(seg) == 4 && seg[0] == segApps && (seg[3] == "status" || seg[3] == "metadata"):
		return route{endpoint: "app_instance_" + seg[3], write: true}, true // overrides: writes only
	case len(seg) == 2 && seg[0] == "instances":
		return route{endpoint: "instance", kind: KindInstance, arg: seg[1], write: !get}, true
	case len(seg) == 2 && (seg[0] == "vips" || seg[0] == "svips"):
		return route{endpoint: seg[0], kind: KindVIP, arg: seg[1], write: !get}, true
	}
	return route{}, false
}

// Handler serves Eureka's REST API from src.
type Handler struct {
	src  Source
	opts HandlerOptions
	sem  chan struct{}
}

// NewHandler is the API handler.
func NewHandler(src Source, opts HandlerOptions) *Handler {
	opts = opts.withDefaults()
	return &Handler{src: src, opts: opts, sem: make(chan struct{}, opts.MaxInflight)}
}

// statusWriter records the status code for the metrics.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (h *Handler) ServeHTTP(rw http.ResponseWriter, req *http.Request) {
	start := time.Now()
	w := &statusWriter{ResponseWriter: rw}
	endpoint := "unknown"
	defer func() {
		code := w.code
		if code == 0 {
			code = http.StatusOK
		}
		h.opts.Metrics.Requests.WithLabelValues(endpoint, strconv.Itoa(code)).Inc()
		h.opts.Metrics.Duration.WithLabelValues(endpoint).Observe(time.Since(start).Seconds())
	}()
	if len(req.RequestURI) > h.opts.MaxURIBytes {
		endpoint = endpointRejected
		h.opts.Metrics.Rejected.WithLabelValues("uri_too_long").Inc()
		plain(w, http.StatusRequestURITooLong, fmt.Sprintf("request URI longer than %d bytes\n", h.opts.MaxURIBytes))
		return
	}
	if req.ContentLength > h.opts.MaxBodyBytes {
		endpoint = endpointRejected
		h.opts.Metrics.Rejected.WithLabelValues("body_too_large").Inc()
		w.Header().Set("Connection", "close") // do not read the body to reuse the connection
		plain(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes; this API reads no body\n", h.opts.MaxBodyBytes))
		return
	}
	select {
	case h.sem <- struct{}{}:
		defer func() { <-h.sem }()
	default:
		endpoint = endpointRejected
		h.opts.Metrics.Rejected.WithLabelValues("inflight").Inc()
		w.Header().Set("Retry-After", "1")
		plain(w, http.StatusServiceUnavailable, "too many requests in flight; retry\n")
		return
	}
	h.opts.Metrics.Inflight.Inc()
	defer h.opts.Metrics.Inflight.Dec()

	r, ok := parseRoute(req.Method, req.URL.Path)
	if !ok {
		plain(w, http.StatusNotFound, "no such Eureka endpoint: "+req.URL.Path+"\n")
		return
	}
	endpoint = r.endpoint
	if r.write {
		h.opts.Metrics.Rejected.WithLabelValues("write_refused").Inc()
		h.opts.Log.V(1).Info("write refused", "method", req.Method, "path", req.URL.Path, "remote", req.RemoteAddr)
		w.Header().Set("Allow", "GET, HEAD")
		plain(w, http.StatusMethodNotAllowed, refusal)
		return
	}
	format, err := Negotiate(req.Header.Get("Accept"))
	if err != nil {
		plain(w, http.StatusNotAcceptable, err.Error()+"\n")
		return
	}
	if !h.src.Ready() {
		w.Header().Set("Retry-After", "1")
		plain(w, http.StatusServiceUnavailable, "the registry is not loaded yet\n")
		return
	}
	view := h.src.View()
	body, hit, found := view.Body(r.kind, r.arg, format)
	if !found {
		plain(w, http.StatusNotFound, fmt.Sprintf("%s %q not found\n", r.endpoint, r.arg))
		return
	}
	if hit {
		h.opts.Metrics.Cache.WithLabelValues("hit").Inc()
	} else {
		h.opts.Metrics.Cache.WithLabelValues("miss").Inc()
	}
	switch r.kind {
	case KindApps:
		h.opts.Metrics.Fetches.WithLabelValues("full").Inc()
	case KindDelta:
		h.opts.Metrics.Fetches.WithLabelValues("delta").Inc()
	}
	hdr := w.Header()
	hdr.Set("Content-Type", format.ContentType())
	hdr.Set("Vary", "Accept, Accept-Encoding")
	hdr.Set("X-Registrar-Version", strconv.FormatInt(view.Version, 10))
	data := body.plain
	if acceptsGzip(req.Header.Get("Accept-Encoding")) {
		data = body.Gzip()
		hdr.Set("Content-Encoding", "gzip")
	}
	hdr.Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	if req.Method != http.MethodHead {
		_, _ = w.Write(data) // a client gone away is the client's business; the write timeout bounds a slow one
	}
}

// acceptsGzip reports whether an Accept-Encoding header allows gzip (q above 0).
func acceptsGzip(ae string) bool {
	for _, r := range strings.Split(ae, ",") {
		params := strings.Split(r, ";")
		if !strings.EqualFold(strings.TrimSpace(params[0]), "gzip") {
			continue
		}
		for _, p := range params[1:] {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			if strings.EqualFold(k, "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && f == 0 {
					return false
				}
			}
		}
		return true
	}
	return false
}

func plain(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(msg))
}
