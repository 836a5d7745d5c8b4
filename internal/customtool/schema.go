package customtool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/sandhold/sandhold/internal/fault"
)

// maxSchemaBytes caps an input schema.
const maxSchemaBytes = 64 << 10

// schemaURL is the in-memory name of a schema being compiled.
const schemaURL = "mem:///input-schema.json"

// Schema is a compiled input schema (JSON Schema 2020-12, validated with
// github.com/santhosh-tekuri/jsonschema/v6). $ref is refused and the
// compiler has no loader, so compiling and validating never read a file or
// the network.
type Schema struct {
	s    *jsonschema.Schema
	Raw  json.RawMessage
	Args []string // the top-level property names (the {arg} placeholders)
}

// noLoader refuses every external reference.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schemas may not refer to %s", url)
}

// compileSchema checks an input schema: an object schema, no $ref.
func compileSchema(raw json.RawMessage) (*Schema, error) {
	if len(raw) == 0 {
		raw = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	if len(raw) > maxSchemaBytes {
		return nil, fault.InvalidField("inputSchema", fmt.Sprintf("inputSchema is larger than %d bytes", maxSchemaBytes))
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fault.InvalidField("inputSchema", "inputSchema is not valid JSON")
	}
	obj, ok := doc.(map[string]any)
	if !ok || obj["type"] != "object" {
		return nil, fault.InvalidField("inputSchema.type", `inputSchema must be an object schema ("type": "object")`)
	}
	if hasRef(doc, 0) {
		return nil, fault.InvalidField("inputSchema", "inputSchema may not use $ref or $dynamicRef")
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fault.InvalidField("inputSchema", "inputSchema is not a valid schema")
	}
	s, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fault.InvalidField("inputSchema", "inputSchema is not a valid schema: "+strings.ReplaceAll(err.Error(), schemaURL, "inputSchema"))
	}
	out := &Schema{s: s, Raw: raw}
	if props, ok := obj["properties"].(map[string]any); ok {
		for name := range props {
			out.Args = append(out.Args, name)
		}
	}
	return out, nil
}

func hasRef(v any, depth int) bool {
	if depth > 64 {
		return true // too deep to check: refuse
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if k == "$ref" || k == "$dynamicRef" || k == "$recursiveRef" || hasRef(e, depth+1) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if hasRef(e, depth+1) {
				return true
			}
		}
	}
	return false
}

var printer = message.NewPrinter(language.English)

// validate checks arguments decoded with jsonschema.UnmarshalJSON; the
// error (422) names the offending field: arguments.path.to.field.
func (s *Schema) validate(v any) error {
	err := s.s.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &fault.Error{Kind: fault.Unprocessable, Field: "arguments", Msg: "arguments do not match the tool's input schema"}
	}
	// The first leaf is the most specific finding.
	for steps := 0; len(ve.Causes) > 0 && steps < 64; steps++ {
		ve = ve.Causes[0]
	}
	path := append([]string{"arguments"}, ve.InstanceLocation...)
	if req, ok := ve.ErrorKind.(*kind.Required); ok && len(req.Missing) > 0 {
		path = append(path, req.Missing[0])
	}
	field := strings.Join(path, ".")
	return &fault.Error{Kind: fault.Unprocessable, Field: field,
		Msg: fmt.Sprintf("%s: %s", field, ve.ErrorKind.LocalizedString(printer))}
}
