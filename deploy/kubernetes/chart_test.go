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

var secrets = []string{
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
	if _, err := render(t); err == nil || !strings.Contains(err.Error(), "required") {
		t.Fatalf("rendered without secrets: %v", err)
	}
	docs, err := render(t, "--set", "existingSecret=mine")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		if d["kind"] == "Secret" {
			t.Fatal("a Secret was rendered although existingSecret names one")
		}
	}
}
