package etcd_test

import (
	"testing"

	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/store/etcd"
	"github.com/registrar-dev/registrar/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return newFixture(t, etcd.Options{}).store })
}
