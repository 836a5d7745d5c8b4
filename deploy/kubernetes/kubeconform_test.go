package kubernetes

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// kubeconform returns the validator and the schema location template
// `make helm-check` installs into .tools (kubeconform from the Go module
// proxy; the schemas made by ./schemagen from a Kubernetes OpenAPI
// document a Go module ships), or skips.
func kubeconform(t *testing.T) (bin, location string) {
	t.Helper()
	tools, err := filepath.Abs(filepath.Join("..", "..", ".tools"))
	if err != nil {
		t.Fatal(err)
	}
	bin, schemas := filepath.Join(tools, "kubeconform"), filepath.Join(tools, "k8s-schemas")
	for _, p := range []string{bin, filepath.Join(schemas, "statefulset-apps-v1.json")} {
		if _, err := os.Stat(p); err != nil {
			t.Skip("kubeconform or its schemas are not in .tools; `make helm-check` installs them offline")
		}
	}
	return bin, filepath.Join(schemas, "{{.ResourceKind}}{{.KindSuffix}}.json")
}

func validate(t *testing.T, bin, location string, manifest []byte) (string, error) {
	t.Helper()
	// #nosec G204 -- the test's own kubeconform binary and fixed arguments
	cmd := exec.Command(bin, "-strict", "-summary", "-schema-location", location, "-")
	cmd.Stdin = bytes.NewReader(manifest)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// The rendered chart is valid Kubernetes, strictly (no unknown field),
// with the defaults and with every optional part switched on; and the
// check can fail: a misspelt field is refused.
func TestChartPassesKubeconform(t *testing.T) {
	bin, location := kubeconform(t)
	for name, extra := range map[string][]string{
		"defaults":               nil,
		"capacity and placement": {"--set", "nodeCapacity=50", "--set", "replicas=5", "--set", "allowedHosts={sandhold.example}"},
		"single node, ingress, network policy": {"--set", "mode=single", "--set", "ingress.enabled=true", "--set", "ingress.hosts={sandhold.example}",
			"--set", "ingress.tls[0].hosts={sandhold.example}", "--set", "ingress.tls[0].secretName=tls", "--set", "contentDomain=sandbox-content.example",
			"--set", "networkPolicy.enabled=true", "--set", "networkPolicy.from[0].namespaceSelector.matchLabels.team=agents",
			"--set", "networkPolicy.egress[0].to[0].ipBlock.cidr=10.0.0.0/8"},
	} {
		t.Run(name, func(t *testing.T) {
			// #nosec G204 -- the test's own helm binary and fixed arguments
			cmd := exec.Command(helm(t), append(append([]string{"template", "sb", "sandhold"}, secrets...), extra...)...)
			manifest, err := cmd.Output()
			if err != nil {
				t.Fatalf("helm template: %v", err)
			}
			out, err := validate(t, bin, location, manifest)
			if err != nil || !strings.Contains(out, "Invalid: 0, Errors: 0, Skipped: 0") {
				t.Fatalf("kubeconform: %v\n%s", err, out)
			}
			t.Log(strings.TrimSpace(out))
			bad := bytes.Replace(manifest, []byte("automountServiceAccountToken:"), []byte("automountServiceAccountTokn:"), 1)
			if bytes.Equal(bad, manifest) {
				t.Fatal("the manifest has no automountServiceAccountToken to misspell")
			}
			if out, err := validate(t, bin, location, bad); err == nil || !strings.Contains(out, "automountServiceAccountTokn") {
				t.Fatalf("a misspelt field passed kubeconform: %v\n%s", err, out)
			}
		})
	}
}
