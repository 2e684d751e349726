// Package deploy holds the Kubernetes manifests (kustomize); its test checks
// them structurally, since a schema validator such as kubeconform needs the
// Kubernetes JSON schemas from the internet, which CI does not reach.
package deploy

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// object is the part of a manifest the checks read; unknown fields are
// rejected by decoding each kind strictly into its own type below.
type meta struct {
	Name        string            `yaml:"name"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type header struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   meta   `yaml:"metadata"`
}

type probe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
	TCPSocket *struct {
		Port string `yaml:"port"`
	} `yaml:"tcpSocket"`
	InitialDelaySeconds int `yaml:"initialDelaySeconds"`
	PeriodSeconds       int `yaml:"periodSeconds"`
	FailureThreshold    int `yaml:"failureThreshold"`
}

type resources struct {
	Requests map[string]string `yaml:"requests"`
	Limits   map[string]string `yaml:"limits"`
}

type container struct {
	Name  string   `yaml:"name"`
	Image string   `yaml:"image"`
	Args  []string `yaml:"args"`
	Env   []struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	Resources      resources `yaml:"resources"`
	ReadinessProbe *probe    `yaml:"readinessProbe"`
	LivenessProbe  *probe    `yaml:"livenessProbe"`
	Lifecycle      struct {
		PreStop struct {
			Sleep struct {
				Seconds int `yaml:"seconds"`
			} `yaml:"sleep"`
		} `yaml:"preStop"`
	} `yaml:"lifecycle"`
	SecurityContext struct {
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
		Capabilities             struct {
			Drop []string `yaml:"drop"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	} `yaml:"volumeMounts"`
}

type pvcSpec struct {
	AccessModes []string  `yaml:"accessModes"`
	Resources   resources `yaml:"resources"`
}

