// Tests of the deploy artifacts: the systemd unit (systemd-analyze verify),
// install.sh into a temporary root, the container recipe and quadlet, the
// Helm chart (helm lint when helm is there, else a render with the few
// template functions the chart uses) and the release builds.
package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"debug/macho"
	"debug/pe"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"text/template"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/switchboard-mcp/switchboard/internal/config"
)

var built struct {
	once sync.Once
	dir  string
	err  error
	out  []byte
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// switchboardBinary builds cmd/switchboard once per test run.
func switchboardBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the switchboard binary; skipped with -short")
	}
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "switchboard-deploy-"); built.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(built.dir, "switchboard"), "../cmd/switchboard")
		built.out, built.err = cmd.CombinedOutput()
	})
	if built.err != nil {
		t.Fatalf("go build: %v\n%s", built.err, built.out)
	}
	return filepath.Join(built.dir, "switchboard")
}

// unitFile parses a systemd unit (or quadlet) file: section → key → values
// in order.
func unitFile(t *testing.T, path string) map[string]map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := map[string]map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[' && line[len(line)-1] == ']':
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: not key=value in a section: %q", path, n, line)
			}
			u[section][k] = append(u[section][k], v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestSystemdUnit: the unit has the hardening and the settings Switchboard
// needs, and systemd-analyze verify accepts it (with ExecStart pointing at
// a real binary: verify checks that it is executable).
func TestSystemdUnit(t *testing.T) {
	const path = "systemd/switchboard.service"
	u := unitFile(t, path)
	svc := u["Service"]
	for key, want := range map[string]string{
		"ExecStart":              "/usr/local/bin/switchboard serve --config /etc/switchboard/switchboard.yaml",
		"ExecReload":             "/bin/kill -HUP $MAINPID",
		"Restart":                "on-failure",
		"KillMode":               "mixed", // SIGTERM to Switchboard alone: it stops its children itself
		"DynamicUser":            "yes",
		"ProtectSystem":          "strict",
		"ProtectHome":            "yes",
		"NoNewPrivileges":        "yes",
		"PrivateTmp":             "yes",
		"StateDirectory":         "switchboard",
		"CacheDirectory":         "switchboard",
		"LogsDirectory":          "switchboard",
		"ConfigurationDirectory": "switchboard",
		"LimitNOFILE":            "65536",
	} {
		if got := svc[key]; len(got) != 1 || got[0] != want {
			t.Errorf("%s: %s=%q, want %q", path, key, got, want)
		}
	}
	if !slices.Contains(svc["Environment"], "NPM_CONFIG_CACHE=%C/switchboard/npm") {
		t.Errorf("%s: no Environment=NPM_CONFIG_CACHE=%%C/switchboard/npm (npx children need a cache): %q", path, svc["Environment"])
	}
	if _, ok := svc["MemoryDenyWriteExecute"]; ok {
		t.Errorf("%s: MemoryDenyWriteExecute breaks node's JIT (npx servers)", path)
	}
	if got := u["Install"]["WantedBy"]; !slices.Equal(got, []string{"multi-user.target"}) {
		t.Errorf("%s: WantedBy=%q", path, got)
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed: verify skipped")
	}
	bin := switchboardBinary(t)
	verifyUnit(t, analyze, path, bin)
}

// verifyUnit runs systemd-analyze verify on a copy of the unit at src whose
// /usr/local/bin/switchboard is bin; any complaint fails the test.
func verifyUnit(t *testing.T, analyze, src, bin string) {
	t.Helper()
	text, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(text, []byte("ExecStart=/usr/local/bin/switchboard ")) {
		t.Fatalf("%s: ExecStart does not start with /usr/local/bin/switchboard", src)
	}
	dst := filepath.Join(t.TempDir(), "switchboard.service")
	text = bytes.ReplaceAll(text, []byte("/usr/local/bin/switchboard"), []byte(bin))
	if err := os.WriteFile(dst, text, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", "--man=no", dst).CombinedOutput()
	var complaints []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "switchboard.service") {
			complaints = append(complaints, l)
		}
	}
	if err != nil || len(complaints) > 0 {
		t.Errorf("systemd-analyze verify %s: %v\n%s", src, err, out)
	}
}

