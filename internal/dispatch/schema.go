package dispatch

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// SchemaFor is the JSON schema of an argument type, as /v1/tools and MCP
// list it: an object with its JSON field names, derived from the type so
// that it cannot drift from what the decoder accepts. Field tags add what
// the Go type cannot say:
//
//	doc:"…"            description
//	required:"true"    the field must be present
//	enum:"a,b,c"       allowed values (strings, or numbers for number fields)
//	minimum, maximum   bounds of a number
//	minLength, maxLength, maxItems  bounds of a string or array
//
// Nested structs are inlined (MCP clients do not resolve $ref), embedded
// structs are flattened like encoding/json does, and a type that refers to
// itself is cut off as an open object past a small depth. Tags on an
// embedded struct apply to each of its fields, over the fields' own: an
// E2B call must name its sandbox (dispatch.On tagged required:"true").
func SchemaFor[A any]() json.RawMessage {
	t := reflect.TypeFor[A]()
	s := schemaOf(t, 0)
	if s["type"] != "object" {
		// Tool arguments are always an object on the wire.
		s = map[string]any{"type": "object"}
	}
	b, err := json.Marshal(s)
	if err != nil {
		return json.RawMessage(`{"type":"object"}`)
	}
	return b
}

const maxSchemaDepth = 6

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	timeType       = reflect.TypeFor[time.Time]()
	durationType   = reflect.TypeFor[time.Duration]()
)

func schemaOf(t reflect.Type, depth int) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == rawMessageType || t.Kind() == reflect.Interface:
		return map[string]any{}
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t == durationType:
		return map[string]any{"type": "integer", "description": "nanoseconds"}
	}
	switch t.Kind() {
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string", "contentEncoding": "base64"}
		}
		if depth >= maxSchemaDepth {
			return map[string]any{"type": "array"}
		}
		return map[string]any{"type": "array", "items": schemaOf(t.Elem(), depth+1)}
	case reflect.Map:
		if depth >= maxSchemaDepth {
			return map[string]any{"type": "object"}
		}
		return map[string]any{"type": "object", "additionalProperties": schemaOf(t.Elem(), depth+1)}
	case reflect.Struct:
		if depth >= maxSchemaDepth {
			return map[string]any{"type": "object"}
		}
		props := map[string]any{}
		var required []string
		addFields(t, depth, props, &required, "")
		s := map[string]any{"type": "object", "properties": props}
		if len(required) > 0 {
			// "required": null is not valid JSON Schema; strict clients
			// (the TypeScript MCP SDK) refuse the whole tool list for it.
			s["required"] = required
		}
		return s
	}
	return map[string]any{}
}

// addFields adds t's fields to props; outer is the tag of the embedded
// field t stands for ("" at the top).
func addFields(t reflect.Type, depth int, props map[string]any, required *[]string, outer reflect.StructTag) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				addFields(ft, depth, props, required, f.Tag)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		s := schemaOf(f.Type, depth+1)
		applyTags(s, f.Tag)
		applyTags(s, outer)
		props[name] = s
		if f.Tag.Get("required") == "true" || outer.Get("required") == "true" {
			*required = append(*required, name)
		}
	}
}

func applyTags(s map[string]any, tag reflect.StructTag) {
	if d := tag.Get("doc"); d != "" {
		s["description"] = d
	}
	if e := tag.Get("enum"); e != "" {
		var vals []any
		for _, v := range strings.Split(e, ",") {
			if s["type"] == "integer" || s["type"] == "number" {
				if n, err := strconv.ParseFloat(v, 64); err == nil {
					vals = append(vals, n)
					continue
				}
			}
			vals = append(vals, v)
		}
		s["enum"] = vals
	}
	for _, k := range []string{"minimum", "maximum", "minLength", "maxLength", "maxItems"} {
		if v := tag.Get(k); v != "" {
			if n, err := strconv.ParseFloat(v, 64); err == nil {
				s[k] = n
			}
		}
	}
}
