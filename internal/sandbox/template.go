package sandbox

import (
	"maps"
	"os"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox/execenv"
	"github.com/sandhold/sandhold/internal/sandbox/templateroot"
	"github.com/sandhold/sandhold/internal/template"
)

// imageWorkspace is a template sandbox's workspace tree in its image.
const imageWorkspace = templateroot.Workspace

// A sandbox made from a template (Spec.Template) runs on an overlay root of
// the template's layers (internal/isolate/rootfs) instead of the host's
// /usr. Its workspace image then holds two trees: workspace/, bound at
// /workspace as before, and rootfs/ with the overlay's upper and work
// directories, so whatever the sandbox installs is its own, counts against
// limits.disk and goes with the sandbox (internal/sandbox/templateroot). Commands start
// with the template's environment, in its working directory, as its user
// (the root of the sandbox's user namespace when the image names none: an
// unprivileged host uid, never the host's root).
//
// A create resolves the name once and records name:tag@digest: the sandbox
// stays on the content it was made from even if the name moves, and the
// store keeps that content while a sandbox uses it (TemplatesInUse).

// rootPlan is what a template sandbox's start takes from the store.
type rootPlan struct {
	ref      string
	dirs     []string
	uid, gid int
	// txn holds the template's layers for the start: a GC that runs
	// while the sandbox is not yet listed must not take them.
	txn *template.Txn
}

// rootPlan reads the store for a template sandbox's start; nil for a host
// sandbox. Close the plan's txn once the start ended.
func (s *Sandbox) rootPlan() (*rootPlan, error) {
	d := s.templateDigest()
	if d == "" {
		return nil, nil
	}
	st := s.m.cfg.Templates
	if st == nil {
		return nil, fault.New(fault.Unavailable, "this server keeps no templates; the sandbox's template cannot be used")
	}
	if s.diskBytes() <= 0 {
		return nil, fault.InvalidField("limits.disk", "a template sandbox keeps its writable layer in its workspace image: it needs a disk quota")
	}
	txn := st.Begin()
	m, err := txn.Use(d)
	if err != nil {
		txn.Close()
		return nil, fault.New(fault.Unavailable, "the sandbox's template is no longer in the store")
	}
	dirs, err := st.LayerDirs(d)
	if err != nil {
		txn.Close()
		return nil, err
	}
	return &rootPlan{ref: s.rec.Spec.Template, dirs: dirs, uid: m.Config.UID, gid: m.Config.GID, txn: txn}, nil
}

// apply makes the launch a template sandbox's: its user, and the overlay
// root the init builds from the descriptors rootFiles makes.
func (p *rootPlan) apply(s *Sandbox, spec *agent.LaunchSpec) {
	spec.Setup.UID, spec.Setup.GID = p.uid, p.gid
	spec.Setup.Root = &agent.RootSetup{Template: p.ref, Layers: len(p.dirs)}
	spec.RootFiles = func(pid int) ([]*os.File, error) { return s.rootFiles(pid, p.dirs) }
}

// resolveTemplate resolves spec.Template for c, pins it to its digest and
// fills the limits spec leaves at zero from the template's defaults.
func (m *Manager) resolveTemplate(c Caller, spec *Spec) error {
	if spec.pinned == nil && template.IsHost(spec.Template) {
		spec.Template = ""
		return nil
	}
	if m.cfg.Templates == nil {
		return fault.InvalidField("template", "this server keeps no templates; only host is available")
	}
	var t template.Template
	if spec.pinned != nil {
		t = *spec.pinned
	} else {
		var err error
		if t, err = m.cfg.Templates.Resolve(template.Caller{KeyID: c.KeyID, Admin: c.Admin}, spec.Template); err != nil {
			return err
		}
	}
	spec.Template = t.Ref()
	d := t.Manifest.Config.Limits
	l := &spec.Limits
	for _, f := range []struct {
		v   *int64
		def int64
	}{
		{&l.MemoryBytes, d.MemoryBytes}, {&l.CPUMilli, d.CPUMilli}, {&l.Pids, d.Pids}, {&l.DiskBytes, d.DiskBytes},
	} {
		if *f.v == 0 && f.def > 0 {
			*f.v = f.def
		}
	}
	return nil
}

// PinTemplate makes spec's sandbox one of t, which the server resolved
// itself (a build step's unnamed template, which no client can name): the
// caller has checked that whoever asks may use it.
func PinTemplate(spec *Spec, t template.Template) {
	spec.pinned = &t
	spec.Template = t.Ref()
}

// templateDigest is the digest of the sandbox's template ("" for host).
func (s *Sandbox) templateDigest() string {
	_, d := template.SplitRecorded(s.rec.Spec.Template)
	return d
}

// templateConfig is the sandbox's template config (nil for host, or when
// the store lost the manifest: the start then fails, see rootPlan).
func (s *Sandbox) templateConfig() *template.Config {
	d := s.templateDigest()
	if d == "" || s.m.cfg.Templates == nil {
		return nil
	}
	m := s.m.cfg.Templates.Manifest(d)
	if m == nil {
		return nil
	}
	return &m.Config
}

// baseEnv is the environment every command of the sandbox starts from:
// execenv.Base, the template's env over it.
func (s *Sandbox) baseEnv() map[string]string {
	env := execenv.Base()
	if c := s.templateConfig(); c != nil {
		maps.Copy(env, c.EnvMap())
		if c.User != "" {
			env["USER"], env["LOGNAME"] = c.User, c.User
		} else if c.UID == 0 {
			env["USER"], env["LOGNAME"] = "root", "root"
		}
	}
	s.mu.Lock()
	maps.Copy(env, s.rec.Spec.Env)
	s.mu.Unlock()
	return env
}

// shell runs a command line: the template's (bash or sh), bash on the
// host template.
func (s *Sandbox) shell() string {
	if c := s.templateConfig(); c != nil && c.Shell != "" {
		return c.Shell
	}
	return "/bin/bash"
}

// defaultCwd is where commands start when the caller names no directory.
func (s *Sandbox) defaultCwd() string {
	if c := s.templateConfig(); c != nil && c.WorkingDir != "" {
		return c.WorkingDir
	}
	return "/workspace"
}

// TemplatesInUse are the template digests sandboxes use: the store keeps
// them (and their layers) until the last such sandbox is deleted.
func (m *Manager) TemplatesInUse() map[string]bool {
	out := map[string]bool{}
	for _, s := range m.volumeHolders() {
		if d := s.templateDigest(); d != "" {
			out[d] = true
		}
	}
	// A snapshot restores onto its template: kept while it is.
	for _, d := range m.snapshotTemplates() {
		out[d] = true
	}
	return out
}