type statefulSet struct {
	header `yaml:",inline"`
	Spec   struct {
		ServiceName         string `yaml:"serviceName"`
		Replicas            int    `yaml:"replicas"`
		PodManagementPolicy string `yaml:"podManagementPolicy"`
		Selector            struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata meta `yaml:"metadata"`
			Spec     struct {
				TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
				SecurityContext               struct {
					RunAsNonRoot bool `yaml:"runAsNonRoot"`
					RunAsUser    int  `yaml:"runAsUser"`
					RunAsGroup   int  `yaml:"runAsGroup"`
					FSGroup      int  `yaml:"fsGroup"`
				} `yaml:"securityContext"`
				Containers []container `yaml:"containers"`
				Volumes    []struct {
					Name                  string `yaml:"name"`
					PersistentVolumeClaim *struct {
						ClaimName string `yaml:"claimName"`
						ReadOnly  bool   `yaml:"readOnly"`
					} `yaml:"persistentVolumeClaim"`
					EmptyDir *struct{} `yaml:"emptyDir"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
		VolumeClaimTemplates []struct {
			Metadata meta    `yaml:"metadata"`
			Spec     pvcSpec `yaml:"spec"`
		} `yaml:"volumeClaimTemplates"`
	} `yaml:"spec"`
}

type service struct {
	header `yaml:",inline"`
	Spec   struct {
		ClusterIP string            `yaml:"clusterIP"`
		Selector  map[string]string `yaml:"selector"`
		Ports     []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort string `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

type pvc struct {
	header `yaml:",inline"`
	Spec   pvcSpec `yaml:"spec"`
}

type ingress struct {
	header `yaml:",inline"`
	Spec   struct {
		IngressClassName string `yaml:"ingressClassName"`
		Rules            []struct {
			Host string `yaml:"host"`
			HTTP struct {
				Paths []struct {
					Path     string `yaml:"path"`
					PathType string `yaml:"pathType"`
					Backend  struct {
						Service struct {
							Name string `yaml:"name"`
							Port struct {
								Name string `yaml:"name"`
							} `yaml:"port"`
						} `yaml:"service"`
					} `yaml:"backend"`
				} `yaml:"paths"`
			} `yaml:"http"`
		} `yaml:"rules"`
	} `yaml:"spec"`
}

type serviceMonitor struct {
	header `yaml:",inline"`
	Spec   struct {
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Endpoints []struct {
			Port     string `yaml:"port"`
			Path     string `yaml:"path"`
			Interval string `yaml:"interval"`
		} `yaml:"endpoints"`
	} `yaml:"spec"`
}

type kustomization struct {
	APIVersion string   `yaml:"apiVersion"`
	Kind       string   `yaml:"kind"`
	Resources  []string `yaml:"resources"`
	Images     []struct {
		Name    string `yaml:"name"`
		NewName string `yaml:"newName"`
		NewTag  string `yaml:"newTag"`
	} `yaml:"images"`
	Replicas []struct {
		Name  string `yaml:"name"`
		Count int    `yaml:"count"`
	} `yaml:"replicas"`
}

// rendering is what `kubectl apply -k dir` would apply, resolved the way
// kustomize resolves resources, images and replicas (the subset used here).
type rendering struct {
	statefulSets    []*statefulSet
	services        []*service
	pvcs            []*pvc
	ingresses       []*ingress
	serviceMonitors []*serviceMonitor
}

// strict decodes one document into v, failing on fields v does not know:
// a misspelt or misplaced key is an error, as the API server would make it.
func strict(doc []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	dec.KnownFields(true)
	return dec.Decode(v)
}

func render(t *testing.T, dir string) *rendering {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := strict(b, &k); err != nil {
		t.Fatalf("%s/kustomization.yaml: %v", dir, err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" || len(k.Resources) == 0 {
		t.Fatalf("%s: not a kustomization: %+v", dir, k)
	}
	r := &rendering{}
	for _, res := range k.Resources {
		p := filepath.Join(dir, res)
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			sub := render(t, p)
			r.statefulSets = append(r.statefulSets, sub.statefulSets...)
			r.services = append(r.services, sub.services...)
			r.pvcs = append(r.pvcs, sub.pvcs...)
			r.ingresses = append(r.ingresses, sub.ingresses...)
			r.serviceMonitors = append(r.serviceMonitors, sub.serviceMonitors...)
			continue
		}
		r.add(t, p)
	}
	for _, img := range k.Images {
		for _, s := range r.statefulSets {
			for i := range s.Spec.Template.Spec.Containers {
				if c := &s.Spec.Template.Spec.Containers[i]; c.Image == img.Name {
					c.Image = img.NewName + ":" + img.NewTag
				}
			}
		}
	}
	for _, rep := range k.Replicas {
		found := false
		for _, s := range r.statefulSets {
			if s.Metadata.Name == rep.Name {
				s.Spec.Replicas, found = rep.Count, true
			}
		}
		if !found {
			t.Errorf("%s: replicas for %q, which no resource is", dir, rep.Name)
		}
	}
	return r
}

func (r *rendering) add(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var node yaml.Node
		if err := dec.Decode(&node); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		doc, err := yaml.Marshal(&node)
		if err != nil {
			t.Fatal(err)
		}
		var h header
		if err := yaml.Unmarshal(doc, &h); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var v any
		switch h.APIVersion + " " + h.Kind {
		case "apps/v1 StatefulSet":
			s := &statefulSet{}
			r.statefulSets, v = append(r.statefulSets, s), s
		case "v1 Service":
			s := &service{}
			r.services, v = append(r.services, s), s
		case "v1 PersistentVolumeClaim":
			s := &pvc{}
			r.pvcs, v = append(r.pvcs, s), s
		case "networking.k8s.io/v1 Ingress":
			s := &ingress{}
			r.ingresses, v = append(r.ingresses, s), s
		case "monitoring.coreos.com/v1 ServiceMonitor":
			s := &serviceMonitor{}
			r.serviceMonitors, v = append(r.serviceMonitors, s), s
		default:
			t.Fatalf("%s: unexpected %s %s", path, h.APIVersion, h.Kind)
		}
		if err := strict(doc, v); err != nil {
			t.Fatalf("%s: %s %s: %v", path, h.Kind, h.Metadata.Name, err)
		}
		if h.Metadata.Name == "" {
			t.Errorf("%s: %s without a name", path, h.Kind)
		}
	}
}

// flag returns the value of --name=value in args.
func flag(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

func subset(sub, of map[string]string) bool {
	if len(sub) == 0 {
		return false
	}
	for k, v := range sub {
		if of[k] != v {
			return false
		}
	}
	return true
}

func checkBase(t *testing.T, r *rendering) *statefulSet {
	t.Helper()
	if len(r.statefulSets) != 1 {
		t.Fatalf("%d StatefulSets, want 1", len(r.statefulSets))
	}
	s := r.statefulSets[0]
	pod := s.Spec.Template
	if !subset(s.Spec.Selector.MatchLabels, pod.Metadata.Labels) {
		t.Errorf("selector %v does not match the pod labels %v", s.Spec.Selector.MatchLabels, pod.Metadata.Labels)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	if !strings.Contains(c.Image, ":") {
		t.Errorf("image %q has no tag after the kustomization's images", c.Image)
	}

	// Guaranteed QoS: requests equal limits for CPU and memory, whole CPUs.
	for _, res := range []string{"cpu", "memory"} {
		if c.Resources.Requests[res] == "" || c.Resources.Requests[res] != c.Resources.Limits[res] {
			t.Errorf("%s: request %q, limit %q: want equal (Guaranteed QoS)", res, c.Resources.Requests[res], c.Resources.Limits[res])
		}
	}
	if cpu := c.Resources.Limits["cpu"]; strings.ContainsAny(cpu, "m.") {
		t.Errorf("cpu %q: want a whole number of CPUs (static CPU manager)", cpu)
	}
	if th, _ := flag(c.Args, "threads"); th != c.Resources.Limits["cpu"] {
		t.Errorf("--threads %q, cpu limit %q: one worker per CPU the pod owns", th, c.Resources.Limits["cpu"])
	}

	// Probes: readiness on /health (503 while loading), liveness on the port.
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/health" || p.HTTPGet.Port != "http" {
		t.Errorf("readiness probe %+v: want GET /health on the http port", p)
	}
	if p := c.LivenessProbe; p == nil || p.TCPSocket == nil {
		t.Errorf("liveness probe %+v: want a TCP check (an HTTP check on /health fails while loading)", p)
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "http" || c.Ports[0].ContainerPort != 8000 {
		t.Errorf("ports %+v", c.Ports)
	}

	// Graceful termination covers the drain and the preStop pause.
	drain, ok := flag(c.Args, "drain-timeout")
	if !ok {
		t.Fatal("no --drain-timeout in the args")
	}
	d, err := time.ParseDuration(drain)
	if err != nil {
		t.Fatal(err)
	}
	grace := time.Duration(pod.Spec.TerminationGracePeriodSeconds) * time.Second
	if pre := time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second; grace < d+pre+5*time.Second {
		t.Errorf("terminationGracePeriodSeconds %v < drain %v + preStop %v + 5s to write sessions", grace, d, pre)
	}

	// Non-root, read-only root, no privileges.
	sc := pod.Spec.SecurityContext
	if !sc.RunAsNonRoot || sc.RunAsUser == 0 {
		t.Errorf("pod security context %+v: want a non-root user", sc)
	}
	if csc := c.SecurityContext; csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation || !csc.ReadOnlyRootFilesystem ||
		len(csc.Capabilities.Drop) != 1 || csc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("container security context %+v", csc)
	}

	// The model on a read-only volume, the session store on a per-pod PVC,
	// and every mount backed by a volume.
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
		if m.Name == "models" && !m.ReadOnly {
			t.Error("the models volume is mounted read-write")
		}
	}
	model, _ := flag(c.Args, "model-path")
	store, _ := flag(c.Args, "session-store")
	if mounts["models"] == "" || !strings.HasPrefix(model, mounts["models"]) {
		t.Errorf("--model-path %q is not on the models volume (%q)", model, mounts["models"])
	}
	if mounts["sessions"] == "" || !strings.HasPrefix(store, mounts["sessions"]) {
		t.Errorf("--session-store %q is not on the sessions volume (%q)", store, mounts["sessions"])
	}
	volumes := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		volumes[v.Name] = true
		if v.PersistentVolumeClaim != nil {
			found := false
			for _, p := range r.pvcs {
				found = found || p.Metadata.Name == v.PersistentVolumeClaim.ClaimName
			}
			if !found {
				t.Errorf("volume %s claims %q, which no manifest defines", v.Name, v.PersistentVolumeClaim.ClaimName)
			}
		}
	}
	for _, vct := range s.Spec.VolumeClaimTemplates {
		volumes[vct.Metadata.Name] = true
		if len(vct.Spec.AccessModes) == 0 || vct.Spec.Resources.Requests["storage"] == "" {
			t.Errorf("volume claim template %s: %+v", vct.Metadata.Name, vct.Spec)
		}
	}
	for name := range mounts {
		if !volumes[name] {
			t.Errorf("mount %s has no volume", name)
		}
	}

	// Prometheus: the scrape annotations name the port and path served.
	if a := pod.Metadata.Annotations; a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] != "8000" || a["prometheus.io/path"] != "/metrics" {
		t.Errorf("pod annotations %v", a)
	}

	// The Services select the pods; the StatefulSet's governing Service is headless.
	governing := false
	for _, svc := range r.services {
		if !subset(svc.Spec.Selector, pod.Metadata.Labels) {
			t.Errorf("service %s selects %v, not the pods %v", svc.Metadata.Name, svc.Spec.Selector, pod.Metadata.Labels)
		}
		if svc.Metadata.Name == s.Spec.ServiceName && svc.Spec.ClusterIP == "None" {
			governing = true
		}
		for _, p := range svc.Spec.Ports {
			if p.TargetPort != "http" {
				t.Errorf("service %s targets port %q", svc.Metadata.Name, p.TargetPort)
			}
		}
	}
	if !governing {
		t.Errorf("no headless Service %q governs the StatefulSet", s.Spec.ServiceName)
	}
	return s
}

func TestBase(t *testing.T) {
	r := render(t, "base")
	if s := checkBase(t, r); s.Spec.Replicas != 1 {
		t.Errorf("base replicas %d", s.Spec.Replicas)
	}
}

// TestScaleOut: several replicas behind ingress-nginx hashing X-Session-ID
// consistently, streaming unbuffered, scraped by a ServiceMonitor.
func TestScaleOut(t *testing.T) {
	r := render(t, "overlays/scale-out")
	s := checkBase(t, r)
	if s.Spec.Replicas < 2 {
		t.Errorf("scale-out replicas %d", s.Spec.Replicas)
	}
	if len(r.ingresses) != 1 {
		t.Fatalf("%d ingresses", len(r.ingresses))
	}
	ing := r.ingresses[0]
	a := ing.Metadata.Annotations
	if a["nginx.ingress.kubernetes.io/upstream-hash-by"] != "$http_x_session_id" {
		t.Errorf("upstream-hash-by %q: want the X-Session-ID header", a["nginx.ingress.kubernetes.io/upstream-hash-by"])
	}
	if a["nginx.ingress.kubernetes.io/proxy-buffering"] != "off" {
		t.Error("SSE needs proxy-buffering off")
	}
	if ing.Spec.IngressClassName != "nginx" || len(ing.Spec.Rules) == 0 {
		t.Fatalf("ingress spec %+v", ing.Spec)
	}
	names := map[string]bool{}
	for _, svc := range r.services {
		names[svc.Metadata.Name] = svc.Spec.ClusterIP != "None"
	}
	for _, rule := range ing.Spec.Rules {
		for _, p := range rule.HTTP.Paths {
			if !names[p.Backend.Service.Name] || p.Backend.Service.Port.Name != "http" {
				t.Errorf("ingress backend %+v is not a ClusterIP Service's http port", p.Backend.Service)
			}
		}
	}
	if len(r.serviceMonitors) != 1 {
		t.Fatalf("%d ServiceMonitors", len(r.serviceMonitors))
	}
	sm := r.serviceMonitors[0]
	matched := 0
	for _, svc := range r.services {
		if subset(sm.Spec.Selector.MatchLabels, svc.Metadata.Labels) {
			matched++
		}
	}
	if matched != 1 || len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "http" || sm.Spec.Endpoints[0].Path != "/metrics" {
		t.Errorf("ServiceMonitor matches %d services (want 1: each pod scraped once), endpoints %+v", matched, sm.Spec.Endpoints)
	}
}

// TestStrictDecodingCatchesTypos: the check fails on a misplaced key, so a
// passing test means something.
func TestStrictDecodingCatchesTypos(t *testing.T) {
	doc := []byte("apiVersion: v1\nkind: Service\nmetadata:\n  name: x\nspec:\n  selecter:\n    a: b\n")
	if err := strict(doc, &service{}); err == nil {
		t.Error("a misspelt field decoded")
	}
}

// TestDockerfile: CI cannot build the image (no registry for the base), so
// it checks what the manifests rely on: a static build, a non-root user,
// `ellm serve` as entry point, the volumes the StatefulSet mounts.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var froms []string
	var user, entry string
	var env, volumes []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		rest := strings.TrimSpace(strings.TrimPrefix(line, f[0]))
		switch strings.ToUpper(f[0]) {
		case "FROM":
			froms = append(froms, rest)
		case "USER":
			user = rest
		case "ENTRYPOINT":
			entry = rest
		case "ENV":
			env = append(env, f[1:]...)
		case "VOLUME":
			volumes = append(volumes, rest)
		}
	}
	if len(froms) < 2 || !strings.HasSuffix(froms[0], " AS build") || froms[len(froms)-1] != "scratch" {
		t.Errorf("stages %q: want a build stage and a scratch final image", froms)
	}
	if user == "" || strings.HasPrefix(user, "0") || strings.HasPrefix(user, "root") {
		t.Errorf("USER %q: want a non-root user", user)
	}
	if entry != `["ellm", "serve"]` {
		t.Errorf("ENTRYPOINT %s", entry)
	}
	for _, want := range []string{"CGO_ENABLED=0", "GOTOOLCHAIN=go1.27.3"} {
		if !strings.Contains(strings.Join(env, " "), want) {
			t.Errorf("ENV lacks %s", want)
		}
	}
	// The go.mod's toolchain is the one the image builds with.
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mod), "\ngo 1.27.3\n") {
		t.Error("go.mod's go version changed: update GOTOOLCHAIN in the Dockerfile")
	}
	if len(volumes) != 1 || !strings.Contains(volumes[0], `"/models"`) || !strings.Contains(volumes[0], `"/data"`) {
		t.Errorf("VOLUME %q", volumes)
	}
}
