// Package tenancy decides which namespace a service name belongs to, and whether a
// ServiceRegistry of another namespace may publish under it (issue 34; docs/security.md,
// "Tenancy"). It is pure: the controller gathers the registries claiming a name and acts on
// the answer.
//
// The rule: a service name belongs to the namespace of its oldest ServiceRegistry
// (creationTimestamp, then namespace, then name: deterministic whatever the order the
// registries are listed in), registries being deleted not counting. Every registry of that
// namespace may publish under the name; a registry of another namespace only when a
// registry of the owning namespace shares the name with it (spec.sharing.namespaces lists
// its namespace, or "*").
package tenancy

import (
	"fmt"
	"sort"
	"time"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// Mode is the operator's --service-name-tenancy.
type Mode string

const (
	// ModeNamespace: a service name belongs to one namespace unless its owner shares it.
	ModeNamespace Mode = "namespace"
	// ModeShared: any namespace may publish under any service name (callers get every
	// namespace's endpoints of a name); for clusters whose namespaces trust each other.
	ModeShared Mode = "shared"
)

// ParseMode reads --service-name-tenancy.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case ModeNamespace, ModeShared:
		return Mode(s), nil
	}
	return "", fmt.Errorf("--service-name-tenancy must be %q or %q, not %q", ModeNamespace, ModeShared, s)
}

// MarshalText makes Mode a flag value (flag.TextVar).
func (m Mode) MarshalText() ([]byte, error) { return []byte(m), nil }

// UnmarshalText parses a flag value (ParseMode).
func (m *Mode) UnmarshalText(b []byte) error {
	parsed, err := ParseMode(string(b))
	if err != nil {
		return err
	}
	*m = parsed
	return nil
}

// ShareAll in spec.sharing.namespaces shares a name with every namespace.
const ShareAll = "*"

// Claim is what the decision needs of one ServiceRegistry publishing a service name.
type Claim struct {
	Namespace, Name string
	Created         time.Time
	// Deleting is set once the registry has a deletionTimestamp: it claims nothing any more.
	Deleting bool
	// SharedWith is the registry's spec.sharing.namespaces.
	SharedWith []string
}

// Ref names a registry as namespace/name.
func (c Claim) Ref() string { return c.Namespace + "/" + c.Name }

// olderThan is the ownership order: creationTimestamp, then namespace, then name.
func olderThan(a, b Claim) bool {
	if !a.Created.Equal(b.Created) {
		return a.Created.Before(b.Created)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

// Decision is the verdict on one registry's use of its service name.
type Decision struct {
	// Admitted is true when the registry may publish under the name.
	Admitted bool
	// Owner is the oldest registry of the owning namespace (the registry itself when it owns
	// the name); zero when there is no owner (mode shared).
	Owner Claim
	// Shared is true when the registry is admitted by the owner's spec.sharing.
	Shared bool
}

// Decide says whether self may publish under its service name, given every registry that
// claims the name (self among them or not; the same registry is recognised by namespace and
// name). Under ModeShared every registry is admitted.
func Decide(mode Mode, self Claim, claims []Claim) Decision {
	if mode == ModeShared {
		return Decision{Admitted: true}
	}
	live := make([]Claim, 0, len(claims)+1)
	found := false
	for _, c := range claims {
		if c.Namespace == self.Namespace && c.Name == self.Name {
			found = true
			c = self // the caller's view of itself is the newest
		}
		if !c.Deleting {
			live = append(live, c)
		}
	}
	if !found && !self.Deleting {
		live = append(live, self)
	}
	if len(live) == 0 {
		return Decision{Admitted: true, Owner: self}
	}
	sort.Slice(live, func(i, j int) bool { return olderThan(live[i], live[j]) })
	owner := live[0]
	if owner.Namespace == self.Namespace {
		return Decision{Admitted: true, Owner: owner}
	}
	for _, c := range live {
		if c.Namespace == owner.Namespace && sharesWith(c.SharedWith, self.Namespace) {
			return Decision{Admitted: true, Owner: owner, Shared: true}
		}
	}
	return Decision{Owner: owner}
}

func sharesWith(namespaces []string, ns string) bool {
	for _, n := range namespaces {
		if n == ns || n == ShareAll {
			return true
		}
	}
	return false
}

// RefusalMessage is the condition message of a refused registry: who owns the name and how
// to get it shared.
func RefusalMessage(service string, d Decision, namespace string) string {
	return fmt.Sprintf("service name %q belongs to namespace %s (its oldest ServiceRegistry is %s); this registry publishes nothing under it. "+
		"Ask the owner to add %q to spec.sharing.namespaces of a ServiceRegistry of namespace %s, or give this registry another spec.serviceName",
		service, d.Owner.Namespace, d.Owner.Ref(), namespace, d.Owner.Namespace)
}

// ClaimOf is what the decision needs of a registry.
func ClaimOf(reg *v1beta1.ServiceRegistry) Claim {
	c := Claim{Namespace: reg.Namespace, Name: reg.Name, Created: reg.CreationTimestamp.Time,
		Deleting: reg.DeletionTimestamp != nil}
	if reg.Spec.Sharing != nil {
		c.SharedWith = reg.Spec.Sharing.Namespaces
	}
	return c
}
