// Package kubernetes holds the Helm chart's checks: the chart is rendered
// with the helm binary `make helm-check` installs into .tools, and the
// objects are checked for what the README promises.
package kubernetes

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func helm(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", ".tools", "helm"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Skip("helm is not installed in .tools; `make helm-check` installs it from the Go module proxy")
	}
	return p
}

// digest is a made-up image digest (the chart runs its image by digest).
var digest = "sha256:" + strings.Repeat("0", 64)

var secrets = []string{
	"--set", "image.digest=" + digest,
	"--set", "secret.databaseURL=postgres://sandhold:pw@pg:5432/sandhold?sslmode=verify-full",
	"--set", "secret.clusterSecret=" + strings.Repeat("s", 32),
	"--set", "secret.adminKey=shk_" + strings.Repeat("k", 43),
}

func render(t *testing.T, args ...string) ([]map[string]any, error) {
	t.Helper()
	// #nosec G204 -- the test's own helm binary and fixed arguments
	cmd := exec.Command(helm(t), append([]string{"template", "sb", "sandhold"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, errors.New(errb.String())
	}
	var docs []map[string]any
	dec := yaml.NewDecoder(&out)
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("rendered YAML: %v", err)
		}
		if m != nil {
			docs = append(docs, m)
		}
	}
	return docs, nil
}

func get(m any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			mm, _ := m.(map[string]any)
			m = mm[k]
		case int:
			s, _ := m.([]any)
			if k >= len(s) {
				return nil
			}
			m = s[k]
		}
	}
	return m
}

func TestChartRendersWhatTheReadmeSays(t *testing.T) {
	docs, err := render(t, secrets...)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	var sts map[string]any
	for _, d := range docs {
		kind, _ := d["kind"].(string)
		kinds[kind]++
		if kind == "StatefulSet" {
			sts = d
		}
		if d["apiVersion"] == nil || get(d, "metadata", "name") == nil {
			t.Errorf("object without apiVersion or name: %v", d)
		}
	}
	want := map[string]int{"StatefulSet": 1, "Service": 2, "Secret": 1, "PodDisruptionBudget": 1, "ServiceAccount": 1}
	for k, n := range want {
		if kinds[k] != n {
			t.Errorf("%d %s, want %d (all: %v)", kinds[k], k, n, kinds)
		}
	}
	c := get(sts, "spec", "template", "spec", "containers", 0)
	if p := get(c, "livenessProbe", "httpGet", "path"); p != "/healthz" {
		t.Errorf("liveness probe %v", p)
	}
	if p := get(c, "readinessProbe", "httpGet", "path"); p != "/readyz" {
		t.Errorf("readiness probe %v", p)
	}
	if get(sts, "spec", "template", "spec", "automountServiceAccountToken") != false {
		t.Error("the pod mounts an API token")
	}
	// Every SANDBOX_* name the chart sets is a documented setting.
	inv, err := os.ReadFile(filepath.Join("..", "..", "SECURITY.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\| (SANDBOX_[A-Z0-9_]+) \|`).FindAllStringSubmatch(string(inv), -1) {
		documented[m[1]] = true
	}
	env, _ := get(c, "env").([]any)
	for _, e := range env {
		name, _ := get(e, "name").(string)
		if strings.HasPrefix(name, "SANDBOX_") && !documented[name] {
			t.Errorf("the chart sets %s, which SECURITY.md does not list", name)
		}
	}
	for _, name := range []string{"SANDBOX_DATABASE_URL", "SANDBOX_CLUSTER_SECRET", "SANDBOX_API_KEY"} {
		found := false
		for _, e := range env {
			if get(e, "name") == name && get(e, "valueFrom", "secretKeyRef", "name") != nil {
				found = true
			}
		}
		if !found {
			t.Errorf("%s is not taken from a Secret", name)
		}
	}
}

func TestChartRequiresSecrets(t *testing.T) {
	if _, err := render(t, "--set", "image.digest="+digest); err == nil || !strings.Contains(err.Error(), "required") {
		t.Fatalf("rendered without secrets: %v", err)
	}
	docs, err := render(t, "--set", "existingSecret=mine", "--set", "image.digest="+digest)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		if d["kind"] == "Secret" {
			t.Fatal("a Secret was rendered although existingSecret names one")
		}
	}
}

// kindsOf counts the rendered objects by kind and answers the first of each.
func kindsOf(docs []map[string]any) (map[string]int, map[string]map[string]any) {
	n, first := map[string]int{}, map[string]map[string]any{}
	for _, d := range docs {
		k, _ := d["kind"].(string)
		n[k]++
		if first[k] == nil {
			first[k] = d
		}
	}
	return n, first
}

func envOf(sts map[string]any) map[string]any {
	out := map[string]any{}
	env, _ := get(sts, "spec", "template", "spec", "containers", 0, "env").([]any)
	for _, e := range env {
		name, _ := get(e, "name").(string)
		out[name] = e
	}
	return out
}

