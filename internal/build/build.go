package build

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox"
	"github.com/sandhold/sandhold/internal/template"
	"github.com/sandhold/sandhold/internal/template/oci"
)

// Caps of a build, with their reasons.
const (
	// maxLog bounds a build's kept log (a RUN may print without end).
	maxLog = 16 << 20
	// outputChunk is the most output read at once from a RUN.
	outputChunk = 32 << 10
)

// Builder builds Dockerfiles into templates.
type Builder struct {
	store     *template.Store
	sandboxes *sandbox.Manager
	d         *dispatch.Dispatcher // RUN steps are dispatched exec.run calls, like every other call
	puller    *oci.Puller
	// maxContext caps an uploaded context.
	maxContext int64
	log        *slog.Logger
}

// NewBuilder makes a builder. puller may be nil (FROM an image is then
// refused).
func NewBuilder(st *template.Store, m *sandbox.Manager, d *dispatch.Dispatcher, p *oci.Puller, maxContext int64, log *slog.Logger) *Builder {
	if log == nil {
		log = slog.Default()
	}
	return &Builder{store: st, sandboxes: m, d: d, puller: p, maxContext: maxContext, log: log}
}

// Args is template.build's arguments.
type Args struct {
	Name string `json:"name" required:"true" maxLength:"128" doc:"the template's name"`
	Tag  string `json:"tag,omitempty" maxLength:"128" doc:"the template's tag (default latest)"`
	// Dockerfile is the Dockerfile's text; empty: the context's
	// Dockerfile.
	Dockerfile string            `json:"dockerfile,omitempty" maxLength:"1048576" doc:"the Dockerfile (the subset: FROM, RUN, COPY, ADD, ENV, ARG, WORKDIR, USER, LABEL, CMD, ENTRYPOINT); empty: the context's Dockerfile"`
	BuildArgs  map[string]string `json:"build_args,omitempty" doc:"values of the Dockerfile's ARGs"`
	// Network is the egress of the sandboxes RUN steps run in.
	Network   sandbox.Network `json:"network,omitzero" doc:"egress of the RUN steps' sandboxes (mode none by default; proxy with an allow list for apt-get or pip)"`
	NoCache   bool            `json:"no_cache,omitempty" doc:"run every step again instead of reusing cached layers"`
	Overrides oci.Overrides   `json:"overrides,omitzero"`
	// Context is the uploaded build context (a tar, or a gzipped tar)
	// COPY and ADD read from; nil: none.
	Context io.Reader `json:"-"`
	// Progress, if set, receives the build's steps and RUN output.
	Progress template.Progress `json:"-"`
}

// state is a build under way.
type state struct {
	b    *Builder
	c    auth.Caller
	a    Args
	id   string
	txn  *template.Txn
	logW *capWriter
	ctx2 *buildContext

	layers []template.Layer
	cfg    template.Config
	vars   map[string]string // ARG values
	args   map[string]bool   // declared ARGs
	key    string
	parent string
	steps  int
	cached int
}

