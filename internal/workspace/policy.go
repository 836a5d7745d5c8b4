package workspace

import (
	"context"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/fault"
)

// Policy is the sensitive-path policy (SECURITY-RULES.md → Files): names no
// file call may read, write, list or search, checked on the RESOLVED path
// before the call looks at whether the file exists.
type Policy struct {
	// Names are base names of sensitive files.
	Names []string
	// Dirs are sensitive directories, matched as trailing components of
	// any directory on the path (".ssh" matches /workspace/.ssh/x and
	// /home/u/.ssh; ".config/gh" matches /workspace/.config/gh/hosts.yml).
	Dirs []string
	// Paths are absolute paths refused with everything below them.
	Paths []string
}

// defaultNames are the default sensitive base names.
var defaultNames = []string{
	".env",                                       // dotenv secrets
	"id_rsa", "id_ed25519", "id_ecdsa", "id_dsa", // SSH private keys
	"id_rsa.pub", "id_ed25519.pub", "id_ecdsa.pub", "id_dsa.pub", // and their public halves (they name the keys)
	".netrc",           // machine passwords
	".git-credentials", // git credential store
	".pypirc",          // PyPI upload tokens
	".npmrc",           // npm tokens
	".dockercfg",       // legacy Docker registry credentials
	// Shell and REPL histories: commands typed with secrets in them.
	".bash_history", ".zsh_history", ".sh_history", ".history", ".ash_history",
	".python_history", ".node_repl_history", ".psql_history", ".mysql_history",
	".sqlite_history", ".lesshst", ".irb_history", "fish_history",
}

// defaultDirs are the default sensitive directories.
var defaultDirs = []string{
	".ssh",       // keys, known_hosts, agent sockets
	".aws",       // AWS credentials and config
	".gnupg",     // GPG private keys
	".docker",    // registry credentials (config.json)
	".kube",      // cluster credentials
	".config/gh", // GitHub CLI tokens
}

// defaultPaths are system credential files. The sandbox's synthetic /etc
// holds none of them, but a call naming one is refused outright rather
// than answered "not found" (or waited for).
var defaultPaths = []string{"/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/sudoers.d", "/etc/ssh", "/root"}

// DefaultPolicy is the policy of SECURITY-RULES.md.
func DefaultPolicy() Policy {
	return Policy{Names: append([]string(nil), defaultNames...), Dirs: append([]string(nil), defaultDirs...),
		Paths: append([]string(nil), defaultPaths...)}
}

// deny is the policy as the init applies it inside walks and searches.
func (p Policy) deny() agent.Deny {
	return agent.Deny{Names: p.Names, Dirs: p.Dirs, Paths: p.Paths, Procs: true}
}

// sensitive reports whether the resolved path is forbidden, and why.
// /proc/<pid>, /proc/self and /proc/thread-self are always forbidden: the
// init serves file calls, so they would name the init's own memory,
// environment and descriptors.
func (p Policy) sensitive(resolved string) (bool, string) {
	if (agent.Deny{Procs: true}).Denied(resolved) {
		return true, "process_files"
	}
	if p.deny().Denied(resolved) {
		return true, "sensitive_path"
	}
	return false, ""
}

// check refuses a sensitive resolved path. The answer names the path the
// client gave, never the resolved one (which would tell where a symlink
// leads), and is the same whether or not the file exists: the caller has
// not looked yet.
func (p Policy) check(op, given, resolved string) error {
	if bad, reason := p.sensitive(resolved); bad {
		return newErr(fault.Forbidden, op, given, TypePermissionDenied,
			"access to this path is refused by the sensitive-path policy", false, reason, nil)
	}
	return nil
}

func inWritableTree(p string) bool { return agent.WritableTree(p) != "" }

// Located is a path that passed Locate.
type Located struct {
	// Given is the path as the client wrote it (cleaned); every message
	// names it, never Resolved (which would tell where a symlink leads).
	Given string
	// Resolved is the kernel's name of the file inside the sandbox (for a
	// missing file: its resolved parent plus the base name). Callers act
	// on it with NoFollow, so a symlink swapped in afterwards makes the
	// call fail instead of redirecting it.
	Resolved string
	Exists   bool
	Stat     agent.Stat // when Exists
}

