package leancache

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// SamplePod returns the i-th pod of a realistic Deployment as the API server serves it once
// the kubelet runs it, injected by registrar's webhook: managedFields of three managers, env,
// volumes, probes, a native sidecar, tolerations, container statuses. The tests and the
// bytes-per-pod measurement (bench/podbytes) use it.
func SamplePod(i int) *corev1.Pod {
	t := metav1.NewTime(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	name := fmt.Sprintf("checkout-7d9f8b6c5d-%05d", i)
	ip := fmt.Sprintf("10.%d.%d.%d", 1+i/65536%200, i/256%256, i%256)
	env := []corev1.EnvVar{
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
		{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"}}},
		{Name: "DB_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "checkout-db"}, Key: "password"}}},
		{Name: "LOG_LEVEL", Value: "info"}, {Name: "HTTP_PORT", Value: "8080"}, {Name: "GRPC_PORT", Value: "9000"},
		{Name: "OTEL_EXPORTER_OTLP_ENDPOINT", Value: "http://otel-collector.observability.svc.cluster.local:4317"},
		{Name: "JAVA_TOOL_OPTIONS", Value: "-XX:MaxRAMPercentage=75 -XX:+UseG1GC -Dfile.encoding=UTF-8"},
		{Name: "FEATURE_FLAGS", Value: "new-cart,fast-checkout,async-payments"},
		{Name: "REGION", Value: "eu-west-1"},
	}
	mounts := []corev1.VolumeMount{
		{Name: "config", MountPath: "/etc/checkout", ReadOnly: true},
		{Name: "tls", MountPath: "/etc/tls", ReadOnly: true},
		{Name: tokenVolume, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true},
	}
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstrFromString("http"), Scheme: corev1.URISchemeHTTP}},
			InitialDelaySeconds: 5, TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3}
	}
	resources := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
	}
	always := corev1.ContainerRestartPolicyAlways
	running := func(n string, ready bool) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: n, Ready: ready, Started: ptr.To(true), RestartCount: 0,
			Image: "registry.example.com/shop/" + n + ":1.42.0", ImageID: "registry.example.com/shop/" + n + "@sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
			ContainerID: "containerd://4b5c2a1e9f0d8c7b6a5e4d3c2b1a09f8e7d6c5b4a39281706f5e4d3c2b1a0918",
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: t}},
			VolumeMounts: []corev1.VolumeMountStatus{{Name: tokenVolume, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount",
				ReadOnly: true, RecursiveReadOnly: ptr.To(corev1.RecursiveReadOnlyDisabled)}}}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, GenerateName: "checkout-7d9f8b6c5d-", Namespace: "shop",
			UID:             types.UID(fmt.Sprintf("6f1c2d3e-4b5a-4c6d-8e7f-%012d", i)),
			ResourceVersion: fmt.Sprintf("%d", 1000000+i), CreationTimestamp: t,
			Labels: map[string]string{"app": app, "app.kubernetes.io/name": app, "app.kubernetes.io/part-of": "shop",
				"pod-template-hash": "7d9f8b6c5d", "version": "1.42.0"},
			Annotations: map[string]string{
				"kubectl.kubernetes.io/restartedAt": "2026-11-30T11:58:00Z", "prometheus.io/scrape": "true", "prometheus.io/port": "9090",
				"registrar.dev/injected": "20",
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "checkout-7d9f8b6c5d",
				UID: "0c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &t, FieldsType: fieldsType,
					FieldsV1: metav1.NewFieldsV1(managedSpec)},
				{Manager: "registrar", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &t, FieldsType: fieldsType,
					FieldsV1:    metav1.NewFieldsV1(`{"f:status":{"f:conditions":{"k:{\"type\":\"registrar.dev/ready\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:message":{},"f:reason":{},"f:status":{},"f:type":{}}}}}`),
					Subresource: "status"},
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &t, FieldsType: fieldsType,
					FieldsV1: metav1.NewFieldsV1(managedStatus), Subresource: "status"},
			},
		},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{
				{Name: "migrate", Image: "registry.example.com/shop/checkout-migrate:1.42.0", Command: []string{"/migrate", "--wait"}, Env: env[:4],
					Resources: resources, TerminationMessagePath: corev1.TerminationMessagePathDefault, TerminationMessagePolicy: corev1.TerminationMessageReadFile,
					ImagePullPolicy: corev1.PullIfNotPresent},
				{Name: "mesh-proxy", Image: "registry.example.com/mesh/proxy:2.3.1", RestartPolicy: &always,
					Ports: []corev1.ContainerPort{{Name: "proxy-admin", ContainerPort: 15000, Protocol: corev1.ProtocolTCP}},
					Args:  []string{"proxy", "--config", "/etc/mesh/config.yaml"}, Resources: resources,
					TerminationMessagePath: corev1.TerminationMessagePathDefault, TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullIfNotPresent},
			},
			Containers: []corev1.Container{{
				Name: app, Image: "registry.example.com/shop/checkout:1.42.0",
				Args: []string{"--config=/etc/checkout/config.yaml", "--listen=:8080"},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
					{Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP}, {Name: "grpc", ContainerPort: 9000, Protocol: corev1.ProtocolTCP}},
				Env: env, Resources: resources, VolumeMounts: mounts, LivenessProbe: probe("/healthz"), ReadinessProbe: probe("/ready"),
				Lifecycle:              &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 20}}},
				TerminationMessagePath: corev1.TerminationMessagePathDefault, TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				ImagePullPolicy: corev1.PullIfNotPresent,
				SecurityContext: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false),
					ReadOnlyRootFilesystem: ptr.To(true), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "checkout-config"}, DefaultMode: ptr.To[int32](420)}}},
				{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "checkout-tls", DefaultMode: ptr.To[int32](420)}}},
				{Name: tokenVolume, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptr.To[int32](420),
					Sources: []corev1.VolumeProjection{
						{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptr.To[int64](3607), Path: "token"}},
						{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
							Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
						{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
							FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
					}}}},
			},
			RestartPolicy: corev1.RestartPolicyAlways, TerminationGracePeriodSeconds: ptr.To[int64](50),
			DNSPolicy: corev1.DNSClusterFirst, ServiceAccountName: app, DeprecatedServiceAccount: app,
			NodeName: fmt.Sprintf("node-%03d", i%100), SecurityContext: &corev1.PodSecurityContext{FSGroup: ptr.To[int64](2000)},
			SchedulerName: corev1.DefaultSchedulerName, Priority: ptr.To[int32](0), EnableServiceLinks: ptr.To(true),
			PreemptionPolicy: ptr.To(corev1.PreemptLowerPriority),
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
			},
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: v1beta1.ReadinessGate}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, QOSClass: corev1.PodQOSBurstable, StartTime: &t,
			HostIP: "192.168.10.21", HostIPs: []corev1.HostIP{{IP: "192.168.10.21"}}, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{
				{Type: "PodReadyToStartContainers", Status: corev1.ConditionTrue, LastTransitionTime: t},
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: t},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: t},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: t},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: t},
				{Type: v1beta1.ReadinessGate, Status: corev1.ConditionTrue, Reason: v1beta1.GateRegistered, Message: "registered in the store", LastTransitionTime: t},
			},
			InitContainerStatuses: []corev1.ContainerStatus{running("migrate", false), running("mesh-proxy", true)},
			ContainerStatuses:     []corev1.ContainerStatus{running(app, true)},
		},
	}
}

