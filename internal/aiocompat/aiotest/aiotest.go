// Package aiotest validates sandhold's AIO-compatible responses against
// AIO Sandbox's own OpenAPI document (1.9.4, kept at
// ../shared/reference/ next to the repository), so a route that drifts
// from AIO's shapes fails a test instead of an SDK in the field.
//
// Use it from tests only:
//
//	v := aiotest.Load(t) // skips when the reference document is absent
//	v.Check(t, "POST", "/v1/file/read", status, body)
//
// Check validates the body against the schema of the operation's 200
// response whatever the status: AIO answers failures with the same
// envelope (success false, a FileOperationError or null as data), and
// sandhold keeps that shape while using real status codes.
package aiotest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// RefFile is the reference document's name below the shared directory.
const RefFile = "aio-sandbox-openapi-1.9.4.json"

// Validator holds the loaded document.
type Validator struct {
	doc *openapi3.T
}

// Find locates the reference document: $AIO_OPENAPI, else
// ../shared/reference/RefFile relative to the module root (the directory
// holding go.mod, found upwards from the working directory).
func Find() (string, error) {
	if p := os.Getenv("AIO_OPENAPI"); p != "" {
		return p, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	// The module root is at most a few levels up; 32 bounds the walk.
	for range 32 {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, "..", "shared", "reference", RefFile)
			if _, err := os.Stat(p); err != nil {
				return "", err
			}
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return "", fmt.Errorf("no go.mod above the working directory")
}

// Load reads and validates the reference document; the test is skipped
// (with the reason) when it is absent.
func Load(t testing.TB) *Validator {
	t.Helper()
	p, err := Find()
	if err != nil {
		t.Skipf("AIO reference OpenAPI document not available (%v); set AIO_OPENAPI", err)
	}
	v, err := LoadFile(p)
	if err != nil {
		t.Fatalf("load %s: %v", p, err)
	}
	return v
}

// LoadFile reads and validates a document.
func LoadFile(p string) (*Validator, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(p)
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("reference document invalid: %w", err)
	}
	return &Validator{doc: doc}, nil
}

// Operation returns AIO's operation for method and path (AIO's path
// template, e.g. /v1/file/watch/{watcher_id}/poll).
func (v *Validator) Operation(method, path string) (*openapi3.Operation, error) {
	item := v.doc.Paths.Find(path)
	if item == nil {
		return nil, fmt.Errorf("AIO has no path %s", path)
	}
	op := item.GetOperation(strings.ToUpper(method))
	if op == nil {
		return nil, fmt.Errorf("AIO has no %s %s", method, path)
	}
	return op, nil
}

// Validate checks body against the JSON schema of the operation's 200
// response.
func (v *Validator) Validate(method, path string, body []byte) error {
	op, err := v.Operation(method, path)
	if err != nil {
		return err
	}
	resp := op.Responses.Status(200)
	if resp == nil || resp.Value == nil {
		return fmt.Errorf("%s %s: AIO documents no 200 response", method, path)
	}
	mt := resp.Value.Content.Get("application/json")
	if mt == nil || mt.Schema == nil || mt.Schema.Value == nil {
		return fmt.Errorf("%s %s: AIO documents no JSON 200 body", method, path)
	}
	var value any
	if err := json.Unmarshal(body, &value); err != nil {
		return fmt.Errorf("%s %s: body is not JSON: %w", method, path, err)
	}
	opts := []openapi3.SchemaValidationOption{openapi3.MultiErrors()}
	if v.doc.IsOpenAPI31OrLater() {
		opts = append(opts, openapi3.EnableJSONSchema2020())
	}
	if err := mt.Schema.Value.VisitJSON(value, opts...); err != nil {
		return fmt.Errorf("%s %s: response does not match AIO's schema: %w", method, path, err)
	}
	return nil
}

// Check is Validate for tests: it fails t with the body on a mismatch.
func (v *Validator) Check(t testing.TB, method, path string, status int, body []byte) {
	t.Helper()
	if err := v.Validate(method, path, body); err != nil {
		t.Errorf("status %d: %v\nbody: %s", status, err, truncate(body))
	}
}

// SchemaOf returns the named component schema (for tests that check a
// nested value, e.g. FileOperationError).
func (v *Validator) SchemaOf(name string) (*openapi3.Schema, error) {
	ref := v.doc.Components.Schemas[name]
	if ref == nil || ref.Value == nil {
		return nil, fmt.Errorf("AIO has no schema %s", name)
	}
	return ref.Value, nil
}

// ValidateValue checks a decoded JSON value against a named component
// schema.
func (v *Validator) ValidateValue(name string, value any) error {
	s, err := v.SchemaOf(name)
	if err != nil {
		return err
	}
	opts := []openapi3.SchemaValidationOption{openapi3.MultiErrors()}
	if v.doc.IsOpenAPI31OrLater() {
		opts = append(opts, openapi3.EnableJSONSchema2020())
	}
	return s.VisitJSON(value, opts...)
}

func truncate(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + "…"
	}
	return string(b)
}
