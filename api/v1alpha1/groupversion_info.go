// Package v1alpha1 contains the first version of the API types of the
// discovery.registrar.dev group, still served and deprecated: v1beta1 is stored, and
// ServiceRegistry converts to and from it (serviceregistry_conversion.go). registrar's own
// code uses v1beta1, which also holds the vocabulary (conditions, reasons, annotations).
//
// +kubebuilder:object:generate=true
// +groupName=discovery.registrar.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version used to register these objects.
	GroupVersion = schema.GroupVersion{Group: "discovery.registrar.dev", Version: "v1alpha1"}

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
