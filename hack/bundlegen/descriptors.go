package main

import (
	"sort"
	"strings"
	"unicode"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// x-descriptors the OLM console understands.
const (
	xText       = "urn:alm:descriptor:com.tectonic.ui:text"
	xNumber     = "urn:alm:descriptor:com.tectonic.ui:number"
	xBoolean    = "urn:alm:descriptor:com.tectonic.ui:booleanSwitch"
	xPodSel     = "urn:alm:descriptor:com.tectonic.ui:selector:core:v1:Pod"
	xSelect     = "urn:alm:descriptor:com.tectonic.ui:select:"
	xFieldGroup = "urn:alm:descriptor:com.tectonic.ui:fieldGroup:"
	xConditions = "urn:alm:descriptor:io.kubernetes.conditions"
	xStatusText = "urn:alm:descriptor:text"
)

// ownedCRD describes the CRD's storage version for the CSV, with one spec or status
// descriptor per field of the schema (two levels deep), each described by the first
// sentence of the field's schema description.
func ownedCRD(crd *apiextensionsv1.CustomResourceDefinition) v1alpha1.CRDDescription {
	var ver apiextensionsv1.CustomResourceDefinitionVersion
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			ver = v
		}
	}
	d := v1alpha1.CRDDescription{
		Name: crd.Name, Version: ver.Name, Kind: crd.Spec.Names.Kind,
		DisplayName: splitCamel(crd.Spec.Names.Kind),
		Description: firstSentence(ver.Schema.OpenAPIV3Schema.Description),
	}
	props := ver.Schema.OpenAPIV3Schema.Properties
	for _, f := range fields(props["spec"], "", 2) {
		d.SpecDescriptors = append(d.SpecDescriptors, v1alpha1.SpecDescriptor{
			Path: f.path, DisplayName: f.name, Description: f.desc, XDescriptors: specX(f)})
	}
	for _, f := range fields(props["status"], "", 2) {
		d.StatusDescriptors = append(d.StatusDescriptors, v1alpha1.StatusDescriptor{
			Path: f.path, DisplayName: f.name, Description: f.desc, XDescriptors: statusX(f)})
	}
	return d
}

// field is one schema property with its dotted path below spec or status.
type field struct {
	path, name, desc, parent string
	schema                   apiextensionsv1.JSONSchemaProps
}

// fields lists the properties of s in name order, descending into objects (not label
// selectors, not list items) up to depth levels.
func fields(s apiextensionsv1.JSONSchemaProps, prefix string, depth int) []field {
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []field
	for _, n := range names {
		p := s.Properties[n]
		f := field{path: prefix + n, name: splitCamel(n), desc: firstSentence(p.Description), parent: strings.TrimSuffix(prefix, "."), schema: p}
		if p.Type == "object" && len(p.Properties) > 0 && !isSelector(n) && depth > 1 {
			out = append(out, fields(p, prefix+n+".", depth-1)...)
			continue
		}
		out = append(out, f)
	}
	return out
}

func isSelector(name string) bool { return strings.HasSuffix(name, "elector") }

func specX(f field) []string {
	var x []string
	switch {
	case isSelector(f.path):
		x = append(x, xPodSel)
	case len(f.schema.Enum) > 0:
		for _, e := range f.schema.Enum {
			x = append(x, xSelect+strings.Trim(string(e.Raw), `"`))
		}
	case f.schema.Type == "boolean":
		x = append(x, xBoolean)
	case f.schema.Type == "integer":
		x = append(x, xNumber)
	case f.schema.Type == "string":
		x = append(x, xText)
	}
	if f.parent != "" {
		x = append(x, xFieldGroup+f.parent)
	}
	return x
}

func statusX(f field) []string {
	switch {
	case f.path == "conditions":
		return []string{xConditions}
	case f.schema.Type == "integer" || f.schema.Type == "string":
		return []string{xStatusText}
	}
	return nil
}

// splitCamel turns "callerCacheSeconds" into "Caller Cache Seconds".
func splitCamel(s string) string {
	var b strings.Builder
	for i, r := range s {
		if i > 0 && unicode.IsUpper(r) && !unicode.IsUpper(rune(s[i-1])) {
			b.WriteByte(' ')
		}
		if i == 0 {
			r = unicode.ToUpper(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// firstSentence is the description up to its first full stop, on one line.
func firstSentence(desc string) string {
	words := strings.Fields(desc)
	for i, w := range words {
		if abbr := strings.TrimLeft(w, "(\"'"); strings.HasSuffix(w, ".") && abbr != "e.g." && abbr != "i.e." && i < len(words)-1 {
			return strings.Join(words[:i+1], " ")
		}
	}
	return strings.Join(words, " ")
}