// Build runs a build for c and names its template a.Name:a.Tag.
func (b *Builder) Build(ctx context.Context, c auth.Caller, a Args) (template.Template, error) {
	if _, err := template.ParseRef("name", a.Name+":"+tagOr(a.Tag)); err != nil {
		return template.Template{}, err
	}
	if b.sandboxes == nil {
		return template.Template{}, fault.New(fault.Unavailable, "this server builds no templates")
	}
	st := &state{b: b, c: c, a: a, id: newID(), txn: b.store.Begin(), vars: map[string]string{}, args: map[string]bool{}}
	defer st.txn.Close()
	lf, err := os.OpenFile(b.store.LogPath(st.id), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600) //nolint:gosec // G304: a log of the server's own store
	if err != nil {
		return template.Template{}, fmt.Errorf("open build log: %w", err)
	}
	st.logW = &capWriter{w: lf, left: maxLog}
	defer func() { _ = lf.Close() }()
	if err := os.WriteFile(b.store.LogPath(st.id)+".owner", []byte(c.KeyID), 0o600); err != nil {
		return template.Template{}, fmt.Errorf("record build owner: %w", err)
	}
	a.Progress.Send(template.Event{Step: "build", Message: st.id})
	if a.Context != nil {
		bc, err := saveContext(ctx, b.store.StagingDir(), a.Context, b.maxContext)
		if err != nil {
			return template.Template{}, err
		}
		defer bc.Close()
		st.ctx2 = bc
	}
	text := a.Dockerfile
	if text == "" {
		if st.ctx2 == nil {
			return template.Template{}, fault.InvalidField("dockerfile", "give a Dockerfile, or upload a context holding one")
		}
		raw, err := st.ctx2.read("Dockerfile", MaxDockerfile)
		if err != nil {
			return template.Template{}, fault.InvalidField("dockerfile", "the context holds no Dockerfile")
		}
		text = string(raw)
	}
	ins, err := Parse(text)
	if err != nil {
		return template.Template{}, err
	}
	st.logf("build %s of %s:%s for %s: %d instructions", st.id, a.Name, tagOr(a.Tag), c.KeyID, len(ins))
	t, err := st.run(ctx, ins)
	if err != nil {
		st.logf("build failed: %s", fault.Public(err))
		return template.Template{}, err
	}
	st.logf("built %s (%d steps, %d from the cache)", t.Digest, st.steps, st.cached)
	a.Progress.Send(template.Event{Step: "done", Digest: t.Digest, Bytes: t.Bytes, Layers: len(t.Manifest.Layers),
		Message: fmt.Sprintf("build %s: %d steps, %d from the cache", st.id, st.steps, st.cached)})
	return t, nil
}

func (st *state) logf(format string, args ...any) {
	_, _ = fmt.Fprintf(st.logW, time.Now().UTC().Format("15:04:05 ")+format+"\n", args...)
}

func (st *state) run(ctx context.Context, ins []Instruction) (template.Template, error) {
	for k, v := range st.a.BuildArgs {
		st.vars[k] = v
	}
	from := false
	for i, in := range ins {
		if err := ctx.Err(); err != nil {
			return template.Template{}, err
		}
		if in.Cmd != "ARG" && !from && in.Cmd != "FROM" {
			return template.Template{}, lineErr(in, "the first instruction must be FROM (ARG may come before it)")
		}
		st.a.Progress.Send(template.Event{Step: "step", Layer: i + 1, Layers: len(ins), Message: in.Cmd + " " + in.Rest})
		st.logf("step %d/%d: %s %s", i+1, len(ins), in.Cmd, in.Rest)
		var err error
		switch in.Cmd {
		case "FROM":
			if from {
				return template.Template{}, lineErr(in, "multi-stage builds are not supported")
			}
			from = true
			err = st.from(ctx, in)
		case "ARG":
			err = st.arg(in)
		case "ENV":
			err = st.env(in)
		case "LABEL":
			err = st.label(in)
		case "WORKDIR":
			err = st.workdir(ctx, in)
		case "USER":
			err = st.user(in)
		case "CMD", "ENTRYPOINT":
			err = st.command(in)
		case "RUN":
			err = st.runStep(ctx, in)
		case "COPY", "ADD":
			err = st.copyStep(ctx, in)
		case "EXPOSE", "VOLUME", "STOPSIGNAL", "HEALTHCHECK", "MAINTAINER":
			st.logf("  %s is ignored (sandhold templates have no such setting)", in.Cmd)
		case "SHELL", "ONBUILD":
			err = lineErr(in, "not supported")
		default:
			err = lineErr(in, "unknown instruction")
		}
		if err != nil {
			return template.Template{}, err
		}
	}
	if len(st.layers) == 0 {
		return template.Template{}, fault.New(fault.Invalid, "the build made no layer (FROM scratch with nothing copied)")
	}
	cfg := st.cfg
	cfg.Limits, cfg.Browser = st.a.Overrides.Limits, st.a.Overrides.Browser
	uid, gid, err := st.b.store.ResolveUser(st.layers, cfg.User)
	if err != nil {
		return template.Template{}, err
	}
	cfg.UID, cfg.GID = uid, gid
	m := template.Manifest{Layers: st.layers, Config: cfg, Source: template.Source{Kind: "build", Parent: st.parent, Build: st.id}}
	return st.txn.Put(template.OwnerOf(st.c), st.a.Name, tagOr(st.a.Tag), m)
}

// next advances the cache key with a step's canonical text.
func (st *state) next(parts ...string) {
	h := sha256.New()
	h.Write([]byte(st.key))
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	st.key = hex.EncodeToString(h.Sum(nil))
}