// tree lists every file and symlink under root with its mode and SHA-256.
func tree(t *testing.T, root string) []string {
	t.Helper()
	var list []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(path)
			list = append(list, fmt.Sprintf("%s -> %s", rel, target))
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		list = append(list, fmt.Sprintf("%s %v %x", rel, info.Mode(), sum[:8]))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// installSh runs deploy/install.sh into destdir (never into /).
func installSh(t *testing.T, destdir string, env []string, args ...string) (string, error) {
	t.Helper()
	if destdir == "" || destdir == "/" {
		t.Fatalf("install.sh into %q: tests install into a temporary root only", destdir)
	}
	cmd := exec.Command("bash", append([]string{"install.sh"}, args...)...)
	cmd.Env = append(append(os.Environ(), "DESTDIR="+destdir, "PREFIX="), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func files(list []string) []string {
	var names []string
	for _, l := range list {
		name, _, _ := strings.Cut(l, " ")
		names = append(names, name)
	}
	return names
}

// TestInstallScript: install.sh into a temporary root twice (the second run
// changes nothing), keeps an edited config, uninstalls to the config alone,
// and purges to nothing; PREFIX moves the binary and the unit's ExecStart.
func TestInstallScript(t *testing.T) {
	bin := switchboardBinary(t)
	root := t.TempDir()

	out, err := installSh(t, root, nil, bin)
	if err != nil {
		t.Fatalf("install.sh: %v\n%s", err, out)
	}
	first := tree(t, root)
	if want := []string{"etc/switchboard/switchboard.yaml", "etc/systemd/system/switchboard.service", "usr/local/bin/switchboard"}; !slices.Equal(files(first), want) {
		t.Fatalf("installed files %q, want %q\n%s", first, want, out)
	}
	for _, l := range first {
		if name, mode, _ := strings.Cut(l, " "); (name == "usr/local/bin/switchboard") != strings.HasPrefix(mode, "-rwxr-xr-x") {
			t.Errorf("installed %s", l)
		}
	}
	if !strings.Contains(out, "switchboard.yaml: ok") {
		t.Errorf("install.sh did not check the config it installed:\n%s", out)
	}
	unit, _ := os.ReadFile(filepath.Join(root, "etc/systemd/system/switchboard.service"))
	repoUnit, _ := os.ReadFile("systemd/switchboard.service")
	if !bytes.Equal(unit, repoUnit) {
		t.Errorf("the installed unit differs from deploy/systemd/switchboard.service with the default PREFIX")
	}
	if analyze, err := exec.LookPath("systemd-analyze"); err == nil {
		verifyUnit(t, analyze, filepath.Join(root, "etc/systemd/system/switchboard.service"),
			filepath.Join(root, "usr/local/bin/switchboard"))
	}

	out, err = installSh(t, root, nil, bin)
	if err != nil {
		t.Fatalf("install.sh, again: %v\n%s", err, out)
	}
	if second := tree(t, root); !slices.Equal(first, second) {
		t.Errorf("the second install changed the tree:\n%q\n%q", first, second)
	}
	if strings.Contains(out, "installed ") || !strings.Contains(out, "unchanged") {
		t.Errorf("the second install says it installed something:\n%s", out)
	}

	// An edited config is kept.
	cfg := filepath.Join(root, "etc/switchboard/switchboard.yaml")
	edited := []byte("listen: 127.0.0.1:9999\n")
	if err := os.WriteFile(cfg, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err = installSh(t, root, nil, bin); err != nil {
		t.Fatalf("install.sh over an edited config: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(cfg); !bytes.Equal(b, edited) {
		t.Errorf("install.sh overwrote an existing config: %q", b)
	}

	out, err = installSh(t, root, nil, "--uninstall")
	if err != nil {
		t.Fatalf("install.sh --uninstall: %v\n%s", err, out)
	}
	if got := files(tree(t, root)); !slices.Equal(got, []string{"etc/switchboard/switchboard.yaml"}) {
		t.Errorf("after --uninstall: %q, want the config alone", got)
	}
	if out, err = installSh(t, root, nil, "--uninstall", "--purge"); err != nil {
		t.Fatalf("install.sh --uninstall --purge: %v\n%s", err, out)
	}
	if got := tree(t, root); len(got) != 0 {
		t.Errorf("after --uninstall --purge: %q, want nothing", got)
	}
	if out, err = installSh(t, root, nil, "--uninstall", "--purge"); err != nil {
		t.Errorf("install.sh --uninstall --purge on nothing: %v\n%s", err, out)
	}

	// PREFIX.
	other := t.TempDir()
	if out, err := installSh(t, other, []string{"PREFIX=/opt/switchboard"}, bin); err != nil {
		t.Fatalf("install.sh with PREFIX: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(other, "opt/switchboard/bin/switchboard")); err != nil {
		t.Error(err)
	}
	unit, _ = os.ReadFile(filepath.Join(other, "etc/systemd/system/switchboard.service"))
	if !bytes.Contains(unit, []byte("\nExecStart=/opt/switchboard/bin/switchboard serve ")) || bytes.Contains(unit, []byte("/usr/local/bin")) {
		t.Errorf("the unit installed with PREFIX=/opt/switchboard:\n%s", unit)
	}

	// Usage errors.
	for _, args := range [][]string{{"--purge"}, {"--frobnicate"}, {"a", "b"}} {
		if out, err := installSh(t, other, nil, args...); err == nil || !strings.Contains(out, "install.sh: ") {
			t.Errorf("install.sh %q: %v\n%s", args, err, out)
		}
	}
	if out, err := installSh(t, other, nil, filepath.Join(other, "missing")); err == nil || !strings.Contains(out, "is not an executable file") {
		t.Errorf("install.sh with a missing binary: %v\n%s", err, out)
	}
}

// TestShellScripts: bash -n always, shellcheck when it is installed (CI
// installs it).
func TestShellScripts(t *testing.T) {
	scripts := []string{"install.sh", "../scripts/release.sh"}
	for _, s := range scripts {
		if out, err := exec.Command("bash", "-n", s).CombinedOutput(); err != nil {
			t.Errorf("bash -n %s: %v\n%s", s, err, out)
		}
	}
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Skip("shellcheck not installed")
	}
	if out, err := exec.Command(sc, scripts...).CombinedOutput(); err != nil {
		t.Errorf("shellcheck: %v\n%s", err, out)
	}
}

// TestExampleConfigs: the configs deploy installs are valid.
func TestExampleConfigs(t *testing.T) {
	for _, p := range []string{"switchboard.yaml", "container/switchboard.yaml"} {
		cfg, err := config.Load(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if p == "switchboard.yaml" && cfg.Listen != "127.0.0.1:8080" {
			t.Errorf("%s: listen %s, want loopback", p, cfg.Listen)
		}
		if p == "container/switchboard.yaml" && cfg.Listen != "0.0.0.0:8080" {
			t.Errorf("%s: listen %s, want 0.0.0.0:8080 (the published port)", p, cfg.Listen)
		}
	}
}

// TestContainerfile: the targets, the static build and the version stamp.
func TestContainerfile(t *testing.T) {
	for _, p := range []string{"container/Containerfile", "agentcore/Containerfile"} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-X github.com/switchboard-mcp/switchboard/internal/buildinfo.version=$VERSION", "./cmd/switchboard"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s: no %q", p, want)
			}
		}
		if p != "container/Containerfile" {
			continue
		}
		stages := regexp.MustCompile(`(?m)^FROM \S+(?: \S+)* AS (\w+)$`).FindAllStringSubmatch(text, -1)
		var names []string
		for _, s := range stages {
			names = append(names, s[1])
		}
		if !slices.Equal(names, []string{"build", "uv", "tini", "node", "base"}) {
			t.Errorf("%s: stages %q, want build, uv, tini, node and base (the default, last)", p, names)
		}
		for _, want := range []string{"FROM node:22-", "gcr.io/distroless/static", "tini", "/uvx", `CMD ["serve", "--config", "/etc/switchboard/switchboard.yaml"]`, "switchboard\", \"health\"]"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s: no %q", p, want)
			}
		}
	}
}

// TestQuadlet: the quadlet publishes the port, mounts the config, checks
// /health and updates itself.
func TestQuadlet(t *testing.T) {
	const path = "container/switchboard.container"
	u := unitFile(t, path)
	c := u["Container"]
	for key, want := range map[string]string{
		"Image":       "localhost/switchboard:node",
		"AutoUpdate":  "local",
		"PublishPort": "127.0.0.1:8080:8080",
		"HealthCmd":   "switchboard health",
		"ReadOnly":    "true",
	} {
		if got := c[key]; len(got) != 1 || got[0] != want {
			t.Errorf("%s: %s=%q, want %q", path, key, got, want)
		}
	}
	if !slices.Contains(c["Volume"], "/etc/switchboard:/etc/switchboard:ro,Z") || !slices.Contains(c["Volume"], "switchboard-cache:/cache") {
		t.Errorf("%s: Volume=%q", path, c["Volume"])
	}
	if got := u["Service"]["ExecReload"]; len(got) != 1 || !strings.Contains(got[0], "--signal HUP switchboard") {
		t.Errorf("%s: ExecReload=%q", path, got)
	}
	// With podman's quadlet generator installed, it must accept the file.
	for _, gen := range []string{"/usr/libexec/podman/quadlet", "/usr/lib/podman/quadlet"} {
		if _, err := os.Stat(gen); err != nil {
			continue
		}
		dir := t.TempDir()
		b, _ := os.ReadFile(path)
		if err := os.WriteFile(filepath.Join(dir, "switchboard.container"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(gen, "-dryrun")
		cmd.Env = append(os.Environ(), "QUADLET_UNIT_DIRS="+dir)
		out, err := cmd.CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte("ExecStart=")) {
			t.Errorf("%s -dryrun: %v\n%s", gen, err, out)
		}
	}
}

// TestHelmChart: helm lint and helm template when helm is installed; else
// Chart.yaml and values.yaml parse, every .Values reference exists, the
// templates render (text/template with the chart's few Sprig functions)
// into Kubernetes objects, and values.config is a valid Switchboard config.
func TestHelmChart(t *testing.T) {
	const chart = "helm/switchboard"
	if helm, err := exec.LookPath("helm"); err == nil {
		for _, args := range [][]string{{"lint", "--strict", chart}, {"template", "sb", chart}} {
			if out, err := exec.Command(helm, args...).CombinedOutput(); err != nil {
				t.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
	}

	var meta struct {
		APIVersion string `yaml:"apiVersion"`
		Name       string `yaml:"name"`
		Version    string `yaml:"version"`
		AppVersion string `yaml:"appVersion"`
	}
	readYAML(t, filepath.Join(chart, "Chart.yaml"), &meta)
	if meta.APIVersion != "v2" || meta.Name != "switchboard" || !regexp.MustCompile(`^\d+\.\d+\.\d+`).MatchString(meta.Version) {
		t.Errorf("Chart.yaml: %+v", meta)
	}
	var values map[string]any
	readYAML(t, filepath.Join(chart, "values.yaml"), &values)

	// Every .Values.a.b the templates use is in values.yaml.
	templates, err := filepath.Glob(filepath.Join(chart, "templates", "*"))
	if err != nil || len(templates) == 0 {
		t.Fatalf("no templates: %v", err)
	}
	ref := regexp.MustCompile(`\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)`)
	for _, p := range templates {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ref.FindAllStringSubmatch(string(b), -1) {
			var v any = values
			for _, k := range strings.Split(m[1][1:], ".") {
				mv, ok := v.(map[string]any)
				if !ok {
					t.Errorf("%s: %s: %s is not a map in values.yaml", p, m[0], k)
					break
				}
				if v, ok = mv[k]; !ok {
					t.Errorf("%s: %s: no %s in values.yaml", p, m[0], k)
					break
				}
			}
		}
	}

	// values.config is what the ConfigMap holds: a valid config.
	cfgText, err := yaml.Marshal(values["config"])
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(t.TempDir(), "switchboard.yaml")
	if err := os.WriteFile(cfgPath, cfgText, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(cfgPath); err != nil {
		t.Errorf("values.yaml config: %v\n%s", err, cfgText)
	}

	objs := renderChart(t, chart, meta.Name, meta.Version, meta.AppVersion, values)
	kinds := map[string]map[string]any{}
	for _, o := range objs {
		kind, _ := o["kind"].(string)
		kinds[kind] = o
	}
	for _, k := range []string{"Deployment", "Service", "ConfigMap"} {
		if kinds[k] == nil {
			t.Fatalf("rendered chart has no %s: %v", k, objs)
		}
	}
	// Cluster mode is off by default: no PodDisruptionBudget, no Redis, one
	// replica, the single-process grace period.
	if len(objs) != 3 {
		t.Errorf("the default render has %d objects, want the Deployment, Service and ConfigMap alone: %v", len(objs), objs)
	}
	if got := dig(t, kinds["Deployment"], "spec", "replicas"); got != 1 {
		t.Errorf("replicas %v, want 1", got)
	}
	if got := dig(t, kinds["Deployment"], "spec", "template", "spec", "terminationGracePeriodSeconds"); got != 30 {
		t.Errorf("terminationGracePeriodSeconds %v, want 30", got)
	}
	// The ConfigMap's switchboard.yaml is values.config.
	cm := kinds["ConfigMap"]["data"].(map[string]any)["switchboard.yaml"].(string)
	var cmCfg, valCfg any
	_ = yaml.Unmarshal([]byte(cm), &cmCfg)
	_ = yaml.Unmarshal(cfgText, &valCfg)
	if fmt.Sprint(cmCfg) != fmt.Sprint(valCfg) {
		t.Errorf("ConfigMap switchboard.yaml:\n%s\nwant values.config:\n%s", cm, cfgText)
	}
	// The container: probes, security context, args, mounts.
	spec := dig(t, kinds["Deployment"], "spec", "template", "spec").(map[string]any)
	c := spec["containers"].([]any)[0].(map[string]any)
	for path, want := range map[string]any{
		"livenessProbe.httpGet.path":               "/health",
		"readinessProbe.httpGet.path":              "/healthz",
		"securityContext.readOnlyRootFilesystem":   true,
		"securityContext.allowPrivilegeEscalation": false,
		"image": "localhost/switchboard:node",
	} {
		if got := dig(t, c, strings.Split(path, ".")...); got != want {
			t.Errorf("container %s = %v, want %v", path, got, want)
		}
	}
	if got := dig(t, spec, "securityContext", "runAsNonRoot"); got != true {
		t.Errorf("pod securityContext.runAsNonRoot = %v", got)
	}
	if got := fmt.Sprint(c["args"]); got != "[serve --config /etc/switchboard/switchboard.yaml --log-format json]" {
		t.Errorf("args %s", got)
	}
	var mounts []string
	for _, m := range c["volumeMounts"].([]any) {
		mounts = append(mounts, m.(map[string]any)["mountPath"].(string))
	}
	if !slices.Equal(mounts, []string{"/etc/switchboard", "/cache", "/tmp"}) {
		t.Errorf("volume mounts %q", mounts)
	}

	// With a secret: SECRETS_CONFIG and its mount.
	values["secrets"] = map[string]any{"existingSecret": "sb-secrets"}
	objs = renderChart(t, chart, meta.Name, meta.Version, meta.AppVersion, values)
	for _, o := range objs {
		if o["kind"] == "Deployment" {
			c := dig(t, o, "spec", "template", "spec", "containers").([]any)[0].(map[string]any)
			if got := fmt.Sprint(c["env"]); !strings.Contains(got, "SECRETS_CONFIG") || !strings.Contains(fmt.Sprint(c["volumeMounts"]), "/etc/switchboard-secrets") {
				t.Errorf("with a secret: env %s, mounts %v", got, c["volumeMounts"])
			}
		}
	}
}

// TestHelmChartCluster: with cluster.enabled (three replicas, the keys
// from a Secret, the in-chart Redis with a password from a Secret) the
// chart adds a PodDisruptionBudget over exactly Switchboard's pods,
// readiness on /readyz, a grace period above the drain, the pod's name and
// IP and the Redis password in the environment, the keys Secret mounted
// where the config's keys_file points, and a Redis whose Service the
// config's URL names; the ConfigMap's config is values.config plus that
// cluster block, and internal/config loads it (what switchboard check
// does). With an external URL there is no in-chart Redis; bad values fail
// the render with a message naming the value.
func TestHelmChartCluster(t *testing.T) {
	const chart = "helm/switchboard"
	var meta struct{ Name, Version, AppVersion string }
	readYAML(t, filepath.Join(chart, "Chart.yaml"), &meta)
	values := func(set func(v map[string]any)) map[string]any {
		var v map[string]any
		readYAML(t, filepath.Join(chart, "values.yaml"), &v)
		cl := v["cluster"].(map[string]any)
		cl["enabled"] = true
		cl["keysSecret"] = "sb-cluster-keys"
		v["replicaCount"] = 3
		set(v)
		return v
	}
	redis := func(v map[string]any) map[string]any { return v["cluster"].(map[string]any)["redis"].(map[string]any) }
	byName := func(objs []map[string]any) map[string]map[string]any {
		m := map[string]map[string]any{}
		for _, o := range objs {
			m[o["kind"].(string)+"/"+dig(t, o, "metadata", "name").(string)] = o
		}
		return m
	}

	v := values(func(v map[string]any) {
		redis(v)["deploy"] = true
		redis(v)["passwordSecret"] = "sb-redis"
	})
	objs := byName(renderChart(t, chart, meta.Name, meta.Version, meta.AppVersion, v))
	var names []string
	for n := range objs {
		names = append(names, n)
	}
	slices.Sort(names)
	if want := []string{"ConfigMap/sb-switchboard", "Deployment/sb-switchboard", "Deployment/sb-switchboard-redis",
		"PodDisruptionBudget/sb-switchboard", "Service/sb-switchboard", "Service/sb-switchboard-redis"}; !slices.Equal(names, want) {
		t.Fatalf("objects %q, want %q", names, want)
	}
	dep := objs["Deployment/sb-switchboard"]
	selector := fmt.Sprint(dig(t, dep, "spec", "selector", "matchLabels"))
	if got := dig(t, dep, "spec", "replicas"); got != 3 {
		t.Errorf("replicas %v, want 3", got)
	}
	spec := dig(t, dep, "spec", "template", "spec").(map[string]any)
	// A draining replica serves for up to drainMax (20 s,
	// internal/gateway/cluster.go), then stops its servers within 10 s.
	if g, _ := spec["terminationGracePeriodSeconds"].(int); g <= 20+10 {
		t.Errorf("terminationGracePeriodSeconds %v, want above 30 (the drain and the shutdown)", spec["terminationGracePeriodSeconds"])
	}
	c := spec["containers"].([]any)[0].(map[string]any)
	if got := dig(t, c, "readinessProbe", "httpGet", "path"); got != "/readyz" {
		t.Errorf("readinessProbe path %v, want /readyz (503 while draining)", got)
	}
	if got := dig(t, c, "livenessProbe", "httpGet", "path"); got != "/health" {
		t.Errorf("livenessProbe path %v, want /health", got)
	}
	env := map[string]string{}
	for _, e := range c["env"].([]any) {
		e := e.(map[string]any)
		env[e["name"].(string)] = fmt.Sprint(e["valueFrom"])
	}
	for name, want := range map[string]string{
		"POD_NAME":       "map[fieldRef:map[fieldPath:metadata.name]]",
		"POD_IP":         "map[fieldRef:map[fieldPath:status.podIP]]",
		"REDIS_PASSWORD": "map[secretKeyRef:map[key:password name:sb-redis]]",
	} {
		if env[name] != want {
			t.Errorf("env %s from %q, want %q", name, env[name], want)
		}
	}
	mounts := map[string]string{}
	for _, m := range c["volumeMounts"].([]any) {
		m := m.(map[string]any)
		mounts[m["name"].(string)] = m["mountPath"].(string)
	}
	var keysVolume any
	for _, vol := range spec["volumes"].([]any) {
		if vol.(map[string]any)["name"] == "cluster-keys" {
			keysVolume = vol.(map[string]any)["secret"]
		}
	}
	if got := fmt.Sprint(keysVolume); got != "map[items:[map[key:keys path:keys]] secretName:sb-cluster-keys]" {
		t.Errorf("the cluster-keys volume's secret %s, want the key keys of sb-cluster-keys", got)
	}

	pdb := objs["PodDisruptionBudget/sb-switchboard"]
	if dig(t, pdb, "apiVersion") != "policy/v1" || dig(t, pdb, "spec", "maxUnavailable") != 1 ||
		fmt.Sprint(dig(t, pdb, "spec", "selector", "matchLabels")) != selector {
		t.Errorf("PodDisruptionBudget %v: want policy/v1, maxUnavailable 1, the Deployment's selector %s", pdb, selector)
	}

	// The Redis: its pod is not one of Switchboard's (the Service and the
	// PDB select by labels), its Service selects it, it requires the password.
	rdep, rsvc := objs["Deployment/sb-switchboard-redis"], objs["Service/sb-switchboard-redis"]
	rlabels := dig(t, rdep, "spec", "template", "metadata", "labels").(map[string]any)
	matches := true
	for k, v := range dig(t, dep, "spec", "selector", "matchLabels").(map[string]any) {
		matches = matches && rlabels[k] == v
	}
	if matches {
		t.Errorf("the Redis pod's labels %v are selected by Switchboard's selector %s", rlabels, selector)
	}
	if fmt.Sprint(dig(t, rsvc, "spec", "selector")) != fmt.Sprint(rlabels) || fmt.Sprint(dig(t, rsvc, "spec", "ports")) != "[map[name:redis port:6379 protocol:TCP targetPort:redis]]" {
		t.Errorf("Redis Service %v, want port 6379 selecting %v", rsvc, rlabels)
	}
	rc := dig(t, rdep, "spec", "template", "spec", "containers").([]any)[0].(map[string]any)
	if got := fmt.Sprint(rc["args"]); !strings.Contains(got, "--requirepass $(REDIS_PASSWORD)") || !strings.Contains(fmt.Sprint(rc["env"]), "name:sb-redis") {
		t.Errorf("Redis args %s env %v: want --requirepass from the Secret sb-redis", got, rc["env"])
	}

	// The config: values.config and the cluster block, valid, pointing at
	// the mounts, the environment and the Redis Service.
	cm := dig(t, objs["ConfigMap/sb-switchboard"], "data", "switchboard.yaml").(string)
	var cmCfg map[string]any
	if err := yaml.Unmarshal([]byte(cm), &cmCfg); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(cmCfg["destinations"]) != fmt.Sprint(v["config"].(map[string]any)["destinations"]) || cmCfg["listen"] != "0.0.0.0:8080" {
		t.Errorf("the ConfigMap's config is not values.config's:\n%s", cm)
	}
	t.Setenv("POD_NAME", "sb-switchboard-5d8f7-x2x9q")
	t.Setenv("POD_IP", "10.1.2.3")
	cfg := loadConfig(t, cm)
	cl := cfg.Cluster
	if cl == nil || cl.Redis == nil {
		t.Fatalf("the ConfigMap's config has no cluster block with redis:\n%s", cm)
	}
	if cl.ReplicaID != "sb-switchboard-5d8f7-x2x9q" || cl.Advertise != "10.1.2.3:8080" {
		t.Errorf("replica_id %q, advertise %q: want the pod's name and IP:8080", cl.ReplicaID, cl.Advertise)
	}
	if port := fmt.Sprint(dig(t, c, "ports").([]any)[0].(map[string]any)["containerPort"]); !strings.HasSuffix(cl.Advertise, ":"+port) {
		t.Errorf("advertise %s, the container port %s", cl.Advertise, port)
	}
	if filepath.Dir(cl.KeysFile) != mounts["cluster-keys"] || filepath.Base(cl.KeysFile) != "keys" {
		t.Errorf("keys_file %s, the keys Secret's key keys is mounted at %s", cl.KeysFile, mounts["cluster-keys"])
	}
	if cl.Redis.URL != "redis://sb-switchboard-redis:6379/0" || cl.Redis.PasswordEnv != "REDIS_PASSWORD" {
		t.Errorf("redis url %q password_env %q: want the Redis Service and REDIS_PASSWORD", cl.Redis.URL, cl.Redis.PasswordEnv)
	}

	// An external Redis: no Redis in the chart, its URL in the config, no
	// password unless a Secret is named.
	v = values(func(v map[string]any) { redis(v)["url"] = "rediss://redis.example:6380/1" })
	objs = byName(renderChart(t, chart, meta.Name, meta.Version, meta.AppVersion, v))
	if objs["Deployment/sb-switchboard-redis"] != nil || objs["Service/sb-switchboard-redis"] != nil || objs["PodDisruptionBudget/sb-switchboard"] == nil {
		t.Errorf("with an external Redis: objects %v", objs)
	}
	cfg = loadConfig(t, dig(t, objs["ConfigMap/sb-switchboard"], "data", "switchboard.yaml").(string))
	if cfg.Cluster == nil || cfg.Cluster.Redis == nil || cfg.Cluster.Redis.URL != "rediss://redis.example:6380/1" || cfg.Cluster.Redis.PasswordEnv != "" {
		t.Errorf("with an external Redis: cluster %+v", cfg.Cluster)
	}
	if strings.Contains(fmt.Sprint(objs["Deployment/sb-switchboard"]), "REDIS_PASSWORD") {
		t.Error("REDIS_PASSWORD set without cluster.redis.passwordSecret")
	}

	// Bad values: the render fails, naming what to set.
	for _, bad := range []struct {
		name string
		set  func(v map[string]any)
		want string
	}{
		{"no keys", func(v map[string]any) { redis(v)["deploy"] = true; v["cluster"].(map[string]any)["keysSecret"] = "" }, "cluster.keysSecret"},
		{"no redis", func(v map[string]any) {}, "cluster.redis.url, or cluster.redis.deploy"},
		{"two redis", func(v map[string]any) { redis(v)["deploy"] = true; redis(v)["url"] = "redis://r:6379" }, "url or deploy: true, not both"},
		{"replicas without cluster", func(v map[string]any) { v["cluster"].(map[string]any)["enabled"] = false }, "replicaCount above 1 needs cluster.enabled"},
	} {
		_, err := renderChartErr(t, chart, meta.Name, meta.Version, meta.AppVersion, values(bad.set))
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: render error %v, want one containing %q", bad.name, err, bad.want)
		}
	}
}

// loadConfig loads text as a config file with internal/config.
func loadConfig(t *testing.T, text string) *config.Config {
	t.Helper()
	p := filepath.Join(t.TempDir(), "switchboard.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(p)
	if err != nil {
		t.Fatalf("config: %v\n%s", err, text)
	}
	return cfg
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// dig follows keys through nested maps.
func dig(t *testing.T, v any, keys ...string) any {
	t.Helper()
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%s: not a map: %v", k, v)
		}
		v = m[k]
	}
	return v
}

// renderChart renders the chart's templates as helm would for release
// "sb", with the Sprig functions the chart uses, and parses the output as
// YAML documents.
func renderChart(t *testing.T, chart, name, version, appVersion string, values map[string]any) []map[string]any {
	t.Helper()
	objs, err := renderChartErr(t, chart, name, version, appVersion, values)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// renderChartErr is renderChart returning the error of a template that
// fails (the chart's `fail` on bad values), as helm template reports it.
// Every object is named for the release: sb-switchboard, or
// sb-switchboard-<part> (the in-chart Redis).
func renderChartErr(t *testing.T, chart, name, version, appVersion string, values map[string]any) ([]map[string]any, error) {
	t.Helper()
	root := template.New("chart")
	funcs := template.FuncMap{
		"include": func(name string, data any) (string, error) {
			var b strings.Builder
			err := root.ExecuteTemplate(&b, name, data)
			return b.String(), err
		},
		"toYaml": func(v any) (string, error) {
			b, err := yaml.Marshal(v)
			return strings.TrimSuffix(string(b), "\n"), err
		},
		"nindent": func(n int, s string) string {
			pad := strings.Repeat(" ", n)
			return "\n" + pad + strings.ReplaceAll(s, "\n", "\n"+pad)
		},
		"quote": func(v any) string { return fmt.Sprintf("%q", fmt.Sprint(v)) },
		"default": func(d, v any) any {
			if v == nil || v == "" || v == false || v == 0 {
				return d
			}
			return v
		},
		"contains":   func(sub, s string) bool { return strings.Contains(s, sub) },
		"trunc":      func(n int, s string) string { return s[:min(n, len(s))] },
		"trimSuffix": func(suffix, s string) string { return strings.TrimSuffix(s, suffix) },
		"replace":    func(old, new, s string) string { return strings.ReplaceAll(s, old, new) },
		"fail":       func(msg string) (string, error) { return "", errors.New(msg) },
		"int": func(v any) (int, error) { // helm's values hold float64
			switch n := v.(type) {
			case int:
				return n, nil
			case float64:
				return int(n), nil
			}
			return 0, fmt.Errorf("int: %T", v)
		},
	}
	root.Funcs(funcs).Option("missingkey=error")
	paths, _ := filepath.Glob(filepath.Join(chart, "templates", "*"))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := root.New(filepath.Base(p)).Parse(string(b)); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	data := map[string]any{
		"Values":  values,
		"Chart":   map[string]any{"Name": name, "Version": version, "AppVersion": appVersion},
		"Release": map[string]any{"Name": "sb", "Namespace": "default", "Service": "Helm"},
	}
	var objs []map[string]any
	for _, p := range paths {
		base := filepath.Base(p)
		if strings.HasPrefix(base, "_") {
			continue
		}
		var b bytes.Buffer
		if err := root.ExecuteTemplate(&b, base, data); err != nil {
			return nil, fmt.Errorf("render %s: %w", p, err)
		}
		if !strings.HasSuffix(base, ".yaml") {
			continue // NOTES.txt
		}
		dec := yaml.NewDecoder(&b)
		for {
			var o map[string]any
			if err := dec.Decode(&o); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				t.Fatalf("render %s: not YAML: %v\n%s", p, err, b.String())
			}
			if o == nil {
				continue
			}
			if n, _ := dig(t, o, "metadata", "name").(string); o["apiVersion"] == nil || o["kind"] == nil || (n != "sb-switchboard" && !strings.HasPrefix(n, "sb-switchboard-")) {
				t.Errorf("render %s: %v", p, o)
			}
			objs = append(objs, o)
		}
	}
	return objs, nil
}

// TestReleaseBuilds checks what scripts/release.sh builds: .ci/run builds
// the cross targets into SWITCHBOARD_RELEASE_DIST before the tests; without
// it the test builds linux/arm64 alone. Each binary is for its platform
// (ELF, Mach-O, PE headers), carries the version it was given, and is in
// SHA256SUMS with its hash.
func TestReleaseBuilds(t *testing.T) {
	dist, version := os.Getenv("SWITCHBOARD_RELEASE_DIST"), os.Getenv("SWITCHBOARD_RELEASE_VERSION")
	if dist == "" {
		if testing.Short() {
			t.Skip("cross-builds; skipped with -short")
		}
		dist, version = t.TempDir(), "v0.0.0-test"
		cmd := exec.Command("bash", "../scripts/release.sh", "linux/arm64")
		cmd.Env = append(os.Environ(), "DIST="+dist, "VERSION="+version)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("release.sh: %v\n%s", err, out)
		}
	}
	sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(sums)), "\n")
	name := regexp.MustCompile(`^switchboard-(.+)-(linux|darwin|windows)-(amd64|arm64|armv7)(\.exe)?$`)
	for _, l := range lines {
		sum, file, ok := strings.Cut(l, "  ")
		m := name.FindStringSubmatch(file)
		if !ok || m == nil {
			t.Errorf("SHA256SUMS line %q", l)
			continue
		}
		b, err := os.ReadFile(filepath.Join(dist, file))
		if err != nil {
			t.Error(err)
			continue
		}
		if h := sha256.Sum256(b); hex.EncodeToString(h[:]) != sum {
			t.Errorf("%s: SHA256SUMS says %s, the file hashes to %x", file, sum, h)
		}
		if version != "" && (m[1] != version || !bytes.Contains(b, []byte(version))) {
			t.Errorf("%s: version %q not in its name or its bytes", file, version)
		}
		if err := checkPlatform(bytes.NewReader(b), m[2], m[3]); err != nil {
			t.Errorf("%s: %v", file, err)
		}
	}
	if len(lines) == 0 {
		t.Error("SHA256SUMS is empty")
	}
	t.Logf("checked %d release binaries in %s", len(lines), dist)
}

// checkPlatform reads the executable's headers.
func checkPlatform(r *bytes.Reader, goos, arch string) error {
	switch goos {
	case "linux":
		f, err := elf.NewFile(r)
		if err != nil {
			return err
		}
		want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "armv7": elf.EM_ARM}[arch]
		if f.Machine != want {
			return fmt.Errorf("ELF machine %v, want %v", f.Machine, want)
		}
		// Static: no interpreter.
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				return fmt.Errorf("dynamically linked")
			}
		}
	case "darwin":
		f, err := macho.NewFile(r)
		if err != nil {
			return err
		}
		want := map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64}[arch]
		if f.Cpu != want {
			return fmt.Errorf("Mach-O cpu %v, want %v", f.Cpu, want)
		}
	case "windows":
		f, err := pe.NewFile(r)
		if err != nil {
			return err
		}
		want := map[string]uint16{"amd64": pe.IMAGE_FILE_MACHINE_AMD64, "arm64": pe.IMAGE_FILE_MACHINE_ARM64}[arch]
		if f.Machine != want {
			return fmt.Errorf("PE machine %#x, want %#x", f.Machine, want)
		}
	}
	return nil
}

