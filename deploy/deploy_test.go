package deploy

import (
	"bufio"
	"bytes"
	"debug/elf"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats-server/v2/server"
	"go.yaml.in/yaml/v3"
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// makeVar is the value of a `NAME ?= value` or `NAME := value` line of the
// Makefile.
func makeVar(t *testing.T, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^(?:export )?` + name + `\s*[?:]?=\s*(\S+)`).FindStringSubmatch(read(t, "../Makefile"))
	if m == nil {
		t.Fatalf("the Makefile sets no %s", name)
	}
	return m[1]
}

var staticDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if staticDir != "" {
		os.RemoveAll(staticDir)
	}
	os.Exit(code)
}

// staticBuild runs `make static` as the Dockerfile does, once.
var staticBuild = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "contextos-static")
	if err != nil {
		return "", err
	}
	staticDir = dir
	cmd := exec.Command("make", "--no-print-directory", "static", "STATIC_DIR="+dir, "VERSION=v0.0.0-deploytest")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", &exec.ExitError{ProcessState: cmd.ProcessState, Stderr: out}
	}
	return dir, nil
})

// TestDockerfile: the image is built on the Go image of the Makefile's
// toolchain by `make static`, and runs those binaries as a non-root user on
// distroless; `make static` makes binaries with no dynamic loader and no
// shared library, no symbol table, no build path, and the stamped version.
func TestDockerfile(t *testing.T) {
	df := read(t, "Dockerfile")
	goVersion := strings.TrimPrefix(makeVar(t, "GOTOOLCHAIN"), "go")
	for _, want := range []string{
		"ARG GO_IMAGE=golang:" + goVersion + "-bookworm\nFROM ${GO_IMAGE} AS build\n",
		"RUN make static VERSION=${VERSION} STATIC_DIR=/out",
		"FROM gcr.io/distroless/static-debian12:nonroot\n",
		"COPY --from=build /out/contextosd /out/ctx /usr/local/bin/\n",
		"USER 65532:65532\n",
		`ENTRYPOINT ["/usr/local/bin/contextosd"]`,
	} {
		if !strings.Contains(df, want) {
			t.Errorf("the Dockerfile lacks %q", want)
		}
	}
	if testing.Short() {
		t.Skip("builds the static binaries")
	}
	dir, err := staticBuild()
	if err != nil {
		t.Fatalf("make static: %v\n%s", err, err.(*exec.ExitError).Stderr)
	}
	repo, _ := filepath.Abs("..")
	for _, name := range []string{"contextosd", "ctx"} {
		bin := filepath.Join(dir, name)
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
				t.Errorf("%s is dynamically linked (%v)", name, p.Type)
			}
		}
		if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
			t.Errorf("%s needs %v", name, libs)
		}
		if f.Section(".symtab") != nil {
			t.Errorf("%s is not stripped", name)
		}
		f.Close()
		if b, _ := os.ReadFile(bin); bytes.Contains(b, []byte(repo+"/")) {
			t.Errorf("%s holds the build path %s (no -trimpath)", name, repo)
		}
	}
	out, err := exec.Command(filepath.Join(dir, "contextosd"), "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "contextosd v0.0.0-deploytest (") {
		t.Errorf("contextosd --version: %q %v", out, err)
	}
}

// docsAuthorization is docs/operations.md's nats-server authorization block.
func docsAuthorization(t *testing.T) string {
	t.Helper()
	s := read(t, "../docs/operations.md")
	i := strings.Index(s, "```conf\n")
	if i < 0 {
		t.Fatal("docs/operations.md has no ```conf block")
	}
	s = s[i+len("```conf\n"):]
	return s[:strings.Index(s, "```")]
}

type composeFile struct {
	Name     string `yaml:"name"`
	Services map[string]struct {
		Image   string `yaml:"image"`
		Command []string
		Build   *struct {
			Context    string `yaml:"context"`
			Dockerfile string `yaml:"dockerfile"`
		} `yaml:"build"`
		Environment map[string]string `yaml:"environment"`
		Volumes     []string          `yaml:"volumes"`
		DependsOn   []string          `yaml:"depends_on"`
		ReadOnly    bool              `yaml:"read_only"`
		Ports       []string          `yaml:"ports"`
		Restart     string            `yaml:"restart"`
		SecurityOpt []string          `yaml:"security_opt"`
		CapDrop     []string          `yaml:"cap_drop"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

// TestCompose: three NATS servers form one JetStream cluster (the
// configuration loads in nats-server, with docs/operations.md's permission
// block verbatim) and two contextosd replicas run the image of
// deploy/Dockerfile on it, with a configuration contextosd accepts whose
// passwords are the servers'.
func TestCompose(t *testing.T) {
	var c composeFile
	dec := yaml.NewDecoder(strings.NewReader(read(t, "compose/compose.yaml")))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	natsImage := "nats:" + strings.TrimPrefix(goModVersion(t, "github.com/nats-io/nats-server/v2"), "v")
	for _, n := range []string{"nats-1", "nats-2", "nats-3"} {
		s, ok := c.Services[n]
		if !ok || s.Image != natsImage || strings.Join(s.Command, " ") != "--config /etc/nats/nats.conf" ||
			s.Environment["NATS_SERVER_NAME"] != n || !contains(s.Volumes, "./nats.conf:/etc/nats/nats.conf:ro") {
			t.Errorf("service %s: %+v", n, s)
		}
	}
	env := c.Services["nats-2"].Environment
	for _, n := range []string{"contextosd-1", "contextosd-2"} {
		s, ok := c.Services[n]
		if !ok || s.Image != "contextos/contextosd:dev" || !s.ReadOnly || len(s.DependsOn) < 3 || s.Restart != "unless-stopped" ||
			!contains(s.Volumes, "./contextosd.toml:/etc/contextos/contextos.toml:ro") || !contains(s.Volumes, "keys:/var/lib/contextos/keys") {
			t.Errorf("service %s: %+v", n, s)
		}
	}
	b := c.Services["contextosd-1"].Build
	if b == nil || b.Dockerfile != "deploy/Dockerfile" {
		t.Fatalf("contextosd-1 build: %+v", b)
	} else if _, err := os.Stat(filepath.Join("compose", b.Context, b.Dockerfile)); err != nil {
		t.Errorf("build context: %v", err)
	}
	if _, ok := c.Volumes["keys"]; !ok {
		t.Error("no keys volume")
	}

	conf := read(t, "compose/nats.conf")
	if !strings.Contains(conf, docsAuthorization(t)) {
		t.Error("compose/nats.conf's authorization is not docs/operations.md's block")
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	opts, err := server.ProcessConfigFile("compose/nats.conf")
	if err != nil {
		t.Fatalf("nats.conf: %v", err)
	}
	if opts.ServerName != "nats-2" || opts.Cluster.Name != "contextos" || len(opts.Routes) != 3 || !opts.JetStream || !opts.SyncAlways {
		t.Errorf("nats.conf: server %q cluster %q routes %d jetstream %v sync always %v", opts.ServerName, opts.Cluster.Name, len(opts.Routes), opts.JetStream, opts.SyncAlways)
	}
	users := map[string]string{}
	for _, u := range opts.Users {
		users[u.Username] = u.Password
	}

	cfg, err := config.Load("compose/contextosd.toml")
	if err != nil {
		t.Fatalf("contextosd.toml: %v", err)
	}
	for _, u := range strings.Split(cfg.NATS.URL, ",") {
		host, _, _ := net.SplitHostPort(strings.TrimPrefix(u, "nats://"))
		if _, ok := c.Services[host]; !ok {
			t.Errorf("nats.url names %s, not a service", host)
		}
	}
	if cfg.NATS.Replicas != 3 || !strings.HasPrefix(cfg.Runtime.KeyFile, "/var/lib/contextos/keys/") {
		t.Errorf("contextosd.toml: replicas %d key_file %s", cfg.NATS.Replicas, cfg.Runtime.KeyFile)
	}
	want := map[string]string{cfg.NATS.User: cfg.NATS.Password, cfg.NATS.ReplyUser: cfg.NATS.ReplyPassword}
	for _, tc := range cfg.Tenants {
		for _, p := range append(tc.Agents, tc.Operators...) {
			want[wire.UserName(tc.ID, p.ID)] = p.Password
		}
	}
	for u, pw := range want {
		if users[u] != pw {
			t.Errorf("user %s: nats.conf password %q, contextosd.toml %q", u, users[u], pw)
		}
	}
}

type manifest struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	StringData map[string]string `yaml:"stringData"`
	Spec       struct {
		Replicas *int `yaml:"replicas"`
		Template struct {
			Spec struct {
				SecurityContext struct {
					RunAsNonRoot bool `yaml:"runAsNonRoot"`
					RunAsUser    int  `yaml:"runAsUser"`
				} `yaml:"securityContext"`
				InitContainers []container `yaml:"initContainers"`
				Containers     []container `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type probe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

type container struct {
	Name  string   `yaml:"name"`
	Image string   `yaml:"image"`
	Args  []string `yaml:"args"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	StartupProbe    *probe `yaml:"startupProbe"`
	LivenessProbe   *probe `yaml:"livenessProbe"`
	ReadinessProbe  *probe `yaml:"readinessProbe"`
	SecurityContext struct {
		ReadOnlyRootFilesystem   bool `yaml:"readOnlyRootFilesystem"`
		AllowPrivilegeEscalation bool `yaml:"allowPrivilegeEscalation"`
	} `yaml:"securityContext"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

// TestKubernetes: the manifests parse; the configuration Secret is one
// contextosd accepts; two non-root replicas with a read-only root run it,
// probed on /healthz and /readyz at the configuration's metrics port, with
// the key where key_file says.
func TestKubernetes(t *testing.T) {
	dec := yaml.NewDecoder(strings.NewReader(read(t, "kubernetes/contextosd.yaml")))
	byKind := map[string]manifest{}
	for {
		var m manifest
		if err := dec.Decode(&m); err != nil {
			if err.Error() == "EOF" {
				break
			}
			t.Fatalf("contextosd.yaml: %v", err)
		}
		byKind[m.Kind] = m
	}
	for _, k := range []string{"Secret", "Deployment", "Service", "PodDisruptionBudget"} {
		if _, ok := byKind[k]; !ok {
			t.Errorf("no %s", k)
		}
	}
	cfg, err := config.Parse([]byte(byKind["Secret"].StringData["contextos.toml"]))
	if err != nil {
		t.Fatalf("the configuration Secret: %v", err)
	}
	_, metricsPort, _ := net.SplitHostPort(cfg.Runtime.MetricsListen)
	d := byKind["Deployment"].Spec
	if d.Replicas == nil || *d.Replicas != 2 || !d.Template.Spec.SecurityContext.RunAsNonRoot || d.Template.Spec.SecurityContext.RunAsUser == 0 {
		t.Errorf("deployment: %+v", d)
	}
	if len(d.Template.Spec.Containers) != 1 {
		t.Fatalf("containers: %+v", d.Template.Spec.Containers)
	}
	c := d.Template.Spec.Containers[0]
	if len(c.Ports) != 1 || c.Ports[0].Name != "metrics" || itoa(c.Ports[0].ContainerPort) != metricsPort {
		t.Errorf("ports %+v, metrics_listen %s", c.Ports, cfg.Runtime.MetricsListen)
	}
	for name, p := range map[string]struct {
		probe *probe
		path  string
	}{"startup": {c.StartupProbe, "/healthz"}, "liveness": {c.LivenessProbe, "/healthz"}, "readiness": {c.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port != "metrics" {
			t.Errorf("%s probe: %+v", name, p.probe)
		}
	}
	if !c.SecurityContext.ReadOnlyRootFilesystem || c.SecurityContext.AllowPrivilegeEscalation {
		t.Errorf("container security: %+v", c.SecurityContext)
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m.Name
	}
	if mounts[filepath.Dir(cfg.Runtime.KeyFile)] != "keys" || mounts["/etc/contextos"] != "config" || strings.Join(c.Args, " ") != "--config /etc/contextos/contextos.toml" {
		t.Errorf("mounts %v, args %v, key_file %s", mounts, c.Args, cfg.Runtime.KeyFile)
	}
	if len(d.Template.Spec.InitContainers) != 1 || d.Template.Spec.InitContainers[0].Name != "install-key" {
		t.Errorf("init containers: %+v", d.Template.Spec.InitContainers)
	}
}

// TestSystemdUnit: the unit checks the configuration before it starts the
// daemon, runs it as its own user with a private state directory, and
// (where systemd-analyze is installed) verifies.
func TestSystemdUnit(t *testing.T) {
	unit := read(t, "systemd/contextosd.service")
	keys := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(unit))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			keys[k] = v
		}
	}
	for k, v := range map[string]string{
		"ExecStartPre":    "/usr/local/bin/contextosd --check-config /etc/contextos/contextos.toml --offline",
		"ExecStart":       "/usr/local/bin/contextosd --config /etc/contextos/contextos.toml",
		"User":            "contextos",
		"StateDirectory":  "contextos",
		"NoNewPrivileges": "yes",
		"KillSignal":      "SIGTERM",
		"WantedBy":        "multi-user.target",
	} {
		if keys[k] != v {
			t.Errorf("%s=%q, want %q", k, keys[k], v)
		}
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil || testing.Short() {
		t.Log("systemd-analyze verify not run")
		return
	}
	dir, err := staticBuild()
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(t.TempDir(), "contextosd.service")
	if err := os.WriteFile(copyPath, []byte(strings.ReplaceAll(unit, "/usr/local/bin/contextosd", filepath.Join(dir, "contextosd"))), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", copyPath).CombinedOutput()
	if err != nil || strings.Contains(string(out), "contextosd.service:") {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

func goModVersion(t *testing.T, module string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(module) + `\s+(v\S+)`).FindStringSubmatch(read(t, "../go.mod"))
	if m == nil {
		t.Fatalf("go.mod requires no %s", module)
	}
	return m[1]
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func itoa(n int) string {
	b := []byte{}
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}
