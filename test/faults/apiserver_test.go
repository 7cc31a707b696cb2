package faults

// restartedAPIServer is a kube-apiserver process a test started again with envtest's flags.
type restartedAPIServer struct{ stop func() }
