package check

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// manifests are the decoded objects of kubernetes/*.yaml, by kind and name.
type manifests struct {
	statefulSet *appsv1.StatefulSet
	services    map[string]*corev1.Service
	configMaps  map[string]*corev1.ConfigMap
	secrets     map[string]*corev1.Secret
	pdb         *policyv1.PodDisruptionBudget
}

// loadManifests decodes every document strictly: a field the Kubernetes
// API type does not have (a typo, a wrong level) or a duplicate key fails,
// as `kubectl apply --validate=strict` would.
func loadManifests(t *testing.T) manifests {
	t.Helper()
	m := manifests{services: map[string]*corev1.Service{}, configMaps: map[string]*corev1.ConfigMap{},
		secrets: map[string]*corev1.Secret{}}
	files, err := filepath.Glob(filepath.Join(deployDir, "kubernetes", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		r := k8syaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
		for i := 0; ; i++ {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			if len(bytes.TrimSpace(stripComments(doc))) == 0 {
				continue
			}
			where := fmt.Sprintf("%s document %d", filepath.Base(f), i+1)
			var head struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			require.NoError(t, yaml.Unmarshal(doc, &head), where)
			var obj any
			switch head.APIVersion + " " + head.Kind {
			case "apps/v1 StatefulSet":
				require.Nil(t, m.statefulSet, "%s: one StatefulSet", where)
				m.statefulSet = &appsv1.StatefulSet{}
				obj = m.statefulSet
			case "v1 Service":
				s := &corev1.Service{}
				obj = s
				defer func() { m.services[s.Name] = s }()
			case "v1 ConfigMap":
				c := &corev1.ConfigMap{}
				obj = c
				defer func() { m.configMaps[c.Name] = c }()
			case "v1 Secret":
				s := &corev1.Secret{}
				obj = s
				defer func() { m.secrets[s.Name] = s }()
			case "policy/v1 PodDisruptionBudget":
				m.pdb = &policyv1.PodDisruptionBudget{}
				obj = m.pdb
			default:
				t.Fatalf("%s: unexpected %s %s", where, head.APIVersion, head.Kind)
			}
			require.NoError(t, yaml.UnmarshalStrict(doc, obj), where)
		}
	}
	return m
}

func stripComments(doc []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line...)
		}
	}
	return out
}

// A typo in a manifest is refused: the strict decode is what guards them.
func TestStrictDecodeRefusesUnknownFields(t *testing.T) {
	t.Parallel()
	var ss appsv1.StatefulSet
	err := yaml.UnmarshalStrict([]byte("apiVersion: apps/v1\nkind: StatefulSet\nspec:\n  replica: 3\n"), &ss)
	require.ErrorContains(t, err, `unknown field "replica"`)
}

