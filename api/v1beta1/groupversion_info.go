// Package v1beta1 contains the API types of the discovery.registrar.dev group.
//
// +kubebuilder:object:generate=true
// +groupName=discovery.registrar.dev
package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version used to register these objects.
	GroupVersion = schema.GroupVersion{Group: "discovery.registrar.dev", Version: "v1beta1"}

	// SchemeBuilder adds the types of this group-version to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this group-version to the given scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// addKnownTypes registers the types of this group-version with a scheme.
func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &ServiceRegistry{}, &ServiceRegistryList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
