package template

import (
	"regexp"
	"strings"

	"github.com/sandhold/sandhold/internal/fault"
)

// Host is the built-in template: the host's own /usr, read-only (the root
// every sandbox had before templates). It has no layers and no digest.
const Host = "host"

// DefaultTag is the tag of a name given without one.
const DefaultTag = "latest"

var (
	namePattern   = regexp.MustCompile(`^[a-z0-9]+(?:[._-][a-z0-9]+)*$`)
	tagPattern    = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	digestPattern = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)
)

// maxNameLen caps a template's name.
const maxNameLen = 128

// Ref names a template: "name", "name:tag", "name@sha256:…",
// "name:tag@sha256:…" or a bare "sha256:…" digest.
type Ref struct {
	Name   string
	Tag    string
	Digest string
}

// String is the reference as a user writes it.
func (r Ref) String() string {
	s := r.Name
	if r.Tag != "" {
		s += ":" + r.Tag
	}
	if r.Digest != "" {
		if s != "" {
			s += "@"
		}
		s += r.Digest
	}
	return s
}

// ParseRef reads a template reference; field names the argument in errors.
// "host" is the built-in template.
func ParseRef(field, s string) (Ref, error) {
	var r Ref
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		r.Digest, s = s[i+1:], s[:i]
		if !digestPattern.MatchString(r.Digest) {
			return Ref{}, fault.InvalidField(field, "a template digest is sha256: and 64 lowercase hex digits")
		}
	} else if digestPattern.MatchString(s) {
		return Ref{Digest: s}, nil
	}
	if s == "" {
		if r.Digest != "" {
			return r, nil
		}
		return Ref{}, fault.InvalidField(field, "a template name is required")
	}
	name, tag := s, ""
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		name, tag = s[:i], s[i+1:]
		if !tagPattern.MatchString(tag) {
			return Ref{}, fault.InvalidField(field, "a template tag is 1 to 128 letters, digits, '_', '.' or '-'")
		}
	}
	if len(name) > maxNameLen || !namePattern.MatchString(name) {
		return Ref{}, fault.InvalidField(field, "a template name is lowercase letters and digits, separated by '.', '_' or '-', at most 128 characters")
	}
	if tag == "" {
		tag = DefaultTag
	}
	r.Name, r.Tag = name, tag
	return r, nil
}

// IsHost says whether a reference names the built-in host template.
func IsHost(s string) bool { return s == "" || s == Host || s == Host+":"+DefaultTag }

// PolicyName is the name a policy's template rules match for a template
// reference as a client wrote it: name:tag (latest when left out), host
// for the host's, the reference itself when it is a digest or not a valid
// one.
func PolicyName(ref string) string {
	if IsHost(ref) {
		return Host
	}
	r, err := ParseRef("template", ref)
	if err != nil || r.Name == "" {
		return ref
	}
	return r.Name + ":" + r.Tag
}

// SplitRecorded splits a reference as a sandbox records it (Template.Ref,
// or "" for the host's) into the name:tag and the digest ("host" and ""
// for the host template).
func SplitRecorded(ref string) (name, digest string) {
	if ref == "" {
		return Host, ""
	}
	name, digest, _ = strings.Cut(ref, "@")
	if strings.HasPrefix(name, "sha256:") {
		return "", name
	}
	return name, digest
}
