package approvals

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strconv"
)

// Caps on canonicalising arguments: they come from the caller.
const (
	maxCanonDepth = 32      // nesting of structs, maps and slices
	maxCanonItems = 100_000 // values visited in all
)

// Hash is the canonical digest of a call: the tool name and its typed
// arguments. Every exported field counts, whatever its JSON tag says
// (exec's request is tagged json:"-" in its outer struct), map keys are
// sorted, pointers are followed, and raw JSON is decoded and re-encoded
// with sorted keys — so two calls hash alike exactly when they would do
// the same thing.
func Hash(tool string, args any) string {
	h := sha256.New()
	_, _ = io.WriteString(h, tool)
	_, _ = h.Write([]byte{0})
	w := &canon{w: h}
	w.value(reflect.ValueOf(args), 0)
	if w.overflow {
		// Too large to canonicalise: bind to something no other call
		// shares, so the approval can never be replayed.
		nonce := make([]byte, 16)
		_, _ = rand.Read(nonce) // crypto/rand never fails on Linux
		_, _ = fmt.Fprintf(h, "overflow:%x", nonce)
	}
	return hex.EncodeToString(h.Sum(nil))
}

type canon struct {
	w        io.Writer
	items    int
	overflow bool
}

func (c *canon) put(tag byte, s string) {
	_, _ = c.w.Write([]byte{tag})
	_, _ = io.WriteString(c.w, strconv.Itoa(len(s)))
	_, _ = c.w.Write([]byte{':'})
	_, _ = io.WriteString(c.w, s)
}

var rawType = reflect.TypeFor[json.RawMessage]()

func (c *canon) value(v reflect.Value, depth int) {
	c.items++
	if depth > maxCanonDepth || c.items > maxCanonItems {
		c.overflow = true
		return
	}
	if !v.IsValid() {
		c.put('z', "")
		return
	}
	if v.Type() == rawType {
		var x any
		if err := json.Unmarshal(v.Bytes(), &x); err != nil {
			c.put('r', string(v.Bytes()))
			return
		}
		c.value(reflect.ValueOf(x), depth+1)
		return
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			c.put('n', "")
			return
		}
		c.value(v.Elem(), depth+1)
	case reflect.Struct:
		t := v.Type()
		c.put('S', t.String())
		for i := range t.NumField() {
			if !t.Field(i).IsExported() {
				continue
			}
			c.put('f', t.Field(i).Name)
			c.value(v.Field(i), depth+1)
		}
	case reflect.Map:
		keys := v.MapKeys()
		ks := make([]string, len(keys))
		idx := make(map[string]reflect.Value, len(keys))
		for i, k := range keys {
			ks[i] = fmt.Sprint(k.Interface())
			idx[ks[i]] = k
		}
		sort.Strings(ks)
		c.put('M', strconv.Itoa(len(ks)))
		for _, k := range ks {
			c.put('k', k)
			c.value(v.MapIndex(idx[k]), depth+1)
		}
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			c.put('b', string(v.Bytes()))
			return
		}
		c.put('L', strconv.Itoa(v.Len()))
		for i := range v.Len() {
			c.value(v.Index(i), depth+1)
		}
	case reflect.String:
		c.put('s', v.String())
	case reflect.Bool:
		c.put('t', strconv.FormatBool(v.Bool()))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		c.put('i', strconv.FormatInt(v.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		c.put('u', strconv.FormatUint(v.Uint(), 10))
	case reflect.Float32, reflect.Float64:
		c.put('d', strconv.FormatFloat(v.Float(), 'g', -1, 64))
	default:
		// Channels, functions: no content to compare; never equal.
		c.overflow = true
	}
}
