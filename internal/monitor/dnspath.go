package monitor

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// DNS names of the canary under the CoreDNS store's zone: <writer>._canary._registrar.<zone>
// (DNSWriterLabel). Labels
// with an underscore are never a Kubernetes namespace or a ServiceRegistry's service name
// (DNS-1123 labels), so the canary is never part of a service's answer
// (<service>.<namespace>.<zone>).
const (
	DNSCanaryNamespace = "_registrar"
	DNSCanaryService   = "_canary"
)

// DNSPath is the canary path of the CoreDNS store: it writes a SkyDNS record for
// <writer>._canary._registrar.<zone> (DNSWriterLabel: a name of this cluster's replica's own,
// which no other replica's canary writes or deletes) where CoreDNS's etcd plugin reads it, with an address that
// changes every round (TEST-NET-1, 192.0.2.1-254), and asks CoreDNS for it over UDP, as a
// caller's resolver does, until the answer carries that round's address. The record has no
// "registrar" member, so the CoreDNS store never treats it as an endpoint it owns.
type DNSPath struct {
	kv     clientv3.KV
	key    string
	name   string
	server string
	// Poll is the pause between DNS queries while waiting (50ms when zero); each query
	// times out after QueryTimeout (1s when zero) or the round's deadline.
	Poll, QueryTimeout time.Duration
}

// NewDNSPath returns the DNS canary path of the writer (cluster and replica): records under
// CoreDNS's etcd path pathPrefix for zone, queried at server (host:port).
func NewDNSPath(kv clientv3.KV, pathPrefix, zone, server, cluster, replica string) *DNSPath {
	zone = strings.ToLower(strings.Trim(zone, "."))
	labels := strings.Split(zone, ".")
	slices.Reverse(labels)
	w := DNSWriterLabel(cluster, replica)
	key := path.Join(append(append([]string{"/" + strings.Trim(pathPrefix, "/")}, labels...), DNSCanaryNamespace, DNSCanaryService, w)...)
	return &DNSPath{kv: kv, key: key, name: w + "." + DNSCanaryService + "." + DNSCanaryNamespace + "." + zone + ".", server: server}
}

// DNSWriterLabel is the DNS label of a writer's canary: its replica name reduced to
// lower-case letters, digits and '-' (at most 40), then '-' and 8 hex digits of a hash of
// cluster and replica, so that two writers never share it.
func DNSWriterLabel(cluster, replica string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(replica) {
		if b.Len() >= 40 {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(cluster + "\x00" + replica))
	return strings.Trim(b.String(), "-") + fmt.Sprintf("-%08x", h.Sum32())
}

// Key is the record's etcd key; Name its DNS name.
func (p *DNSPath) Key() string  { return p.key }
func (p *DNSPath) Name() string { return p.name }

// dnsRecord is a SkyDNS record as CoreDNS's etcd plugin reads it.
type dnsRecord struct {
	Host string `json:"host"`
	TTL  uint32 `json:"ttl"`
}

// Write puts the record with round seq's address.
func (p *DNSPath) Write(ctx context.Context, seq int64) (any, error) {
	addr := fmt.Sprintf("192.0.2.%d", seq%254+1)
	b, err := json.Marshal(dnsRecord{Host: addr, TTL: 1})
	if err != nil {
		return nil, err
	}
	if _, err := p.kv.Put(ctx, p.key, string(b)); err != nil {
		return nil, err
	}
	return addr, nil
}

// Visible queries CoreDNS until an A answer for the canary's name carries the address.
func (p *DNSPath) Visible(ctx context.Context, token any) error {
	want, _ := token.(string)
	poll, qt := p.Poll, p.QueryTimeout
	if poll <= 0 {
		poll = 50 * time.Millisecond
	}
	if qt <= 0 {
		qt = time.Second
	}
	var last error
	for {
		got, err := p.query(ctx, qt)
		if err == nil && slices.Contains(got, want) {
			return nil
		}
		if err != nil {
			last = err
		} else {
			last = fmt.Errorf("CoreDNS at %s answers %s with %v, want %s", p.server, p.name, got, want)
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-t.C:
		}
	}
}

func (p *DNSPath) query(ctx context.Context, timeout time.Duration) ([]string, error) {
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	if timeout <= 0 {
		return nil, context.DeadlineExceeded
	}
	m := new(dns.Msg)
	m.SetQuestion(p.name, dns.TypeA)
	c := &dns.Client{Net: "udp", Timeout: timeout}
	r, _, err := c.ExchangeContext(ctx, m, p.server)
	if err != nil {
		return nil, fmt.Errorf("query %s at %s: %w", p.name, p.server, err)
	}
	if r.Rcode != dns.RcodeSuccess {
		return nil, fmt.Errorf("query %s at %s: %s", p.name, p.server, dns.RcodeToString[r.Rcode])
	}
	var out []string
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			out = append(out, a.A.String())
		}
	}
	return out, nil
}

// Cleanup deletes the record.
func (p *DNSPath) Cleanup(ctx context.Context) error {
	_, err := p.kv.Delete(ctx, p.key)
	return err
}
