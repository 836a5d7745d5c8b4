// Command schemagen writes kubeconform's JSON schemas for the Kubernetes
// object kinds, offline: it converts the Kubernetes OpenAPI (v2) document
// that a Go module ships (by default Kubernetes v1.27.0's, which
// k8s.io/kube-openapi carries as pkg/schemaconv/testdata/swagger.json,
// fetched with `go mod download` like any module) into one standalone, strict schema per kind, named the way
// kubeconform's -schema-location template expects:
// <kind>-<group>-<version>.json (core kinds: <kind>-<version>.json).
//
// "Standalone": every $ref is inlined (kubeconform reads one file per
// kind). "Strict": objects with declared properties refuse unknown ones
// (additionalProperties: false), so a misspelt or misplaced field in the
// chart fails validation instead of being dropped by the API server. As in
// kubeconform's own schema sets, fields may be null, int-or-string fields
// take either, quantities take a string or a number, and apiVersion/kind
// are pinned to the kind's.
//
// Usage: go run ./deploy/kubernetes/schemagen -out DIR
// [-module k8s.io/kube-openapi@VERSION -file pkg/schemaconv/testdata/swagger.json]
// or -swagger FILE.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	out := flag.String("out", "", "directory to write the schemas to")
	module := flag.String("module", "k8s.io/kube-openapi@v0.0.0-20260721132016-d427ff9ee9ad", "Go module (path@version) that ships the OpenAPI document")
	file := flag.String("file", "pkg/schemaconv/testdata/swagger.json", "the document's path inside the module")
	swagger := flag.String("swagger", "", "read this OpenAPI v2 document instead of the module's")
	flag.Parse()
	if *out == "" {
		fail(errors.New("-out is required"))
	}
	path := *swagger
	if path == "" {
		dir, err := moduleDir(*module)
		if err != nil {
			fail(err)
		}
		path = filepath.Join(dir, filepath.FromSlash(*file))
	}
	n, version, err := generate(path, *out)
	if err != nil {
		fail(err)
	}
	fmt.Printf("schemagen: %d kinds of Kubernetes %s into %s\n", n, version, *out)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "schemagen:", err)
	os.Exit(1)
}

// moduleDir downloads module (path@version) into the module cache and
// returns its directory.
func moduleDir(module string) (string, error) {
	// #nosec G204 -- the go command with a module path from the command line
	out, err := exec.Command("go", "mod", "download", "-json", module).Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w", module, err)
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		return "", fmt.Errorf("go mod download %s: no directory (%s)", module, m.Error)
	}
	return m.Dir, nil
}

type gvk struct{ Group, Version, Kind string }

func generate(swaggerPath, outDir string) (n int, version string, err error) {
	raw, err := os.ReadFile(filepath.Clean(swaggerPath))
	if err != nil {
		return 0, "", err
	}
	var doc struct {
		Info        struct{ Version string }  `json:"info"`
		Definitions map[string]map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return 0, "", fmt.Errorf("%s: %w", swaggerPath, err)
	}
	if len(doc.Definitions) == 0 {
		return 0, "", fmt.Errorf("%s: no definitions", swaggerPath)
	}
	if err := os.MkdirAll(outDir, 0o750); err != nil {
		return 0, "", err
	}
	c := &converter{defs: doc.Definitions}
	names := make([]string, 0, len(doc.Definitions))
	for name := range doc.Definitions {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		def := doc.Definitions[name]
		for _, k := range kinds(def) {
			s := c.convert(def, map[string]bool{name: true})
			pin(s, k)
			s["$schema"] = "http://json-schema.org/schema#"
			b, err := json.MarshalIndent(s, "", "  ")
			if err != nil {
				return n, "", err
			}
			if err := os.WriteFile(filepath.Join(outDir, fileName(k)), b, 0o600); err != nil {
				return n, "", err
			}
			n++
		}
	}
	return n, doc.Info.Version, nil
}

// kinds returns the group/version/kinds a definition is the schema of.
func kinds(def map[string]any) []gvk {
	list, _ := def["x-kubernetes-group-version-kind"].([]any)
	var out []gvk
	for _, e := range list {
		m, _ := e.(map[string]any)
		g, _ := m["group"].(string)
		v, _ := m["version"].(string)
		k, _ := m["kind"].(string)
		if k != "" && v != "" {
			out = append(out, gvk{g, v, k})
		}
	}
	return out
}

// fileName is kubeconform's {{.ResourceKind}}{{.KindSuffix}}.json.
func fileName(k gvk) string {
	name := strings.ToLower(k.Kind)
	if k.Group != "" {
		name += "-" + strings.ToLower(strings.Split(k.Group, ".")[0])
	}
	return name + "-" + strings.ToLower(k.Version) + ".json"
}

// pin fixes apiVersion and kind to the kind's own.
func pin(s map[string]any, k gvk) {
	props, _ := s["properties"].(map[string]any)
	if props == nil {
		return
	}
	api := k.Version
	if k.Group != "" {
		api = k.Group + "/" + k.Version
	}
	props["apiVersion"] = map[string]any{"type": []any{"string", "null"}, "enum": []any{api}}
	props["kind"] = map[string]any{"type": []any{"string", "null"}, "enum": []any{k.Kind}}
}

type converter struct{ defs map[string]map[string]any }

// convert returns s as a standalone strict JSON schema. seen holds the
// definitions being inlined on this path: a recursive one (only
// JSONSchemaProps, in CRDs) is left open rather than expanded forever.
func (c *converter) convert(s map[string]any, seen map[string]bool) map[string]any {
	if ref, ok := s["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/definitions/")
		def, ok := c.defs[name]
		if !ok || seen[name] {
			return map[string]any{}
		}
		seen[name] = true
		defer delete(seen, name)
		return c.convert(def, seen)
	}
	out := map[string]any{}
	switch s["format"] {
	case "int-or-string":
		return map[string]any{"oneOf": []any{
			map[string]any{"type": []any{"string", "null"}}, map[string]any{"type": []any{"integer", "null"}}}}
	case "quantity":
		return map[string]any{"oneOf": []any{
			map[string]any{"type": []any{"string", "null"}}, map[string]any{"type": []any{"number", "null"}}}}
	}
	if t, ok := s["type"].(string); ok {
		out["type"] = []any{t, "null"}
	}
	for _, k := range []string{"enum", "required", "minimum", "maximum", "minLength", "maxLength", "pattern", "minItems", "maxItems"} {
		if v, ok := s[k]; ok {
			out[k] = v
		}
	}
	if props, ok := s["properties"].(map[string]any); ok {
		p := make(map[string]any, len(props))
		for name, v := range props {
			if m, ok := v.(map[string]any); ok {
				p[name] = c.convert(m, seen)
			}
		}
		out["properties"] = p
		out["additionalProperties"] = false
	}
	if ap, ok := s["additionalProperties"].(map[string]any); ok {
		out["additionalProperties"] = c.convert(ap, seen)
	}
	if items, ok := s["items"].(map[string]any); ok {
		out["items"] = c.convert(items, seen)
	}
	return out
}