// errLayerRefused ends a layer's writer when AddLayer stopped reading
// (a limit, a cancel): AddLayer's own error says why.
var errLayerRefused = errors.New("the layer was refused")

// cacheKey is the store's key of the current step: per owner.
func (st *state) cacheKey() string { return "build:" + st.c.KeyID + ":" + st.key }

func (st *state) from(ctx context.Context, in Instruction) error {
	ws, err := words(in.Rest)
	if err != nil || len(ws) == 0 {
		return lineErr(in, "FROM needs an image")
	}
	if len(ws) > 1 && (len(ws) != 3 || !strings.EqualFold(ws[1], "AS")) {
		return lineErr(in, "FROM takes an image (and AS name)")
	}
	if in.Flags["platform"] != "" {
		return lineErr(in, "--platform is not supported")
	}
	ref, err := expand(ws[0], st.vars)
	if err != nil {
		return lineErr(in, err.Error())
	}
	if ref == "scratch" {
		st.next("FROM scratch")
		return nil
	}
	var t template.Template
	if _, perr := template.ParseRef("from", ref); perr == nil {
		// A name no template the caller may use answers to can still be an
		// image: the pull below decides.
		t, _ = st.b.store.Resolve(template.CallerOf(st.c), ref)
	}
	if t.Digest == "" {
		if st.b.puller == nil {
			return lineErr(in, fmt.Sprintf("%q is no template you may use", ref))
		}
		st.logf("  pulling %s", ref)
		if t, err = st.b.puller.PullInto(ctx, st.txn, template.OwnerOf(st.c), ref, st.a.Progress); err != nil {
			return fault.Wrap(fault.KindOf(err), err, fmt.Sprintf("Dockerfile line %d (FROM): %s", in.Line, fault.Public(err)))
		}
	}
	m, err := st.txn.Use(t.Digest)
	if err != nil {
		return lineErr(in, "the template went away")
	}
	st.layers = append([]template.Layer(nil), m.Layers...)
	st.cfg = m.Config
	st.cfg.Limits, st.cfg.Browser = template.Limits{}, false
	st.parent = t.Digest
	st.next("FROM", t.Digest)
	st.logf("  from %s", t.Digest)
	return nil
}

func (st *state) arg(in Instruction) error {
	kvs, err := keyValues(in, st.vars, false)
	if err != nil {
		return err
	}
	for _, kv := range kvs {
		st.args[kv[0]] = true
		if _, given := st.a.BuildArgs[kv[0]]; given {
			continue
		}
		if kv[1] != "\x00" {
			st.vars[kv[0]] = kv[1]
		}
	}
	st.next("ARG", in.Rest)
	return nil
}

func (st *state) env(in Instruction) error {
	kvs, err := keyValues(in, st.vars, true)
	if err != nil {
		return err
	}
	for _, kv := range kvs {
		st.vars[kv[0]] = kv[1]
		st.cfg.Env = setEnv(st.cfg.Env, kv[0], kv[1])
	}
	b, _ := json.Marshal(kvs)
	st.next("ENV", string(b))
	return nil
}

func setEnv(env []string, k, v string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); name != k {
			out = append(out, kv)
		}
	}
	return append(out, k+"="+v)
}

func (st *state) label(in Instruction) error {
	kvs, err := keyValues(in, st.vars, false)
	if err != nil {
		return err
	}
	if st.cfg.Labels == nil {
		st.cfg.Labels = map[string]string{}
	}
	for _, kv := range kvs {
		st.cfg.Labels[kv[0]] = kv[1]
	}
	return nil
}

func (st *state) user(in Instruction) error {
	u, err := expand(strings.TrimSpace(in.Rest), st.vars)
	if err != nil || u == "" {
		return lineErr(in, "USER needs a user")
	}
	st.cfg.User = u
	st.next("USER", u)
	return nil
}

func (st *state) command(in Instruction) error {
	argv := in.Args
	if !in.JSON {
		argv = []string{"/bin/sh", "-c", in.Rest}
	}
	if in.Cmd == "CMD" {
		st.cfg.Cmd = argv
	} else {
		st.cfg.Entrypoint = argv
	}
	b, _ := json.Marshal(argv)
	st.next(in.Cmd, string(b))
	return nil
}

