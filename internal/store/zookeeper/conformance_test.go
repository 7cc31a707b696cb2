package zookeeper_test

import (
	"testing"

	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/store/storetest"
	"github.com/registrar-dev/registrar/internal/store/zookeeper"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return newFixture(t, nil, zookeeper.Options{}).store })
}
