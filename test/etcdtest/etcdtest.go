// Package etcdtest forwards to test/support/etcdtest for test/e2e, which another branch owns
// this session. Use test/support/etcdtest; this package goes once test/e2e imports that.
package etcdtest

import "github.com/registrar-dev/registrar/test/support/etcdtest"

// Server is etcdtest.Server.
type Server = etcdtest.Server

// Binary, Start and StartOn are those of test/support/etcdtest.
var (
	Binary  = etcdtest.Binary
	Start   = etcdtest.Start
	StartOn = etcdtest.StartOn
)
