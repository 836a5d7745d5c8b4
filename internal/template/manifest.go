package template

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Limits are a template's default sandbox limits (what limits a create
// leaves at zero take); the server's maxima still apply.
type Limits struct {
	MemoryBytes int64 `json:"memory,omitempty"`
	CPUMilli    int64 `json:"cpu,omitempty"`
	Pids        int64 `json:"pids,omitempty"`
	DiskBytes   int64 `json:"disk,omitempty"`
}

// Config is how a template's sandboxes run: what an image's config says
// (env, working directory, user, entrypoint and command), plus sandhold's
// own defaults.
type Config struct {
	// Env are KEY=VALUE pairs every command starts with (the caller's env
	// goes on top).
	Env []string `json:"env,omitempty"`
	// WorkingDir is where commands start (default /workspace).
	WorkingDir string `json:"workdir,omitempty"`
	// User is the image's USER as written; UID and GID are what it
	// resolved to in the template's /etc/passwd and /etc/group (0 when
	// User is empty: the root of the sandbox's user namespace, an
	// unprivileged host uid).
	User string `json:"user,omitempty"`
	UID  int    `json:"uid"`
	GID  int    `json:"gid"`
	// Shell runs a command line (exec's command): /bin/bash where the
	// template has it, else /bin/sh (Txn.Put finds it).
	Shell string `json:"shell,omitempty"`
	// Entrypoint and Cmd are the image's start command.
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
	// Limits are default sandbox limits.
	Limits Limits `json:"limits,omitzero"`
	// Browser says the template carries a browser the sandbox's browser
	// capability may start.
	Browser bool              `json:"browser,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
}

// StartCommand is the template's start command: entrypoint then cmd.
func (c Config) StartCommand() []string {
	return append(append([]string(nil), c.Entrypoint...), c.Cmd...)
}

// EnvMap is Env as a map (a later duplicate wins).
func (c Config) EnvMap() map[string]string {
	m := make(map[string]string, len(c.Env))
	for _, kv := range c.Env {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			m[k] = v
		}
	}
	return m
}

// Layer is one layer of a template: the digest of its uncompressed tar
// stream (an OCI diff id), which names its directory in the store.
type Layer struct {
	Digest  string `json:"digest"`
	Bytes   int64  `json:"bytes"`
	Entries int    `json:"entries"`
}

// Source says where a template came from.
type Source struct {
	// Kind is registry, upload, build or commit.
	Kind string `json:"kind"`
	// Image is the registry reference pulled ("docker.io/library/python:3.12-slim").
	Image string `json:"image,omitempty"`
	// ImageDigest is the pulled or uploaded image's manifest digest.
	ImageDigest string `json:"image_digest,omitempty"`
	// Parent is the template a build started FROM or a sandbox was
	// committed from (its digest).
	Parent string `json:"parent,omitempty"`
	// Sandbox is the sandbox a commit was made of.
	Sandbox string `json:"sandbox,omitempty"`
	// Build is the build whose log is kept (builds only).
	Build string `json:"build,omitempty"`
}

// Manifest is what a template's digest covers: its layers, lowest first,
// its config and its source.
type Manifest struct {
	Layers  []Layer   `json:"layers"`
	Config  Config    `json:"config"`
	Source  Source    `json:"source"`
	Created time.Time `json:"created"`
}

// Digest is the manifest's content address: sha256 of its JSON.
func (m Manifest) Digest() (string, []byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return "", nil, fmt.Errorf("encode template manifest: %w", err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), b, nil
}

// Bytes is the sum of the layers' bytes.
func (m Manifest) Bytes() int64 {
	var n int64
	for _, l := range m.Layers {
		n += l.Bytes
	}
	return n
}

// Template is a named template as clients see it.
type Template struct {
	// Name and Tag are how it was named ("" for a template known only by
	// its digest).
	Name string `json:"name,omitempty"`
	Tag  string `json:"tag,omitempty"`
	// Digest is the manifest's content address.
	Digest string `json:"digest"`
	// Owner is the key that made it; "" for a public template (one an
	// admin made: every key may use it).
	Owner   string    `json:"owner,omitempty"`
	Created time.Time `json:"created"`
	// Bytes is what its layers take in the store (shared layers counted
	// in each template).
	Bytes    int64    `json:"bytes"`
	Manifest Manifest `json:"manifest"`
}

// Ref is the template's name:tag@digest.
func (t Template) Ref() string {
	return Ref{Name: t.Name, Tag: t.Tag, Digest: t.Digest}.String()
}

// Event is one step of a pull, an import or a build, for a client's
// progress.
type Event struct {
	// Step is resolve, layer, step (a build's instruction), output (a
	// RUN's output, in Message), cached or done.
	Step string `json:"step"`
	// Layer counts layers: this one (1-based) of Layers.
	Layer  int    `json:"layer,omitempty"`
	Layers int    `json:"layers,omitempty"`
	Digest string `json:"digest,omitempty"`
	Bytes  int64  `json:"bytes,omitempty"`
	// Cached says the layer was in the store already.
	Cached  bool   `json:"cached,omitempty"`
	Message string `json:"message,omitempty"`
	// Stream is stdout or stderr for a RUN's output.
	Stream string `json:"stream,omitempty"`
}

// Progress receives events; nil drops them.
type Progress func(Event)

func (p Progress) Send(e Event) {
	if p != nil {
		p(e)
	}
}
