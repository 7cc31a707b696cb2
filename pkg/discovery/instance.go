package discovery

import (
	"encoding/json"
	"fmt"
	"net"
	"path"
	"strconv"
	"strings"
	"time"
)

// DefaultPrefix is the key prefix the registrar operator writes under unless its
// --store-prefix says otherwise.
const DefaultPrefix = "/registrar/services"

// Instance is one live instance of a service: the JSON value of a store key, plus the key.
type Instance struct {
	Service      string           `json:"service"`
	Namespace    string           `json:"namespace"`
	Pod          string           `json:"pod"`
	UID          string           `json:"uid,omitempty"`
	Address      string           `json:"address"`
	Ports        map[string]int32 `json:"ports"`
	Node         string           `json:"node,omitempty"`
	Zone         string           `json:"zone,omitempty"`
	Cluster      string           `json:"cluster,omitempty"`
	Owner        string           `json:"owner,omitempty"`
	RegisteredAt time.Time        `json:"registeredAt,omitzero"`

	// Key is the instance's store key, {prefix}/{service}/{namespace}/{pod}.
	Key string `json:"key"`
	// Revision is the store revision that last wrote the key.
	Revision int64 `json:"revision"`
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
	return path.Join(normalizePrefix(prefix), service) + "/"
}

func normalizePrefix(prefix string) string {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return "/" + strings.Trim(prefix, "/")
}

// DecodeInstance decodes a store key and value into an Instance. The key's namespace and pod
// fill the fields the value leaves empty; a value without an address is an error, as a
// caller could not use it.
func DecodeInstance(key string, value []byte, revision int64) (Instance, error) {
	var inst Instance
	if err := json.Unmarshal(value, &inst); err != nil {
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
