package discovery

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/registrar-dev/registrar/pkg/wire"
)

// DefaultPrefix is the key prefix the registrar operator writes under unless its
// --store-prefix says otherwise.
const DefaultPrefix = wire.DefaultPrefix

// Instance is one live instance of a service: the JSON value of a store key (the wire
// format of pkg/wire, which the operator's store writes), plus the key.
type Instance struct {
	wire.Endpoint

	// Key is the instance's store key, {prefix}/{service}/{namespace}/{pod}.
	Key string `json:"key"`
	// Revision is the store revision that last wrote the key.
	Revision int64 `json:"revision"`
}

// optionalFields are the fields of the wire value that an Instance's own JSON (registrarctl
// -o json|yaml) leaves out when empty; the store's value always has them.
var optionalFields = map[string]bool{"uid": true, "node": true, "zone": true, "cluster": true, "owner": true, "registeredAt": true}

// MarshalJSON writes the wire value's fields in their order, without the optional ones
// that are empty, then key and revision.
func (i Instance) MarshalJSON() ([]byte, error) {
	value, err := wire.Encode(&i.Endpoint)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(value))
	if _, err := dec.Token(); err != nil { // {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for dec.More() {
		name, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if n, _ := name.(string); optionalFields[n] && (string(v) == `""` || string(v) == `"0001-01-01T00:00:00Z"`) {
			continue
		}
		k, _ := json.Marshal(name)
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
		b.WriteByte(',')
	}
	k, _ := json.Marshal(i.Key)
	fmt.Fprintf(&b, `"key":%s,"revision":%d}`, k, i.Revision)
	return b.Bytes(), nil
}

// ID names the instance within its service: "namespace/pod".
func (i Instance) ID() string { return i.Namespace + "/" + i.Pod }

// HostPort is the instance's "address:port" for the named port. With an empty name it uses
// the only port, or the port named "http" when there are several; ok is false when no
// port fits.
func (i Instance) HostPort(name string) (hostPort string, ok bool) {
	port, ok := i.Ports[name]
	if name == "" {
		port, ok = i.Ports["http"]
		if len(i.Ports) == 1 {
			for _, p := range i.Ports {
				port, ok = p, true
			}
		}
	}
	if !ok || i.Address == "" {
		return "", false
	}
	return net.JoinHostPort(i.Address, strconv.Itoa(int(port))), true
}

// ServicePrefix is the key prefix that holds every instance of service: "{prefix}/{service}/".
// An empty prefix means DefaultPrefix.
func ServicePrefix(prefix, service string) string {
	return wire.ServicePrefix(prefix, service)
}

// ScopePrefix is the key prefix that holds the instances of service registered from one
// namespace: "{prefix}/{service}/{namespace}/". An empty prefix means DefaultPrefix.
func ScopePrefix(prefix, service, namespace string) string {
	return wire.ScopePrefix(prefix, service, namespace)
}

// watchPrefix is what a Client lists and watches: the service's prefix, or its namespace's
// when Config.Namespace scopes it.
func watchPrefix(cfg Config) string {
	if cfg.AllServices {
		return wire.ServicePrefix(cfg.Prefix, "")
	}
	if cfg.Namespace != "" {
		return ScopePrefix(cfg.Prefix, cfg.Service, cfg.Namespace)
	}
	return ServicePrefix(cfg.Prefix, cfg.Service)
}

// isInstanceKey reports whether key, under the watched prefix of an AllServices client, is
// an instance key {prefix}/{service}/{namespace}/{pod}: not in the reserved subtree, exactly
// three non-empty segments below the prefix.
func isInstanceKey(prefix, key string) bool {
	rest, ok := strings.CutPrefix(key, wire.ServicePrefix(prefix, ""))
	if !ok || wire.IsReserved(prefix, key) {
		return false
	}
	parts := strings.Split(rest, "/")
	return len(parts) == 3 && parts[0] != "" && parts[1] != "" && parts[2] != "" && !strings.HasPrefix(parts[0], ".")
}

// DecodeInstance decodes a store key and value into an Instance. The key's namespace and pod
// fill the fields the value leaves empty; a value without an address is an error, as a
// caller could not use it.
func DecodeInstance(key string, value []byte, revision int64) (Instance, error) {
	var inst Instance
	if err := json.Unmarshal(value, &inst.Endpoint); err != nil {
		return Instance{}, fmt.Errorf("decode %s: %w", key, err)
	}
	if inst.Address == "" {
		return Instance{}, fmt.Errorf("decode %s: no address", key)
	}
	inst.Key, inst.Revision = key, revision
	parts := strings.Split(strings.Trim(key, "/"), "/")
	if n := len(parts); n >= 3 {
		inst.Service = orDefault(inst.Service, parts[n-3])
		inst.Namespace = orDefault(inst.Namespace, parts[n-2])
		inst.Pod = orDefault(inst.Pod, parts[n-1])
	}
	return inst, nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
