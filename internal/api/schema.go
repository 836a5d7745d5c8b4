package api

import (
	"path"
	"reflect"
	"strings"
	"unicode"
	"unicode/utf8"
)

// schemaHomes maps a Go package's import path to the package whose name its
// types' schemas carry: the API's names are the capability's, whichever of
// its packages holds the type. Add a line when an API type moves down.
var schemaHomes = map[string]string{
	"github.com/sandhold/sandhold/internal/sandbox/execrun": "github.com/sandhold/sandhold/internal/sandbox",
	"github.com/sandhold/sandhold/internal/sandbox/netmode": "github.com/sandhold/sandhold/internal/sandbox",
}

// schemaName names OpenAPI schemas. huma's default drops the package, so two
// packages' `Record` types would collide (huma panics on duplicates) as more
// subsystems register routes. Types outside this package get their package
// name as a prefix: audit.Record → AuditRecord, Envelope[[]auth.KeyInfo] →
// EnvelopeListAuthKeyInfo.
//
// A type in a package listed in schemaHomes is named after the package it
// maps to instead, so moving a type into a lower floor of its capability
// (internal/sandbox/... → a package of its own) leaves the API unchanged.
func schemaName(t reflect.Type, hint string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	name := t.Name()
	if name == "" {
		name = hint
	} else if p := t.PkgPath(); p != "" && path.Base(p) != "api" {
		name = p + "." + name
	}
	for from, to := range schemaHomes {
		name = strings.ReplaceAll(name, from+".", to+".") // also in a generic's arguments
	}
	name = strings.ReplaceAll(name, "[]", "List[")
	var b strings.Builder
	for _, part := range strings.FieldsFunc(name, func(r rune) bool {
		return r == '[' || r == ']' || r == '*' || r == ',' || r == ' '
	}) {
		part = part[strings.LastIndex(part, "/")+1:] // github.com/x/internal/audit.Record → audit.Record
		part = strings.TrimPrefix(part, "api.")
		for _, seg := range strings.Split(part, ".") {
			if seg == "" {
				continue
			}
			r, size := utf8.DecodeRuneInString(seg)
			b.WriteRune(unicode.ToUpper(r))
			b.WriteString(seg[size:])
		}
	}
	return b.String()
}
