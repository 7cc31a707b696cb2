package controller

import (
	"time"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// dnsTTL is the registry's spec.dns.ttlSeconds; zero (the store's default) when unset.
func dnsTTL(reg *v1beta1.ServiceRegistry) time.Duration {
	if reg.Spec.DNS == nil || reg.Spec.DNS.TTLSeconds == 0 {
		return 0
	}
	return time.Duration(reg.Spec.DNS.TTLSeconds) * time.Second
}