// fromLine is one FROM instruction of a Containerfile.
type fromLine struct {
	line     int
	platform string // --platform=…, "" for the target platform
	image    string
	stage    string // AS …
	runs     int    // RUN instructions of the stage
}

// containerStages parses the FROM lines of a Containerfile and counts
// each stage's RUN instructions.
func containerStages(t *testing.T, path string) []*fromLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var stages []*fromLine
	cont := false // the previous line ended with a backslash
	for i, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		wasCont := cont
		cont = strings.HasSuffix(strings.TrimSpace(l), "\\")
		if wasCont || len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "FROM":
			s := &fromLine{line: i + 1}
			rest := f[1:]
			for len(rest) > 0 && strings.HasPrefix(rest[0], "--") {
				if v, ok := strings.CutPrefix(rest[0], "--platform="); ok {
					s.platform = v
				}
				rest = rest[1:]
			}
			if len(rest) == 0 {
				t.Fatalf("%s:%d: FROM without an image", path, i+1)
			}
			s.image = rest[0]
			if len(rest) == 3 && strings.EqualFold(rest[1], "AS") {
				s.stage = rest[2]
			}
			stages = append(stages, s)
		case "RUN":
			if len(stages) > 0 {
				stages[len(stages)-1].runs++
			}
		}
	}
	return stages
}

