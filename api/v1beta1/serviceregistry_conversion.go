package v1beta1

// Hub marks v1beta1 as the conversion hub (the storage version): every other version of
// ServiceRegistry converts to and from it (api/v1alpha1's ConvertTo and ConvertFrom), and
// the CRD's conversion webhook (controller-runtime's /convert) goes through it.
func (*ServiceRegistry) Hub() {}
