// Package webhook is the pod mutating admission webhook: a thin adapter that finds the
// ServiceRegistry selecting a new pod and applies internal/injector to it.
package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/annotations"
	"github.com/registrar-dev/registrar/internal/claimindex"
	"github.com/registrar-dev/registrar/internal/eligibility"
	"github.com/registrar-dev/registrar/internal/injector"
	"github.com/registrar-dev/registrar/internal/metrics"
)

// Path is where the API server sends pod admission reviews (see config/webhook/manifests.yaml).
const Path = "/mutate--v1-pod"

// ScopeLabel on a namespace or a pod, with the value ScopeDisabled, keeps the API server from
// calling the webhook for it (the webhook's namespaceSelector and objectSelector).
const (
	ScopeLabel    = "registrar.dev/webhook"
	ScopeDisabled = "disabled"
)

// Event reasons recorded on the ServiceRegistry.
const (
	// ActionInject is the events.k8s.io action of the webhook's events.
	ActionInject = "InjectPod"
)

// Why failurePolicy is Ignore: the webhook sees every pod CREATE in the cluster, so a
// registrar outage (no ready replica, expired certificate, network policy) must never block
// pod creation cluster-wide — including the pods that would bring registrar back. The cost:
// pods created while the webhook is unreachable lack the registrar.dev/ready gate and the
// preStop sleep, so they are registered on ContainersReady without warm-up and exit without
// a drain; the operator reports such pods on their ServiceRegistry. For the same reason the
// handler itself never denies: every error becomes Allowed with a warning.
//
// Scope (docs/webhook.md): the API server calls the webhook for pod CREATE only outside
// kube-system, kube-node-lease, kube-public and registrar's own namespace ("system" here; the
// kustomize overlays replace it with the installed namespace), and neither for namespaces nor
// for pods labelled registrar.dev/webhook=disabled; it waits at most 5 s for an answer.
//
// +kubebuilder:webhook:path=/mutate--v1-pod,mutating=true,failurePolicy=ignore,sideEffects=None,groups="",resources=pods,verbs=create,versions=v1,name=mpod.registrar.dev,admissionReviewVersions=v1,reinvocationPolicy=IfNeeded,timeoutSeconds=5,patch=`{"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","kube-node-lease","kube-public","system"]},{"key":"registrar.dev/webhook","operator":"NotIn","values":["disabled"]}]},"objectSelector":{"matchExpressions":[{"key":"registrar.dev/webhook","operator":"NotIn","values":["disabled"]}]}}`
// +kubebuilder:rbac:groups=discovery.registrar.dev,resources=serviceregistries,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch

// PodInjector is the admission.Handler for pod CREATE.
type PodInjector struct {
	// Client lists ServiceRegistries (the manager's cached client).
	Client client.Reader
	// APIReader reads from the API server directly (the manager's uncached reader); nil
	// disables the lookup of a Deployment the cache has not seen yet (see liveDeployment).
	APIReader client.Reader
	// Decoder decodes the pod in the request.
	Decoder admission.Decoder
	// Recorder records Events on ServiceRegistries; nil records none.
	Recorder events.EventRecorder
}

var _ admission.Handler = &PodInjector{}