// pinnedImage is a base image named by repository, version tag and digest.
var pinnedImage = regexp.MustCompile(`^[a-z0-9][a-z0-9./_-]*:([A-Za-z0-9_][A-Za-z0-9_.-]*)@sha256:[0-9a-f]{64}$`)

// TestContainerBasesPinned (issue 21): every base image of the container
// files is pinned by version and digest (no ARG indirection, no latest),
// uv included; the AgentCore image builds for arm64 on x86 without
// emulation (no RUN in a stage of the target platform: RUN steps run in
// --platform=$BUILDPLATFORM stages, cross-compiling or installing for the
// target), as does the general base target; the default command downloads
// nothing at start (no uvx …@latest); the commands of docs/aws-agentcore.md match the image.
func TestContainerBasesPinned(t *testing.T) {
	files := []string{"container/Containerfile", "agentcore/Containerfile"}
	for _, p := range files {
		stages := containerStages(t, p)
		if len(stages) == 0 {
			t.Fatalf("%s: no FROM", p)
		}
		named := map[string]bool{}
		for _, s := range stages {
			switch m := pinnedImage.FindStringSubmatch(s.image); {
			case named[s.image]:
				// An earlier stage.
			case m == nil:
				t.Errorf("%s:%d: FROM %s: want image:version@sha256:<digest>", p, s.line, s.image)
			case m[1] == "latest":
				t.Errorf("%s:%d: FROM %s: pinned to latest, want a version", p, s.line, s.image)
			}
			if s.platform != "" && s.platform != "$BUILDPLATFORM" {
				t.Errorf("%s:%d: --platform=%s, want $BUILDPLATFORM or none", p, s.line, s.platform)
			}
			if s.stage != "" {
				named[s.stage] = true
			}
			// Every stage of the target platform only copies: a cross build
			// needs no emulation.
			if s.platform == "" && s.runs > 0 {
				t.Errorf("%s:%d: stage %s of the target platform has %d RUN steps: a cross build would need emulation", p, s.line, s.stage, s.runs)
			}
		}
		b, _ := os.ReadFile(p)
		if regexp.MustCompile(`(?i):latest\b|@latest\b`).Match(b) {
			t.Errorf("%s: mentions latest; pin a version", p)
		}
	}

	// docs/aws-agentcore.md builds and runs the AgentCore image as it is.
	b, _ := os.ReadFile("agentcore/Containerfile")
	cmd := regexp.MustCompile(`(?m)^ARG SERVER_CMD=(\S+)$`).FindSubmatch(b)
	pkg := regexp.MustCompile(`(?m)^ARG SERVER_PACKAGE=([^=\s]+)==\S+$`).FindSubmatch(b)
	if cmd == nil || pkg == nil || !bytes.Contains(b, []byte("MCP_SERVER_CMD=${SERVER_CMD}")) {
		t.Fatalf("agentcore/Containerfile: want ARG SERVER_CMD, a pinned ARG SERVER_PACKAGE (name==version) and MCP_SERVER_CMD=${SERVER_CMD}")
	}
	readme, err := os.ReadFile("../docs/aws-agentcore.md")
	if err != nil {
		t.Fatal(err)
	}
	run := regexp.MustCompile(`(?s)docker buildx build --platform linux/arm64 -f deploy/agentcore/Containerfile.*?docker run (?:[^\n]*\\\n)*[^\n]*`).Find(readme)
	if run == nil {
		t.Fatal("docs/aws-agentcore.md: no docker buildx build … deploy/agentcore/Containerfile followed by docker run")
	}
	for _, m := range regexp.MustCompile(`MCP_SERVER_CMD="?([^"\s]+)`).FindAllSubmatch(run, -1) {
		if string(m[1]) != string(cmd[1]) {
			t.Errorf("docs/aws-agentcore.md runs MCP_SERVER_CMD=%s; the image's command is %s", m[1], cmd[1])
		}
	}
	for _, m := range regexp.MustCompile(`SERVER_PACKAGE=([^=\s"]+)`).FindAllSubmatch(run, -1) {
		if string(m[1]) != string(pkg[1]) {
			t.Errorf("docs/aws-agentcore.md builds SERVER_PACKAGE=%s; the image's is %s", m[1], pkg[1])
		}
	}
}

