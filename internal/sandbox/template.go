package sandbox

import (
	"maps"

	"github.com/sandhold/sandhold/internal/sandbox/execenv"
	"github.com/sandhold/sandhold/internal/sandbox/templateroot"
	"github.com/sandhold/sandhold/internal/template"
)

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

// rootPlan reads the store for a template sandbox's start
// (templateroot.NewPlan); nil for a host sandbox. Close the plan once the
// start ended.
func (s *Sandbox) rootPlan() (*templateroot.Plan, error) {
	return templateroot.NewPlan(s.m.cfg.Templates, s.rec.Spec.Template, s.diskBytes())
}

// resolveTemplate resolves spec.Template for c, pins it to its digest and
// fills the limits spec leaves at zero from the template's defaults.
func (m *Manager) resolveTemplate(c Caller, spec *Spec) error {
	t, err := templateroot.Resolve(m.cfg.Templates, template.Caller{KeyID: c.KeyID, Admin: c.Admin}, spec.Template, spec.pinned)
	if err != nil {
		return err
	}
	if t == nil {
		spec.Template = "" // the host's
		return nil
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
	return templateroot.ConfigOf(s.m.cfg.Templates, s.rec.Spec.Template)
}

// baseEnv is the environment every command of the sandbox starts from:
// execenv.Base, the template's over it (templateroot.Env), the sandbox's
// own over both.
func (s *Sandbox) baseEnv() map[string]string {
	env := templateroot.Env(execenv.Base(), s.templateConfig())
	s.mu.Lock()
	maps.Copy(env, s.rec.Spec.Env)
	s.mu.Unlock()
	return env
}

// shell runs a command line (templateroot.Shell).
func (s *Sandbox) shell() string { return templateroot.Shell(s.templateConfig()) }

// defaultCwd is where commands start when the caller names no directory
// (templateroot.Cwd).
func (s *Sandbox) defaultCwd() string { return templateroot.Cwd(s.templateConfig()) }

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
