// Command coredns is a CoreDNS build with only the plugins registrar's tests need: the etcd
// plugin (SkyDNS records, the layout internal/store/coredns writes), plus bind, errors and log.
// It lives in its own module so that CoreDNS's dependencies stay out of registrar's go.mod;
// hack/coredns.sh builds it into bin/.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	// The plugins of this build; each registers itself with the server.
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/etcd"
	_ "github.com/coredns/coredns/plugin/log"
)

// directives is the plugin chain order (CoreDNS's plugin.cfg order for these plugins).
var directives = []string{"bind", "errors", "log", "etcd"}

func init() { dnsserver.Directives = directives }

func main() { coremain.Run() }