// Register registers the pod webhook on the manager's webhook server at Path, using the
// manager's client and rec for Events (nil: the manager's events.k8s.io recorder named
// "registrar"), and adds the claimant
// index it reads the registries of a pod through (internal/claimindex) to the manager's
// cache.
func Register(mgr ctrl.Manager, rec events.EventRecorder) error {
	if err := claimindex.Register(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	if rec == nil {
		rec = mgr.GetEventRecorder("registrar")
	}
	h := &PodInjector{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Decoder:   admission.NewDecoder(mgr.GetScheme()),
		Recorder:  rec,
	}
	mgr.GetWebhookServer().Register(Path, &crwebhook.Admission{Handler: h})
	return nil
}

// Handle injects the readiness gate and preStop drain into a new pod selected by a
// ServiceRegistry with injection enabled. It always allows the request.
func (h *PodInjector) Handle(ctx context.Context, req admission.Request) (resp admission.Response) {
	log := logf.FromContext(ctx).WithValues("namespace", req.Namespace, "uid", req.UID)
	defer func() {
		// A panic would become a 500 (a denial); allow the pod instead.
		if r := recover(); r != nil {
			log.Error(fmt.Errorf("panic: %v", r), "pod webhook panicked; pod admitted unchanged")
			resp = allowWithWarning(fmt.Sprintf("registrar: internal error (%v); pod admitted without injection", r))
		}
		metrics.WebhookInjections.WithLabelValues(injectionResult(resp)).Inc()
	}()
	if req.Operation != admissionv1.Create {
		return admission.Allowed("registrar: only pod CREATE is mutated")
	}
	pod := &corev1.Pod{}
	if err := h.Decoder.Decode(req, pod); err != nil {
		log.Error(err, "decoding pod")
		return allowWithWarning(fmt.Sprintf("registrar: could not decode the pod (%v); admitted without injection", err))
	}
	if _, done := pod.Annotations[v1beta1.AnnotationInjected]; done {
		return admission.Allowed("registrar: already injected")
	}
	ns := req.Namespace // pod.Namespace may be empty at admission
	if ns == "" {
		ns = pod.Namespace
	}
	podDesc := describePod(pod)
	log = log.WithValues("pod", podDesc)

	// Read-only from here on (selectors, injection settings, names; only the pod is
	// mutated): the registries and annotated Deployments that may select the pod
	// (internal/claimindex: anchored under one of its labels), not the namespace's, listed
	// from the cache without deep copies.
	regs, err := claimindex.Registries(ctx, h.Client, ns, pod.Labels)
	if err != nil && regs == nil {
		log.Error(err, "listing ServiceRegistries; pod admitted without injection")
		return allowWithWarning(fmt.Sprintf("registrar: could not list ServiceRegistries in %s (%v); pod admitted without the %s readiness gate and preStop drain",
			ns, err, v1beta1.ReadinessGate))
	}
	if err != nil {
		log.Error(err, "reading ServiceRegistries of annotated Deployments; only ServiceRegistries are considered")
	}
	candidates, skipped := matching(regs, pod.Labels)
	if len(candidates) == 0 {
		if d, err := h.liveDeployment(ctx, ns, pod, regs); err != nil {
			log.Error(err, "reading the pod's Deployment from the API server")
		} else if d != nil {
			log.Info("the pod's annotated Deployment is not in the cache yet; read it from the API server", "deployment", d.Name)
			candidates, skipped = matching(append(regs, claimindex.RegistryOf(d)), pod.Labels)
		}
	}
	var warnings []string
	for _, s := range skipped {
		log.Info("ServiceRegistry skipped", "reason", s)
	}
	if len(candidates) == 0 {
		return admission.Allowed("registrar: no ServiceRegistry with injection enabled selects this pod")
	}
	reg := candidates[0]
	if len(candidates) > 1 {
		names := make([]string, len(candidates))
		for i, c := range candidates {
			names[i] = c.Name
		}
		msg := fmt.Sprintf("registrar: pod matches %d ServiceRegistries with injection enabled (%s); used the oldest, %s",
			len(candidates), strings.Join(names, ", "), reg.Name)
		warnings = append(warnings, msg)
		log.Info(msg)
	}

	res := injector.Inject(pod, reg)
	if !res.Changed {
		return admission.Allowed("registrar: nothing to inject")
	}
	if len(res.PreStopKept) > 0 {
		note := fmt.Sprintf("%s: container(s) %s already have a preStop hook; left alone, so the %ds drain applies only if that hook waits as long",
			podDesc, strings.Join(quote(res.PreStopKept), ", "), res.DrainSeconds)
		warnings = append(warnings, "registrar: "+note)
		if h.Recorder != nil && reg.UID != "" && (req.DryRun == nil || !*req.DryRun) {
			h.Recorder.Eventf(reg, nil, corev1.EventTypeWarning, v1beta1.EventPreStopKept, ActionInject, "%s", note)
		}
	}
	log.V(1).Info("injected pod", "serviceRegistry", reg.Name, "changes", res.Changes, "notes", res.Notes)

	mutated, err := json.Marshal(pod)
	if err != nil {
		log.Error(err, "encoding the mutated pod")
		return allowWithWarning(fmt.Sprintf("registrar: could not encode the mutated pod (%v); admitted without injection", err))
	}
	resp = admission.PatchResponseFromRaw(req.Object.Raw, mutated)
	if !resp.Allowed {
		msg := "unknown error"
		if resp.Result != nil {
			msg = resp.Result.Message
		}
		log.Error(fmt.Errorf("%s", msg), "computing the JSON patch")
		return allowWithWarning(fmt.Sprintf("registrar: could not compute the patch (%s); admitted without injection", msg))
	}
	resp.Result = &metav1.Status{Message: fmt.Sprintf("registrar: injected for ServiceRegistry %s: %s", reg.Name, strings.Join(res.Changes, "; "))}
	return resp.WithWarnings(warnings...)
}

// liveDeployment closes the race between a new annotated Deployment and the webhook's cache:
// the Deployment's first pods are admitted moments after it is created, and the cache may
// not have it yet, so those pods would start without the gate and the preStop drain. When no
// registry selected the pod and the pod belongs to a ReplicaSet whose Deployment (the name
// before the ReplicaSet's last "-") the cache does not hold, it reads that Deployment from
// the API server (one GET, only for pods of Deployments the cache has not seen). It returns
// the Deployment when it is annotated, usable, has no registry yet and owns the ReplicaSet;
// nil otherwise.
func (h *PodInjector) liveDeployment(ctx context.Context, ns string, pod *corev1.Pod, regs []v1beta1.ServiceRegistry) (*appsv1.Deployment, error) {
	if h.APIReader == nil {
		return nil, nil
	}
	owner := metav1.GetControllerOfNoCopy(pod)
	if owner == nil || owner.Kind != "ReplicaSet" || owner.APIVersion != appsv1.SchemeGroupVersion.String() {
		return nil, nil
	}
	i := strings.LastIndex(owner.Name, "-")
	if i <= 0 {
		return nil, nil
	}
	key := client.ObjectKey{Namespace: ns, Name: owner.Name[:i]}
	for _, r := range regs {
		if r.Name == key.Name {
			return nil, nil // a registry of that name was synthesized: the cache decided
		}
	}
	if exists, err := claimindex.RegistryExists(ctx, h.Client, ns, key.Name); err != nil || exists {
		return nil, err // a registry of that name exists: the cache decided
	}
	err := h.Client.Get(ctx, key, &appsv1.Deployment{})
	if err == nil {
		return nil, nil // the cache has the Deployment: it is not annotated (or not usable)
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("get Deployment %s from the cache: %w", key, err)
	}
	d := &appsv1.Deployment{}
	if err := h.APIReader.Get(ctx, key, d); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if res := annotations.Spec(d); !res.Enabled || !res.Usable || !strings.HasPrefix(owner.Name, d.Name+"-") {
		return nil, nil
	}
	return d, nil
}

// matching returns the registries with injection enabled whose selector matches podLabels,
// oldest first (ties broken by name), and a reason for each registry skipped for an invalid
// selector.
func matching(regs []v1beta1.ServiceRegistry, podLabels map[string]string) ([]*v1beta1.ServiceRegistry, []string) {
	var out []*v1beta1.ServiceRegistry
	var skipped []string
	set := labels.Set(podLabels)
	for i := range regs {
		r := &regs[i]
		if !injector.Enabled(r) || r.DeletionTimestamp != nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(&r.Spec.Selector)
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("%s: invalid selector: %v", r.Name, err))
			continue
		}
		if sel.Empty() { // the CRD rejects empty selectors; never inject every pod
			continue
		}
		if sel.Matches(set) {
			out = append(out, r)
		}
	}
	// the controller's order too: the oldest registry of a service owns a pod both select
	sort.SliceStable(out, func(i, j int) bool {
		return eligibility.OlderThan(eligibility.ClaimantOf(out[i]), eligibility.ClaimantOf(out[j]))
	})
	return out, skipped
}

// injectionResult names an admission response for metrics: injected (it carries a patch),
// error (admitted unchanged with a warning) or skipped.
func injectionResult(resp admission.Response) string {
	switch {
	case len(resp.Patches) > 0:
		return "injected"
	case len(resp.Warnings) > 0:
		return "error"
	}
	return "skipped"
}

// describePod names the pod for messages: at admission a pod created from a template has
// only a generateName.
func describePod(pod *corev1.Pod) string {
	switch {
	case pod.Name != "":
		return "pod " + pod.Name
	case pod.GenerateName != "":
		return fmt.Sprintf("pod with generateName %q (name not yet assigned at admission)", pod.GenerateName)
	default:
		return "unnamed pod"
	}
}

func allowWithWarning(msg string) admission.Response {
	return admission.Allowed(msg).WithWarnings(msg)
}

func quote(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}
