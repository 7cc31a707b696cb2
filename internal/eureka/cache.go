package eureka

import (
	"bytes"
	"compress/gzip"
	"strings"
	"sync"
)

// Response kinds: the endpoints whose bodies a View caches.
const (
	KindApps     = "apps"
	KindDelta    = "delta"
	KindApp      = "app"
	KindInstance = "instance"
	// KindAppInstance's arg is "{APP}/{ID}".
	KindAppInstance = "appinstance"
	KindVIP         = "vip"
)

type cacheKey struct {
	kind, arg string
	format    Format
}

// encoded is one response body, plain and (on first demand) gzipped.
type encoded struct {
	plain  []byte
	gzOnce sync.Once
	gz     []byte
}

// Gzip is the body gzipped, computed once.
func (e *encoded) Gzip() []byte {
	e.gzOnce.Do(func() {
		var b bytes.Buffer
		w, _ := gzip.NewWriterLevel(&b, gzip.DefaultCompression) // the level is valid
		_, _ = w.Write(e.plain)                                  // a bytes.Buffer never fails
		_ = w.Close()
		e.gz = b.Bytes()
	})
	return e.gz
}

// responseCache holds a View's encoded bodies: each at most once per format. Its keys are
// the view's own applications, instances and VIPs (a miss for an unknown name is never
// stored), so its size is bounded by the registry's.
type responseCache struct {
	mu sync.Mutex
	m  map[cacheKey]*encoded
}

// get returns the cached body of key, encoding it with enc on a miss; hit says which.
func (c *responseCache) get(key cacheKey, enc func() []byte) (e *encoded, hit bool) {
	c.mu.Lock()
	if e, ok := c.m[key]; ok {
		c.mu.Unlock()
		return e, true
	}
	c.mu.Unlock()
	// Encode outside the lock: concurrent misses of one key may both encode (same bytes),
	// but never wait for each other's unrelated keys.
	e = &encoded{plain: enc()}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[cacheKey]*encoded{}
	}
	if prev, ok := c.m[key]; ok {
		return prev, true
	}
	c.m[key] = e
	return e, false
}

// Body is the encoded body of one of the view's responses: (nil, false, false) when it
// names nothing the view has. hit says whether it came from the cache.
func (v *View) Body(kind, arg string, f Format) (body *encoded, hit, found bool) {
	var enc func() []byte
	switch kind {
	case KindApps:
		enc = func() []byte { return EncodeApplications(f, v.Version, v.HashCode, v.Apps) }
	case KindDelta:
		enc = func() []byte { return EncodeApplications(f, v.Version, v.HashCode, v.Delta) }
	case KindApp:
		app, ok := v.App(arg)
		if !ok {
			return nil, false, false
		}
		arg, enc = app.Name, func() []byte { return EncodeApplication(f, app) }
	case KindInstance:
		inst, ok := v.Instance(arg)
		if !ok {
			return nil, false, false
		}
		enc = func() []byte { return EncodeInstance(f, inst) }
	case KindAppInstance:
		app, id, _ := strings.Cut(arg, "/")
		inst, ok := v.AppInstance(app, id)
		if !ok {
			return nil, false, false
		}
		arg, enc = inst.App+"/"+inst.ID, func() []byte { return EncodeInstance(f, inst) }
	case KindVIP:
		apps, ok := v.VIP(arg)
		if !ok {
			return nil, false, false
		}
		enc = func() []byte { return EncodeApplications(f, v.Version, HashCode(statusCounts(apps)), apps) }
		arg = strings.ToLower(arg)
	default:
		return nil, false, false
	}
	e, hit := v.cache.get(cacheKey{kind, arg, f}, enc)
	return e, hit, true
}