// TestClusterRecipe: the three-replica recipe of docs/deploy.md works as
// written: its configs (the heredoc, for each i) load with internal/config
// with distinct ports and replica ids, the keys file and Debian's Redis;
// its sed turns deploy/haproxy/haproxy.cfg into a config whose servers are
// exactly those three replicas on loopback, which haproxy -c accepts
// (where haproxy is installed).
func TestClusterRecipe(t *testing.T) {
	doc, err := os.ReadFile("../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	heredoc := regexp.MustCompile(`(?s)for i in 1 2 3; do cat > \$D/r\$i\.yaml <<EOF\n(.*?)\nEOF\n`).FindSubmatch(doc)
	if heredoc == nil {
		t.Fatal("docs/deploy.md: no `for i in 1 2 3; do cat > $D/r$i.yaml <<EOF` … EOF")
	}
	dir := t.TempDir()
	listens := map[string]string{} // replica id -> listen
	for i := 1; i <= 3; i++ {
		text := strings.NewReplacer("$i", fmt.Sprint(i), "$D", dir).Replace(string(heredoc[1]))
		if strings.Contains(text, "$") {
			t.Fatalf("r%d.yaml: a shell variable the recipe does not set:\n%s", i, text)
		}
		cfg := loadConfig(t, text)
		cl := cfg.Cluster
		want := fmt.Sprintf("127.0.0.1:808%d", i)
		if cfg.Listen != want || cl == nil || cl.Advertise != want || cl.ReplicaID != fmt.Sprintf("r%d", i) {
			t.Fatalf("r%d.yaml: listen %s, cluster %+v: want %s, advertised, replica r%d", i, cfg.Listen, cl, want, i)
		}
		if filepath.Base(cl.KeysFile) != "cluster-keys" || cl.Redis == nil || cl.Redis.URL != "redis://127.0.0.1:6379/0" {
			t.Errorf("r%d.yaml: keys_file %s, redis %+v: want cluster-keys beside it and Debian's redis-server", i, cl.KeysFile, cl.Redis)
		}
		if d := cfg.Destinations["example"]; d == nil || !slices.Equal(d.Command, []string{filepath.Join(dir, "example-server")}) {
			t.Errorf("r%d.yaml: destination example %+v, want the built example-server", i, d)
		}
		listens[cl.ReplicaID] = cfg.Listen
	}

	sed := regexp.MustCompile(`(?m)^sed((?: -e '[^']*')+) deploy/haproxy/haproxy\.cfg >\$D/haproxy\.cfg$`).FindSubmatch(doc)
	if sed == nil {
		t.Fatal("docs/deploy.md: no `sed -e '…' … deploy/haproxy/haproxy.cfg >$D/haproxy.cfg`")
	}
	var args []string
	for _, m := range regexp.MustCompile(`-e '([^']*)'`).FindAllSubmatch(sed[1], -1) {
		args = append(args, "-e", string(m[1]))
	}
	out, err := exec.Command("sed", append(args, "haproxy/haproxy.cfg")...).Output()
	if err != nil {
		t.Fatalf("sed %q: %v", args, err)
	}
	servers := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s*server (\S+) (\S+)`).FindAllStringSubmatch(string(out), -1) {
		servers[m[1]] = m[2]
	}
	if fmt.Sprint(servers) != fmt.Sprint(listens) || !regexp.MustCompile(`(?m)^\s*bind 127\.0\.0\.1:8080$`).Match(out) {
		t.Errorf("the recipe's haproxy.cfg: servers %v, want %v, and bind 127.0.0.1:8080:\n%s", servers, listens, out)
	}
	haproxy, err := exec.LookPath("haproxy")
	if _, serr := os.Stat("/usr/sbin/haproxy"); err != nil && serr == nil {
		haproxy = "/usr/sbin/haproxy" // not in a non-root PATH
	}
	if haproxy == "" {
		t.Log("haproxy not installed: haproxy -c skipped")
	} else {
		p := filepath.Join(dir, "haproxy.cfg")
		if err := os.WriteFile(p, out, 0o644); err != nil {
			t.Fatal(err)
		}
		if b, err := exec.Command(haproxy, "-c", "-f", p).CombinedOutput(); err != nil {
			t.Errorf("haproxy -c on the recipe's haproxy.cfg: %v\n%s", err, b)
		}
	}
}
