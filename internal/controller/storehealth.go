package controller

import (
	"github.com/registrar-dev/registrar/internal/monitor"
)

// StoreHealthSource gives the self-monitoring verdict on the named stores (all monitored
// stores when names is empty): a monitor.Set in production.
type StoreHealthSource interface {
	Verdict(names []string) monitor.Verdict
}