// Locate is the one path resolver of every route that names a path in a
// sandbox — the JSON file calls of this package and the streaming routes
// of internal/transfer (upload, download, archive, extract, artifacts).
// In this order, each step before any that looks at whether the file
// exists:
//
//  1. the path as text (cleanPath): absolute, no NUL, no '.' or '..';
//  2. the sensitive-path policy on the name as given;
//  3. the kernel's resolution inside the sandbox (agent.OpResolve: one
//     round trip, symlinks followed, magic links refused);
//  4. the policy on the resolved name;
//  5. a path named in a writable tree stays in it (a symlink from
//     /workspace out to /tmp or /etc is refused, as RESOLVE_BENEATH
//     would refuse it);
//  6. a regular file with more than one hard link in a writable tree is
//     refused: `ln .ssh/id_rsa notes.txt` gives a sensitive file a name
//     the policy does not know.
//
// Step 6 is judged again on the descriptor by CheckOpened, for a link
// made between Locate and the open. asRoot resolves as the namespace's
// uid 0 (sudo).
func (p Policy) Locate(ctx context.Context, f FS, op, given string, asRoot bool) (Located, error) {
	clean, err := cleanPath(op, given)
	if err != nil {
		return Located{}, err
	}
	if err := p.check(op, clean, clean); err != nil {
		return Located{}, err
	}
	resp, _, err := f.File(ctx, agent.OpResolve, agent.FileReq{Path: clean, AsRoot: asRoot})
	if err != nil {
		return Located{}, fileErr(op, clean, err)
	}
	real := resp.Target
	if real == "" {
		real = clean
	}
	if err := p.check(op, clean, real); err != nil {
		return Located{}, err
	}
	if tree := agent.WritableTree(clean); tree != "" && agent.WritableTree(real) != tree {
		return Located{}, newErr(fault.Forbidden, op, clean, TypePermissionDenied,
			"the path leads out of "+tree+" through a symlink", false, "symlink_escape", nil)
	}
	l := Located{Given: clean, Resolved: real, Exists: resp.Exists}
	if resp.Stat != nil {
		l.Stat = *resp.Stat
	}
	if l.Exists && agent.HardLinked(real, l.Stat.Mode, l.Stat.Nlink) {
		return Located{}, hardLinkErr(op, clean)
	}
	return l, nil
}

// CheckOpened judges a file opened at a Located path by its descriptor
// (what was opened is what counts: a hard link made after Locate is
// caught here) and returns its stat.
func CheckOpened(op string, l Located, f *os.File) (unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return st, fileErr(op, l.Given, err)
	}
	if st.Nlink > 1 && st.Mode&unix.S_IFMT == unix.S_IFREG && inWritableTree(l.Resolved) {
		return st, hardLinkErr(op, l.Given)
	}
	return st, nil
}

func hardLinkErr(op, given string) error {
	return newErr(fault.Forbidden, op, given, TypePermissionDenied,
		"the file has more than one hard link; file calls refuse hard-linked files in writable trees", false, "hardlink", nil)
}

// Deny is the policy as the init applies it inside walks, searches and
// archives (hard-linked files refused).
func (p Policy) Deny() agent.Deny { return p.deny() }

// cleanPath validates a client path as text: absolute, no NUL, at most
// PATH_MAX, no "." or ".." components (they are refused, not resolved:
// resolution is the kernel's job, inside the sandbox). Repeated and
// trailing slashes are dropped.
func cleanPath(op, p string) (string, error) {
	bad := func(msg string) error {
		return newErr(fault.Invalid, op, printable(p), TypeInvalidPath, msg, false, "invalid_path", nil)
	}
	switch {
	case p == "":
		return "", bad("path is empty")
	case len(p) > agent.MaxPath:
		return "", bad("path is longer than 4096 bytes")
	case strings.IndexByte(p, 0) >= 0:
		return "", bad("path holds a NUL byte")
	case !strings.HasPrefix(p, "/"):
		return "", bad("path must be absolute, as the sandbox sees it (/workspace/...)")
	}
	for _, c := range strings.Split(p, "/") {
		if c == "." || c == ".." {
			return "", bad("path must not hold '.' or '..' components")
		}
		if len(c) > 255 {
			return "", bad("a path component is longer than 255 bytes")
		}
	}
	return path.Clean(p), nil
}

// printable shortens and de-NULs a bad path for an error message.
func printable(p string) string {
	p = strings.ReplaceAll(p, "\x00", `\0`)
	p = strings.ToValidUTF8(p, "?")
	if len(p) > 256 {
		p = p[:256] + "…"
	}
	return p
}
