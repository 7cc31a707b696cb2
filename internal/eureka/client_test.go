package eureka

import (
	"slices"
	"testing"

	"github.com/registrar-dev/registrar/pkg/discovery"
)

// javaClient is the local registry of Eureka's Java client as DiscoveryClient.updateDelta
// (eureka-client 2.0.6) changes it, step for step, so that the order of a delta's instances
// can be checked against it here; test/interop runs the real client.
//
// Its quirk: when an ADDED or MODIFIED instance arrives for an application the local registry
// does not have (all of its instances were deleted, which removed it), the client adds the
// delta's Application object itself, with every instance the delta lists for it, DELETED
// ones too; the DELETED instances it already went past stay in its registry.
type javaClient struct {
	apps map[string][]*Instance // application → instances, in the order they were added
}

func newJavaClient(full *View) *javaClient {
	c := &javaClient{apps: map[string][]*Instance{}}
	for _, app := range full.Apps {
		c.apps[app.Name] = slices.Clone(app.Instances)
	}
	return c
}

func (c *javaClient) put(app string, inst *Instance) {
	list := c.apps[app]
	if i := slices.IndexFunc(list, func(x *Instance) bool { return x.ID == inst.ID }); i >= 0 {
		list[i] = inst
		return
	}
	c.apps[app] = append(list, inst)
}

// applyDelta is updateDelta: every instance of every application of the delta, in order.
func (c *javaClient) applyDelta(delta *View) {
	for _, app := range delta.Delta {
		for _, inst := range slices.Clone(app.Instances) { // Application.getInstances is a copy
			switch inst.Action {
			case Added, Modified:
				if _, ok := c.apps[app.Name]; !ok {
					c.apps[app.Name] = slices.Clone(app.Instances) // addApplication(the delta's app)
				}
				c.put(app.Name, inst)
			case Deleted:
				list, ok := c.apps[app.Name]
				if !ok {
					continue
				}
				list = slices.DeleteFunc(list, func(x *Instance) bool { return x.ID == inst.ID })
				if len(list) == 0 {
					delete(c.apps, app.Name) // removeApplication when its size is 0
					continue
				}
				c.apps[app.Name] = list
			}
		}
	}
}

// hashCode is getReconcileHashCode of the local registry.
func (c *javaClient) hashCode() string {
	counts := map[string]int{}
	for _, list := range c.apps {
		for _, inst := range list {
			counts[inst.Status]++
		}
	}
	return HashCode(counts)
}

// TestDeltaKeepsTheJavaClientInStep: every instance of a service goes, then one comes back
// while another's deletion is still in the delta window. The client, whose local registry
// lost the application, adds the delta's application whole: its hash code must still match
// the server's, or it falls back to a full fetch (seen with the real client in
// make test-interop: "The Reconcile hashcodes do not match, client : UP_11_, server : UP_2_").
func TestDeltaKeepsTheJavaClientInStep(t *testing.T) {
	a := rec("orders", "ns", "a", "10.0.0.1", map[string]int32{"http": 80})
	b := rec("orders", "ns", "b", "10.0.0.2", map[string]int32{"http": 80})
	c := rec("orders", "ns", "c", "10.0.0.3", map[string]int32{"http": 80})
	keep := rec("billing", "ns", "k", "10.0.0.4", map[string]int32{"http": 80})
	r := NewRegistry(RegistryOptions{})
	r.Apply(discovery.Change{Added: []discovery.Instance{a, b, c, keep}})
	client := newJavaClient(r.View())

	for i, ch := range []discovery.Change{
		{Removed: []discovery.Instance{a}},
		{Removed: []discovery.Instance{b, c}}, // ORDERS is gone from the client's registry
		{Added: []discovery.Instance{c}},      // a and b stay DELETED in the window, before c
		{Removed: []discovery.Instance{c}},
		{Added: []discovery.Instance{b}},
		{Added: []discovery.Instance{a}},
	} {
		r.Apply(ch)
		v := r.View()
		client.applyDelta(v)
		if got := client.hashCode(); got != v.HashCode {
			t.Fatalf("step %d: the client's hash code after the delta %v is %q, the server's %q: it would fetch the full registry",
				i, deltaActions(v), got, v.HashCode)
		}
	}
}