// workdir sets the working directory and makes it (as root, 0755) where
// the tree has none, as a layer of its own.
func (st *state) workdir(ctx context.Context, in Instruction) error {
	d, err := expand(strings.TrimSpace(in.Rest), st.vars)
	if err != nil || d == "" {
		return lineErr(in, "WORKDIR needs a directory")
	}
	if !path.IsAbs(d) {
		base := st.cfg.WorkingDir
		if base == "" {
			base = "/"
		}
		d = path.Join(base, d)
	}
	d = path.Clean(d)
	st.cfg.WorkingDir = d
	st.next("WORKDIR", d)
	rel := strings.TrimPrefix(d, "/")
	if rel == "" || st.b.store.IsDir(st.layers, rel) {
		return nil
	}
	return st.addCached(ctx, st.dirLayerWriter(rel))
}

// addCached adds the layer make writes (or the cached one for the step's
// key) on top of the build.
func (st *state) addCached(ctx context.Context, makeLayer func(io.Writer) error) error {
	if !st.a.NoCache {
		if l, ok := st.txn.CacheGet(st.cacheKey()); ok {
			st.cached++
			st.steps++
			st.logf("  cached: %s", l.Digest)
			st.a.Progress.Send(template.Event{Step: "cached", Digest: l.Digest, Bytes: l.Bytes, Cached: true})
			if l.Entries > 0 {
				st.layers = append(st.layers, l)
			}
			return nil
		}
	}
	pr, pw := io.Pipe()
	var wg sync.WaitGroup
	wg.Add(1)
	var werr error
	go func() {
		defer wg.Done()
		werr = makeLayer(pw)
		_ = pw.CloseWithError(werr)
	}()
	l, err := st.txn.AddLayer(ctx, pr, template.LayerSource{})
	_ = pr.CloseWithError(errLayerRefused)
	wg.Wait()
	if werr != nil && (err == nil || !errors.Is(werr, errLayerRefused)) {
		return werr // the layer's own failure, not the refusal's echo
	}
	if err != nil {
		return err
	}
	st.steps++
	if err := st.txn.CachePut(st.cacheKey(), l.Digest); err != nil {
		st.b.log.Warn("template build cache not written", "err", err)
	}
	st.logf("  layer %s (%d entries, %d bytes)", l.Digest, l.Entries, l.Bytes)
	st.a.Progress.Send(template.Event{Step: "layer", Digest: l.Digest, Bytes: l.Bytes})
	if l.Entries > 0 {
		if len(st.layers) >= template.MaxLayers {
			return fault.New(fault.TooLarge, fmt.Sprintf("the build has more than %d layers", template.MaxLayers))
		}
		st.layers = append(st.layers, l)
	}
	return nil
}

// LogArgs names a build.
type LogArgs struct {
	Build string `json:"build" required:"true" maxLength:"64" pattern:"^bld[0-9a-f]{16}$" doc:"the build's id (its template's source.build)"`
}

// Log returns a build's kept log (its owner's, or any for an admin).
func (b *Builder) Log(c auth.Caller, id string) (string, error) {
	if !buildID.MatchString(id) {
		return "", fault.InvalidField("build", "not a build id")
	}
	owner, err := os.ReadFile(b.store.LogPath(id) + ".owner")
	if err != nil || (!c.IsAdmin() && c.Role != auth.RoleViewer && string(owner) != c.KeyID) {
		return "", fault.New(fault.NotFound, "build not found")
	}
	f, err := os.Open(b.store.LogPath(id)) //nolint:gosec // G304: a log of the server's own store, named by a checked id
	if err != nil {
		return "", fault.New(fault.NotFound, "build not found")
	}
	defer func() { _ = f.Close() }()
	raw, err := io.ReadAll(io.LimitReader(f, maxLog))
	return string(raw), err
}

var buildID = regexp.MustCompile(`^bld[0-9a-f]{16}$`)

func tagOr(tag string) string {
	if tag == "" {
		return template.DefaultTag
	}
	return tag
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "bld" + hex.EncodeToString(b[:])
}

// capWriter writes at most left bytes to w, then drops the rest.
type capWriter struct {
	mu   sync.Mutex
	w    io.Writer
	left int64
}

func (c *capWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	if c.left <= 0 {
		return n, nil
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	c.left -= int64(len(p))
	_, _ = c.w.Write(p)
	return n, nil
}