func TestKubernetesManifests(t *testing.T) {
	t.Parallel()
	m := loadManifests(t)
	ss := m.statefulSet
	require.NotNil(t, ss)
	require.NotNil(t, m.pdb)

	// Three voters, all started at once (after a full restart a lone
	// herald-0 could never be ready), behind the headless Service.
	require.Equal(t, int32(3), *ss.Spec.Replicas)
	require.Equal(t, appsv1.ParallelPodManagement, ss.Spec.PodManagementPolicy)
	headless := m.services[ss.Spec.ServiceName]
	require.NotNil(t, headless, "the StatefulSet's serviceName %q is one of the Services", ss.Spec.ServiceName)
	require.Equal(t, corev1.ClusterIPNone, headless.Spec.ClusterIP)
	require.True(t, headless.Spec.PublishNotReadyAddresses, "members must resolve each other before they are ready")
	podLabels := ss.Spec.Template.Labels
	require.Equal(t, ss.Spec.Selector.MatchLabels, podLabels)
	for name, svc := range m.services {
		for k, v := range svc.Spec.Selector {
			require.Equal(t, v, podLabels[k], "Service %s selects the pods", name)
		}
	}
	require.Equal(t, podLabels, m.pdb.Spec.Selector.MatchLabels)
	require.NotNil(t, m.pdb.Spec.MaxUnavailable)
	require.Equal(t, intstr.FromInt32(1), *m.pdb.Spec.MaxUnavailable, "three voters survive one member down, not two")

	pod := ss.Spec.Template.Spec
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	require.True(t, *pod.SecurityContext.RunAsNonRoot)
	require.Equal(t, int64(10001), *pod.SecurityContext.RunAsUser, "the Dockerfile's herald user")
	require.False(t, *c.SecurityContext.AllowPrivilegeEscalation)

	// The config the pods run with, and the variables that complete it.
	cfgPath := configPath(t, c)
	mounts := mountsOf(t, pod, c)
	cm := mounts[filepath.Dir(cfgPath)].ConfigMap
	require.NotNil(t, cm, "the --config file %s comes from a ConfigMap", cfgPath)
	cfgText, ok := m.configMaps[cm.Name].Data[filepath.Base(cfgPath)]
	require.True(t, ok, "ConfigMap %s has %s", cm.Name, filepath.Base(cfgPath))
	var cfg struct {
		DataDir  string `json:"data_dir"`
		HTTPAddr string `json:"http_addr"`
		Rules    string `json:"rules"`
		TLSCA    string `json:"tls_ca"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(cfgText), &cfg))
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			env[e.Name] = "(" + e.ValueFrom.FieldRef.FieldPath + ")"
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			sec := m.secrets[ref.Name]
			require.NotNil(t, sec, "%s: Secret %s", e.Name, ref.Name)
			_, ok := sec.StringData[ref.Key]
			require.True(t, ok, "%s: Secret %s has key %s", e.Name, ref.Name, ref.Key)
			env[e.Name] = "(secret)"
		default:
			require.Nil(t, e.ValueFrom, e.Name)
			env[e.Name] = e.Value
		}
	}
	checkEnv(t, "statefulset.yaml", env, cfgText, agentEnv(t))
	require.Equal(t, "(metadata.name)", env["HERALD_NODE_ID"], "node_id is the pod's name")
	require.Equal(t, "(metadata.namespace)", env["POD_NAMESPACE"])

	// Stable DNS Raft addresses: the pod's name under the headless
	// Service, which Raft stores and dials as written.
	raftHost, raftP := splitPort(t, env["HERALD_RAFT_ADDR"])
	require.Equal(t, "$(HERALD_NODE_ID)."+headless.Name+".$(POD_NAMESPACE).svc.cluster.local", raftHost)
	require.Equal(t, raftPort, raftP)
	httpHost, httpP := splitPort(t, cfg.HTTPAddr)
	require.Equal(t, "0.0.0.0", httpHost, "listen everywhere; advertised as raft_addr's host")
	require.Equal(t, httpPort, httpP)
	for _, p := range strings.Split(env["HERALD_PEERS"], ",") {
		host, port := splitPort(t, p)
		require.Equal(t, httpPort, port)
		require.Regexp(t, `^herald-[12]\.`+headless.Name+`\.\$\(POD_NAMESPACE\)\.svc\.cluster\.local$`, host)
	}
	require.Contains(t, c.Args[0], "https://herald-0."+headless.Name+".$POD_NAMESPACE.svc.cluster.local:"+strconv.Itoa(httpPort),
		"herald-1 and herald-2 join herald-0's API")

	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	require.Equal(t, map[string]int32{"raft": raftPort, "http": httpPort}, ports)
	for name, svc := range m.services {
		for _, p := range svc.Spec.Ports {
			require.Contains(t, ports, p.TargetPort.String(), "Service %s port %s", name, p.Name)
			require.Equal(t, ports[p.TargetPort.String()], p.Port, "Service %s port %s", name, p.Name)
		}
	}

	// Probes on the public health endpoints, over TLS since tls_ca is set.
	require.NotEmpty(t, cfg.TLSCA)
	for _, pr := range []struct {
		probe *corev1.Probe
		path  string
	}{{c.LivenessProbe, "/v1/health"}, {c.StartupProbe, "/v1/health"}, {c.ReadinessProbe, "/v1/ready"}} {
		require.NotNil(t, pr.probe)
		g := pr.probe.HTTPGet
		require.NotNil(t, g)
		require.Equal(t, pr.path, g.Path)
		require.Equal(t, "http", g.Port.String())
		require.Equal(t, corev1.URISchemeHTTPS, g.Scheme)
		require.Empty(t, g.HTTPHeaders, "the health endpoints need no token")
	}

	// Volumes where the config points: the data dir on the claim, the
	// rules and the certificates of every pod.
	require.Len(t, ss.Spec.VolumeClaimTemplates, 1)
	require.Equal(t, ss.Spec.VolumeClaimTemplates[0].Name, mountName(t, c, cfg.DataDir))
	require.NotNil(t, mounts[cfg.Rules].ConfigMap)
	rules := m.configMaps[mounts[cfg.Rules].ConfigMap.Name]
	require.NotNil(t, rules)
	tlsDir := filepath.Dir(cfg.TLSCA)
	require.NotNil(t, mounts[tlsDir].Secret)
	tlsSecret := m.secrets[mounts[tlsDir].Secret.SecretName]
	require.NotNil(t, tlsSecret)
	require.Equal(t, tlsDir+"/$(HERALD_NODE_ID).pem", env["HERALD_TLS_CERT"])
	require.Equal(t, tlsDir+"/$(HERALD_NODE_ID)-key.pem", env["HERALD_TLS_KEY"])
	want := []string{filepath.Base(cfg.TLSCA)}
	for i := range int(*ss.Spec.Replicas) {
		want = append(want, fmt.Sprintf("herald-%d.pem", i), fmt.Sprintf("herald-%d-key.pem", i))
	}
	require.ElementsMatch(t, want, keysOf(tlsSecret.StringData))
	// Secrets ship empty: an agent refuses empty tokens and secrets, so
	// applying the file unchanged cannot run a cluster with known ones.
	for _, s := range m.secrets {
		for k, v := range s.StringData {
			require.Empty(t, v, "Secret %s key %s", s.Name, k)
		}
	}

	// The rules are compose's: one example, kept in step.
	for name, text := range rules.Data {
		b, err := os.ReadFile(filepath.Join(deployDir, "compose", "rules", name))
		require.NoError(t, err)
		require.Equal(t, string(b), text, "kubernetes/configmap.yaml herald-rules %s and compose/rules/%s", name, name)
	}
}

// configPath is the --config the container's start script passes.
func configPath(t *testing.T, c corev1.Container) string {
	t.Helper()
	require.Equal(t, []string{"/bin/sh", "-c"}, c.Command)
	require.Len(t, c.Args, 1)
	fields := strings.Fields(c.Args[0])
	for i, f := range fields {
		if f == "--config" && i+1 < len(fields) {
			return fields[i+1]
		}
	}
	t.Fatalf("no --config in %q", c.Args[0])
	return ""
}

func mountsOf(t *testing.T, pod corev1.PodSpec, c corev1.Container) map[string]corev1.VolumeSource {
	t.Helper()
	vols := map[string]corev1.VolumeSource{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v.VolumeSource
	}
	out := map[string]corev1.VolumeSource{}
	for _, vm := range c.VolumeMounts {
		out[vm.MountPath] = vols[vm.Name]
	}
	return out
}

func mountName(t *testing.T, c corev1.Container, path string) string {
	t.Helper()
	for _, vm := range c.VolumeMounts {
		if vm.MountPath == path {
			return vm.Name
		}
	}
	t.Fatalf("nothing mounted at %s", path)
	return ""
}

func splitPort(t *testing.T, addr string) (string, int) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err, addr)
	p, err := strconv.Atoi(port)
	require.NoError(t, err, addr)
	return host, p
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
