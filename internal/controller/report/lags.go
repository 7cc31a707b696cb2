package report

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// lagWindows keeps, per ServiceRegistry, the last deregistration lags measured for it: one
// registry's deregistrations never change another's drain advice.
type lagWindows struct {
	mu      sync.Mutex
	windows map[types.UID]*lagWindow
}

// lagWindow is one registry's last lagWindowSize lags.
type lagWindow struct {
	lags []time.Duration
	next int
}

const lagWindowSize = 128

func (w *lagWindows) add(registry types.UID, d time.Duration) {
	if d < 0 {
		d = 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.windows == nil {
		w.windows = map[types.UID]*lagWindow{}
	}
	win := w.windows[registry]
	if win == nil {
		win = &lagWindow{}
		w.windows[registry] = win
	}
	if len(win.lags) < lagWindowSize {
		win.lags = append(win.lags, d)
		return
	}
	win.lags[win.next] = d
	win.next = (win.next + 1) % lagWindowSize
}

// max is the slowest lag in the registry's window.
func (w *lagWindows) max(registry types.UID) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var m time.Duration
	if win := w.windows[registry]; win != nil {
		for _, d := range win.lags {
			m = max(m, d)
		}
	}
	return m
}

func (w *lagWindows) forget(registry types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.windows, registry)
}
