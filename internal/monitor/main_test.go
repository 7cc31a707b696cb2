package monitor_test

import (
	"os"
	"testing"

	"github.com/registrar-dev/registrar/test/support/etcdtest"
)

func TestMain(m *testing.M) { os.Exit(etcdtest.Main(m, nil)) }
