package dispatch

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/sandhold/sandhold/internal/fault"
)

// ArgError is one field problem of a leniently read request, in pydantic's
// terms (AIO's server is FastAPI): where (Loc, field names below the
// body), what (Msg) and pydantic's error type (Type: missing, int_type,
// enum, …). The AIO edge turns a list of them into AIO's 422 body.
type ArgError struct {
	Loc  []string
	Msg  string
	Type string
}

// ArgErrors are every field problem of one request, sorted by field. A
// lenient decode returns them inside a fault.Invalid (errors.As finds them).
type ArgErrors []ArgError

func (e ArgErrors) Error() string {
	if len(e) == 0 {
		return "invalid arguments"
	}
	return e[0].Msg
}

// argFault wraps problems in the fault every caller understands: Invalid,
// naming the first field.
func argFault(problems ArgErrors) error {
	first := problems[0]
	field, msg := "body", first.Msg
	if len(first.Loc) > 0 {
		field = "body." + strings.Join(first.Loc, ".")
		msg = "field " + strings.Join(first.Loc, ".") + ": " + first.Msg
	}
	return &fault.Error{Kind: fault.Invalid, Field: field, Msg: msg, Err: problems}
}

// DecodeAIO reads raw the way AIO's pydantic models do, for AIO's HTTP
// rows: the lenient rules of DecodeArgs (see decodeLax), and beside them a
// body that is not an object (null included) is refused and required
// names fields the row requires beyond A's required tags. Field rules
// (A's Validate) are the caller's to run, as for DecodeArgs.
func DecodeAIO[A any](raw []byte, required []string) (A, error) {
	return decodeLax[A](raw, required, false)
}

// decodeLax is the one lenient (pydantic-like) decoder: an object (an empty
// body is {}; null too when nullIsEmpty), unknown fields ignored, null
// meaning absent, required fields (A's required:"true" tags and required)
// present, every field of its type — integers in pydantic's lax mode (5,
// 5.0 and "5" are 5; 5.5, true and "five" are refused), floats finite —
// and strings within their enum tag. Every problem is reported, not only
// the first.
func decodeLax[A any](raw []byte, required []string, nullIsEmpty bool) (A, error) {
	var v A
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || (nullIsEmpty && bytes.Equal(raw, []byte("null"))) {
		raw = []byte("{}")
	}
	if !json.Valid(raw) {
		return v, argFault(ArgErrors{{Msg: "JSON decode error", Type: "json_invalid"}})
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return v, argFault(ArgErrors{{Msg: "Input should be a valid dictionary or object to extract fields from", Type: "model_attributes_type"}})
	}
	fields := fieldsOf(reflect.TypeFor[A]())
	exact := exactKeys[A]()
	var problems ArgErrors
	names := slices.Clone(required)
	for name, f := range fields {
		if f.Tag.Get("required") == "true" && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		if val, ok := obj[name]; !ok || isNull(val) {
			problems = append(problems, ArgError{Loc: []string{name}, Msg: "Field required", Type: "missing"})
		}
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, name := range keys {
		f, ok := fields[name]
		if !ok && exact {
			// Unknown fields are ignored, as pydantic does. Dropped,
			// not kept: encoding/json would bind a key that folds to a
			// field's name ("Mode", "ſandbox") past the checks here,
			// over the field's own key.
			delete(obj, name)
			continue
		}
		if !ok || isNull(obj[name]) {
			// Kept for a map A; null is absent (pydantic's Optional):
			// json leaves the field at its default.
			continue
		}
		norm, p := laxField(name, f, obj[name])
		if p != nil {
			problems = append(problems, *p)
			continue
		}
		obj[name] = norm
	}
	if len(problems) > 0 {
		return v, argFault(problems)
	}
	clean, err := json.Marshal(obj)
	if err == nil {
		err = json.Unmarshal(clean, &v)
	}
	if err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			var loc []string
			for _, p := range strings.Split(te.Field, ".") {
				if p != "" {
					loc = append(loc, p)
				}
			}
			typ := pydanticTypeOf(te.Type, te.Value)
			return v, argFault(ArgErrors{{Loc: loc, Msg: "Input should be a valid " + strings.TrimSuffix(typ, "_type"), Type: typ}})
		}
		return v, argFault(ArgErrors{{Msg: "Input does not match the operation's schema", Type: "value_error"}})
	}
	return v, nil
}

