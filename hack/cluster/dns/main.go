// Command dns is the cluster DNS of hack/cluster's single-node cluster: the records of the
// Kubernetes DNS specification that pods of a StatefulSet and clients of a headless Service
// need, answered from a watch of Services and EndpointSlices (what CoreDNS's kubernetes plugin
// does for these names):
//
//	<service>.<namespace>.svc.<domain>             A: a headless Service's ready endpoints, else its ClusterIP
//	<hostname>.<service>.<namespace>.svc.<domain>  A: the endpoint of that hostname (StatefulSet pods)
//	<reversed pod IP>.in-addr.arpa                 PTR: the hostname names above of an endpoint
//
// Anything else is NXDOMAIN: the cluster's pods have no route off the machine. The kubelet's
// clusterDNS points at it (the bridge's address), so pods, and host-network pods with
// dnsPolicy ClusterFirstWithHostNet, resolve these names. hack/cluster/up.sh builds and starts it.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

const ttl = 5 // seconds: short, so a recreated pod's new address is picked up quickly

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster")
	listen := flag.String("listen", "10.88.77.1:53", "address to serve DNS on (UDP and TCP)")
	domain := flag.String("domain", "cluster.local", "cluster domain")
	flag.Parse()
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatalf("dns: kubeconfig: %v", err)
	}
	cfg.Timeout = 30 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Fatalf("dns: client: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	f := informers.NewSharedInformerFactory(cs, 10*time.Minute)
	services := f.Core().V1().Services().Informer()
	slices := f.Discovery().V1().EndpointSlices().Informer()
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), services.HasSynced, slices.HasSynced) {
		log.Fatal("dns: caches did not sync")
	}
	z := &zone{domain: dns.Fqdn(*domain), services: services.GetStore(), slices: slices.GetStore()}
	var wg sync.WaitGroup
	servers := []*dns.Server{{Addr: *listen, Net: "udp", Handler: z}, {Addr: *listen, Net: "tcp", Handler: z}}
	for _, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.ListenAndServe(); err != nil {
				log.Printf("dns: %s %s: %v", s.Net, s.Addr, err)
				stop()
			}
		}()
	}
	log.Printf("dns: serving %s on %s", z.domain, *listen)
	<-ctx.Done()
	for _, s := range servers {
		_ = s.Shutdown()
	}
	wg.Wait()
}

type zone struct {
	domain   string
	services cache.Store
	slices   cache.Store
}

func (z *zone) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	if len(req.Question) == 1 {
		q := req.Question[0]
		exists, answers := z.lookup(strings.ToLower(q.Name), q.Qtype)
		m.Answer = answers
		if !exists {
			m.Rcode = dns.RcodeNameError
		}
	}
	_ = w.WriteMsg(m)
}

// lookup answers name for qtype: whether the name exists (NODATA rather than NXDOMAIN for
// a known name without records of that type) and the records.
func (z *zone) lookup(name string, qtype uint16) (bool, []dns.RR) {
	if strings.HasSuffix(name, ".in-addr.arpa.") {
		names := z.reverse(name)
		var rrs []dns.RR
		if qtype == dns.TypePTR {
			for _, n := range names {
				rrs = append(rrs, &dns.PTR{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: ttl}, Ptr: n})
			}
		}
		return len(names) > 0, rrs
	}
	suffix := ".svc." + z.domain
	if !strings.HasSuffix(name, suffix) {
		return false, nil
	}
	labels := strings.Split(strings.TrimSuffix(name, suffix), ".")
	var ips []string
	switch len(labels) {
	case 2: // service.namespace
		ips = z.serviceIPs(labels[1], labels[0])
	case 3: // hostname.service.namespace
		ips = z.hostIPs(labels[2], labels[1], labels[0])
	}
	if len(ips) == 0 {
		return false, nil
	}
	var rrs []dns.RR
	for _, ip := range ips {
		a := net.ParseIP(ip).To4()
		if qtype == dns.TypeA && a != nil {
			rrs = append(rrs, &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: a})
		}
	}
	return true, rrs
}

func (z *zone) service(ns, name string) *corev1.Service {
	obj, ok, err := z.services.GetByKey(ns + "/" + name)
	if err != nil || !ok {
		return nil
	}
	return obj.(*corev1.Service)
}

// endpoints calls fn for every ready endpoint of the Service's EndpointSlices (a Service with
// publishNotReadyAddresses has every endpoint marked ready).
func (z *zone) endpoints(fn func(ns, service string, ep discoveryv1.Endpoint)) {
	for _, obj := range z.slices.List() {
		s := obj.(*discoveryv1.EndpointSlice)
		svc := s.Labels[discoveryv1.LabelServiceName]
		if svc == "" || s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				fn(s.Namespace, svc, ep)
			}
		}
	}
}

func (z *zone) serviceIPs(ns, name string) []string {
	svc := z.service(ns, name)
	if svc == nil {
		return nil
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		if svc.Spec.ClusterIP == "" {
			return nil
		}
		return []string{svc.Spec.ClusterIP}
	}
	var ips []string
	z.endpoints(func(epNS, epSvc string, ep discoveryv1.Endpoint) {
		if epNS == ns && epSvc == name {
			ips = append(ips, ep.Addresses...)
		}
	})
	return ips
}

func (z *zone) hostIPs(ns, service, host string) []string {
	if svc := z.service(ns, service); svc == nil || svc.Spec.ClusterIP != corev1.ClusterIPNone {
		return nil
	}
	var ips []string
	z.endpoints(func(epNS, epSvc string, ep discoveryv1.Endpoint) {
		if epNS == ns && epSvc == service && ep.Hostname != nil && *ep.Hostname == host {
			ips = append(ips, ep.Addresses...)
		}
	})
	return ips
}

// reverse gives the hostname names of the endpoint whose address name reverses.
func (z *zone) reverse(name string) []string {
	parts := strings.Split(strings.TrimSuffix(name, ".in-addr.arpa."), ".")
	if len(parts) != 4 {
		return nil
	}
	ip := fmt.Sprintf("%s.%s.%s.%s", parts[3], parts[2], parts[1], parts[0])
	var names []string
	z.endpoints(func(ns, svc string, ep discoveryv1.Endpoint) {
		if ep.Hostname == nil {
			return
		}
		for _, a := range ep.Addresses {
			if a == ip {
				names = append(names, fmt.Sprintf("%s.%s.%s.svc.%s", *ep.Hostname, svc, ns, z.domain))
			}
		}
	})
	return names
}