const (
	app         = "checkout"
	tokenVolume = "kube-api-access-x7k2p"
	fieldsType  = "FieldsV1"
)

// managedSpec and managedStatus are the kind of fieldsV1 kube-controller-manager and the
// kubelet write on a Deployment's pod (abridged to the fields of SamplePod).
const managedSpec = `{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/restartedAt":{},"f:prometheus.io/port":{},"f:prometheus.io/scrape":{},"f:registrar.dev/injected":{}},"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:app.kubernetes.io/name":{},"f:app.kubernetes.io/part-of":{},"f:pod-template-hash":{},"f:version":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"0c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"checkout\"}":{".":{},"f:args":{},"f:env":{".":{},"k:{\"name\":\"DB_PASSWORD\"}":{".":{},"f:name":{},"f:valueFrom":{".":{},"f:secretKeyRef":{}}},"k:{\"name\":\"FEATURE_FLAGS\"}":{".":{},"f:name":{},"f:value":{}},"k:{\"name\":\"GRPC_PORT\"}":{".":{},"f:name":{},"f:value":{}},"k:{\"name\":\"HTTP_PORT\"}":{".":{},"f:name":{},"f:value":{}},"k:{\"name\":\"JAVA_TOOL_OPTIONS\"}":{".":{},"f:name":{},"f:value":{}},"k:{\"name\":\"LOG_LEVEL\"}":{".":{},"f:name":{},"f:value":{}},"k:{\"name\":\"OTEL_EXPORTER_OTLP_ENDPOINT\"}":{".":{},"f:name":{},"f:value":{}},"k:{\"name\":\"POD_IP\"}":{".":{},"f:name":{},"f:valueFrom":{".":{},"f:fieldRef":{}}},"k:{\"name\":\"POD_NAME\"}":{".":{},"f:name":{},"f:valueFrom":{".":{},"f:fieldRef":{}}},"k:{\"name\":\"REGION\"}":{".":{},"f:name":{},"f:value":{}}},"f:image":{},"f:imagePullPolicy":{},"f:lifecycle":{".":{},"f:preStop":{".":{},"f:sleep":{".":{},"f:seconds":{}}}},"f:livenessProbe":{".":{},"f:failureThreshold":{},"f:httpGet":{".":{},"f:path":{},"f:port":{},"f:scheme":{}},"f:initialDelaySeconds":{},"f:periodSeconds":{},"f:successThreshold":{},"f:timeoutSeconds":{}},"f:name":{},"f:ports":{".":{},"k:{\"containerPort\":8080,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:name":{},"f:protocol":{}},"k:{\"containerPort\":9000,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:name":{},"f:protocol":{}},"k:{\"containerPort\":9090,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:name":{},"f:protocol":{}}},"f:readinessProbe":{".":{},"f:failureThreshold":{},"f:httpGet":{".":{},"f:path":{},"f:port":{},"f:scheme":{}},"f:initialDelaySeconds":{},"f:periodSeconds":{},"f:successThreshold":{},"f:timeoutSeconds":{}},"f:resources":{".":{},"f:limits":{".":{},"f:memory":{}},"f:requests":{".":{},"f:cpu":{},"f:memory":{}}},"f:securityContext":{".":{},"f:allowPrivilegeEscalation":{},"f:capabilities":{".":{},"f:drop":{}},"f:readOnlyRootFilesystem":{},"f:runAsNonRoot":{}},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{},"f:volumeMounts":{".":{},"k:{\"mountPath\":\"/etc/checkout\"}":{".":{},"f:mountPath":{},"f:name":{},"f:readOnly":{}},"k:{\"mountPath\":\"/etc/tls\"}":{".":{},"f:mountPath":{},"f:name":{},"f:readOnly":{}}}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:initContainers":{".":{},"k:{\"name\":\"mesh-proxy\"}":{".":{},"f:args":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:ports":{},"f:resources":{},"f:restartPolicy":{}},"k:{\"name\":\"migrate\"}":{".":{},"f:command":{},"f:env":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:resources":{}}},"f:readinessGates":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{".":{},"f:fsGroup":{}},"f:serviceAccount":{},"f:serviceAccountName":{},"f:terminationGracePeriodSeconds":{},"f:volumes":{".":{},"k:{\"name\":\"config\"}":{".":{},"f:configMap":{".":{},"f:defaultMode":{},"f:name":{}},"f:name":{}},"k:{\"name\":\"tls\"}":{".":{},"f:name":{},"f:secret":{".":{},"f:defaultMode":{},"f:secretName":{}}}}}}`

const managedStatus = `{"f:status":{"f:conditions":{"k:{\"type\":\"ContainersReady\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Initialized\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"PodReadyToStartContainers\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Ready\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},"f:containerStatuses":{},"f:hostIP":{},"f:hostIPs":{},"f:initContainerStatuses":{},"f:phase":{},"f:podIP":{},"f:podIPs":{".":{},"k:{\"ip\":\"10.1.0.1\"}":{".":{},"f:ip":{}}},"f:startTime":{}}}`

func intstrFromString(s string) intstr.IntOrString { return intstr.FromString(s) }
