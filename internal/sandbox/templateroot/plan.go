package templateroot

import (
	"maps"
	"os"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/template"
)

// Plan is what a template sandbox's start takes from the store: its
// template's reference, the directories of its layers, the user its
// commands run as, and a hold on the layers for the start.
type Plan struct {
	Ref      string
	Dirs     []string
	UID, GID int
	// txn holds the template's layers for the start: a GC that runs
	// while the sandbox is not yet listed must not take them.
	txn *template.Txn
}

// NewPlan reads the store st for the start of a sandbox recorded on
// template ref (name:tag@digest) with a disk quota of disk bytes; nil for
// a host sandbox. Close the plan once the start ended.
func NewPlan(st *template.Store, ref string, disk int64) (*Plan, error) {
	_, d := template.SplitRecorded(ref)
	if d == "" {
		return nil, nil
	}
	if st == nil {
		return nil, fault.New(fault.Unavailable, "this server keeps no templates; the sandbox's template cannot be used")
	}
	if disk <= 0 {
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
	return &Plan{Ref: ref, Dirs: dirs, UID: m.Config.UID, GID: m.Config.GID, txn: txn}, nil
}

// Close lets the template's layers go (the start ended).
func (p *Plan) Close() { p.txn.Close() }

// Apply makes the launch a template sandbox's: its user, and the overlay
// root the init builds from the descriptors files makes of the plan's
// layers (Files, over the sandbox's mounted image).
func (p *Plan) Apply(spec *agent.LaunchSpec, files func(pid int, dirs []string) ([]*os.File, error)) {
	spec.Setup.UID, spec.Setup.GID = p.UID, p.GID
	spec.Setup.Root = &agent.RootSetup{Template: p.Ref, Layers: len(p.Dirs)}
	spec.RootFiles = func(pid int) ([]*os.File, error) { return files(pid, p.Dirs) }
}

// Resolve is the template a create names for caller c: ref as the store
// resolves it now, or pinned, a template the server resolved itself; nil
// for the host's.
func Resolve(st *template.Store, c template.Caller, ref string, pinned *template.Template) (*template.Template, error) {
	if pinned == nil && template.IsHost(ref) {
		return nil, nil
	}
	if st == nil {
		return nil, fault.InvalidField("template", "this server keeps no templates; only host is available")
	}
	if pinned != nil {
		return pinned, nil
	}
	t, err := st.Resolve(c, ref)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// ConfigOf is the config of the template a sandbox is recorded on (ref,
// name:tag@digest): nil for the host's, or when st keeps no templates or
// lost the manifest (the start then fails, see NewPlan).
func ConfigOf(st *template.Store, ref string) *template.Config {
	_, d := template.SplitRecorded(ref)
	if d == "" || st == nil {
		return nil
	}
	m := st.Manifest(d)
	if m == nil {
		return nil
	}
	return &m.Config
}

// Env is the environment a template's commands start from: base, the
// template's env over it and its user as USER and LOGNAME (root when the
// image names none and runs as uid 0). For the host's (c nil) it is base.
func Env(base map[string]string, c *template.Config) map[string]string {
	if c == nil {
		return base
	}
	maps.Copy(base, c.EnvMap())
	if c.User != "" {
		base["USER"], base["LOGNAME"] = c.User, c.User
	} else if c.UID == 0 {
		base["USER"], base["LOGNAME"] = "root", "root"
	}
	return base
}

// Shell runs a command line: the template's (bash or sh), bash on the
// host's (c nil).
func Shell(c *template.Config) string {
	if c != nil && c.Shell != "" {
		return c.Shell
	}
	return "/bin/bash"
}

// Cwd is where commands start when the caller names no directory: the
// template's working directory, else /workspace.
func Cwd(c *template.Config) string {
	if c != nil && c.WorkingDir != "" {
		return c.WorkingDir
	}
	return "/workspace"
}