// exactKeys reports whether A's JSON keys are exactly jsonFields' names: a
// struct (or a pointer to one) that reads itself by encoding/json's field
// rules, not a map or a type of its own UnmarshalJSON.
func exactKeys[A any]() bool {
	t := reflect.TypeFor[A]()
	if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return false
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
		if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
			return false
		}
	}
	return t.Kind() == reflect.Struct
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// inexactKey is the first top-level key of raw (an object) that is not
// exactly the JSON name of one of A's fields but that encoding/json would
// bind to one, matching names without regard to case ("Sandbox",
// "ſandbox" for sandbox): the strict decoder refuses it, so a call names
// a field one way only and a key that folds to another cannot override it.
func inexactKey[A any](raw []byte) (string, bool) {
	if !exactKeys[A]() {
		return "", false
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return "", false // not an object: the decoder says what is wrong
	}
	fields := fieldsOf(reflect.TypeFor[A]())
	keys := make([]string, 0, len(obj))
	for k := range obj {
		if _, ok := fields[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		for name := range fields {
			if strings.EqualFold(k, name) {
				return k, true
			}
		}
	}
	return "", false
}

func isNull(v json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(v), []byte("null")) }

// fieldCache holds jsonFields by type (reflect.Type -> its map, read only).
var fieldCache sync.Map

// fieldsOf is jsonFields(t), worked out once per type: every call's
// arguments are read through it. The map is shared: read it only.
func fieldsOf(t reflect.Type) map[string]reflect.StructField {
	if f, ok := fieldCache.Load(t); ok {
		return f.(map[string]reflect.StructField)
	}
	f, _ := fieldCache.LoadOrStore(t, jsonFields(t))
	return f.(map[string]reflect.StructField)
}

// jsonFields maps the JSON names of t's fields (embedded structs
// flattened) to the fields. An embedded struct's required tag makes each
// of its fields required (SchemaFor).
func jsonFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return out
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			for k, v := range jsonFields(f.Type) {
				if f.Tag.Get("required") == "true" && v.Tag.Get("required") != "true" {
					v.Tag = reflect.StructTag(strings.TrimSpace(string(v.Tag) + ` required:"true"`))
				}
				out[k] = v
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f
	}
	return out
}

// laxField checks one present field beyond its JSON type: integers the
// lax way (returned rewritten as an integer), finite floats and enums.
func laxField(name string, f reflect.StructField, val json.RawMessage) (json.RawMessage, *ArgError) {
	t := f.Type
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	loc := []string{name}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		text := strings.TrimSpace(string(val))
		if s, err := strconv.Unquote(text); err == nil && strings.HasPrefix(text, `"`) {
			n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
			if err != nil {
				return nil, &ArgError{Loc: loc, Msg: "Input should be a valid integer", Type: "int_type"}
			}
			return json.RawMessage(strconv.FormatInt(n, 10)), nil
		}
		if text == "" || (text[0] != '-' && (text[0] < '0' || text[0] > '9')) {
			return nil, &ArgError{Loc: loc, Msg: "Input should be a valid integer", Type: "int_type"}
		}
		x, err := strconv.ParseFloat(text, 64)
		switch {
		case err != nil || math.IsInf(x, 0) || math.IsNaN(x):
			return nil, &ArgError{Loc: loc, Msg: "Input should be a finite number", Type: "finite_number"}
		case x != math.Trunc(x):
			return nil, &ArgError{Loc: loc, Msg: "Input should be a valid integer, got a number with a fractional part", Type: "int_from_float"}
		case math.Abs(x) > 1<<53:
			return nil, &ArgError{Loc: loc, Msg: "Input should be a valid integer, unable to parse number as an integer", Type: "int_parsing_size"}
		}
		return json.RawMessage(strconv.FormatInt(int64(x), 10)), nil
	case reflect.Float32, reflect.Float64:
		var x json.Number
		if json.Unmarshal(val, &x) == nil {
			if f, err := x.Float64(); err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
				return nil, &ArgError{Loc: loc, Msg: "Input should be a finite number", Type: "finite_number"}
			}
		}
	case reflect.String:
		enum := f.Tag.Get("enum")
		var s string
		if enum == "" || json.Unmarshal(val, &s) != nil {
			break
		}
		opts := strings.Split(enum, ",")
		if !slices.Contains(opts, s) {
			quoted := make([]string, len(opts))
			for i, o := range opts {
				quoted[i] = "'" + o + "'"
			}
			msg := "Input should be " + quoted[0]
			if n := len(quoted); n > 1 {
				msg = "Input should be " + strings.Join(quoted[:n-1], ", ") + " or " + quoted[n-1]
			}
			return nil, &ArgError{Loc: loc, Msg: msg, Type: "enum"}
		}
	}
	return val, nil
}

// pydanticTypeOf names a Go type the way pydantic's error types do.
func pydanticTypeOf(t reflect.Type, value string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "bool_type"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if strings.HasPrefix(value, "number") {
			return "int_parsing_size"
		}
		return "int_type"
	case reflect.Float32, reflect.Float64:
		if strings.HasPrefix(value, "number") {
			return "finite_number"
		}
		return "float_type"
	case reflect.Slice, reflect.Array:
		return "list_type"
	case reflect.Map, reflect.Struct:
		return "dict_type"
	}
	return "string_type"
}
