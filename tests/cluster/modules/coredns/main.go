// CoreDNS with only the plugins the cluster's DNS uses (cluster.sh up with
// EAI_CLUSTER_SERVICES=1, for the Helm chart: docs/helm.md "Real cluster"):
// the same entry point as CoreDNS's own binary, without the cloud plugins.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
)

func init() {
	dnsserver.Directives = []string{"bind", "errors", "log", "cache", "kubernetes"}
}

func main() {
	coremain.Run()
}