// The image runs by digest; a tag only when asked; neither is refused.
func TestChartImageByDigest(t *testing.T) {
	docs, err := render(t, secrets...)
	if err != nil {
		t.Fatal(err)
	}
	_, first := kindsOf(docs)
	if img := get(first["StatefulSet"], "spec", "template", "spec", "containers", 0, "image"); img != "ghcr.io/sandhold/sandhold@"+digest {
		t.Fatalf("image %v", img)
	}
	if _, err := render(t, secrets[2:]...); err == nil || !strings.Contains(err.Error(), "make image") {
		t.Fatalf("rendered without a digest: %v", err)
	}
	docs, err = render(t, append(secrets[2:], "--set", "image.tag=v1.0.0")...)
	if err != nil {
		t.Fatal(err)
	}
	_, first = kindsOf(docs)
	if img := get(first["StatefulSet"], "spec", "template", "spec", "containers", 0, "image"); img != "ghcr.io/sandhold/sandhold:v1.0.0" {
		t.Fatalf("image by tag %v", img)
	}
}

// mode single: one node on SQLite, no database, no cluster secret, no
// PodDisruptionBudget; the admin key is optional.
func TestChartSingleNode(t *testing.T) {
	docs, err := render(t, "--set", "mode=single", "--set", "image.digest="+digest, "--set", "replicas=4")
	if err != nil {
		t.Fatal(err)
	}
	n, first := kindsOf(docs)
	if n["PodDisruptionBudget"] != 0 || n["StatefulSet"] != 1 {
		t.Fatalf("kinds %v", n)
	}
	sts := first["StatefulSet"]
	if r := get(sts, "spec", "replicas"); r != 1 {
		t.Fatalf("replicas %v, want 1 in mode single", r)
	}
	env := envOf(sts)
	for _, name := range []string{"SANDBOX_DATABASE_URL", "SANDBOX_CLUSTER_SECRET", "SANDBOX_NODE_ADDR", "SANDBOX_API_KEY"} {
		if env[name] != nil {
			t.Errorf("mode single sets %s", name)
		}
	}
	if sd := get(first["Secret"], "stringData"); sd != nil && len(sd.(map[string]any)) != 0 {
		t.Errorf("mode single without a key renders secret data %v", sd)
	}
	docs, err = render(t, "--set", "mode=single", "--set", "image.digest="+digest, "--set", "secret.adminKey=shk_"+strings.Repeat("k", 43))
	if err != nil {
		t.Fatal(err)
	}
	_, first = kindsOf(docs)
	if get(envOf(first["StatefulSet"])["SANDBOX_API_KEY"], "valueFrom", "secretKeyRef", "key") != "admin-key" {
		t.Error("mode single with an admin key does not pass it")
	}
}

// values.schema.json refuses what the chart cannot run.
func TestChartValuesSchema(t *testing.T) {
	for name, args := range map[string][]string{
		"unknown mode":         {"--set", "mode=multi"},
		"misspelt value":       {"--set", "replica=3"},
		"a digest that is not": {"--set", "image.digest=latest"},
		"not postgres":         {"--set", "secret.databaseURL=mysql://x"},
		"ingress without host": {"--set", "ingress.enabled=true"},
		"env not SANDBOX_":     {"--set", "env.PATH=/tmp"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := render(t, append(append([]string{}, secrets...), args...)...); err == nil || !strings.Contains(err.Error(), "schema") {
				t.Fatalf("rendered: %v", err)
			}
		})
	}
}

// The optional parts: an Ingress (with the content origin's wildcard host
// and cookie affinity), a NetworkPolicy, the Service's ClientIP affinity.
func TestChartOptionalParts(t *testing.T) {
	docs, err := render(t, append(append([]string{}, secrets...), "--set", "ingress.enabled=true", "--set", "ingress.hosts={sandhold.example}",
		"--set", "contentDomain=sandbox-content.example", "--set", "networkPolicy.enabled=true")...)
	if err != nil {
		t.Fatal(err)
	}
	n, first := kindsOf(docs)
	if n["Ingress"] != 1 || n["NetworkPolicy"] != 1 {
		t.Fatalf("kinds %v", n)
	}
	ing := first["Ingress"]
	if h := get(ing, "spec", "rules", 1, "host"); h != "*.sandbox-content.example" {
		t.Errorf("content host %v", h)
	}
	if a := get(ing, "metadata", "annotations", "nginx.ingress.kubernetes.io/affinity"); a != "cookie" {
		t.Errorf("cookie affinity %v", a)
	}
	env := envOf(first["StatefulSet"])
	if get(env["SANDBOX_ALLOWED_HOSTS"], "value") != "sandhold.example" || get(env["SANDBOX_CONTENT_DOMAIN"], "value") != "sandbox-content.example" {
		t.Errorf("hosts %v content %v", env["SANDBOX_ALLOWED_HOSTS"], env["SANDBOX_CONTENT_DOMAIN"])
	}
	np := first["NetworkPolicy"]
	if get(np, "spec", "ingress", 0, "from", 0, "podSelector", "matchLabels", "app.kubernetes.io/instance") != "sb" {
		t.Errorf("network policy %v", np)
	}
	for _, d := range docs {
		if d["kind"] == "Service" && get(d, "spec", "clusterIP") == nil && get(d, "spec", "sessionAffinity") != "ClientIP" {
			t.Errorf("the client Service has no session affinity: %v", get(d, "spec"))
		}
	}
}
