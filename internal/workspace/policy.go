package workspace

import (
	"path"
	"strings"

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

// writableTrees are where the sandbox user can create files, and so where
// a hard link can give a sensitive file a second, innocent name.
var writableTrees = []string{"/workspace", "/tmp", "/dev/shm"}

func inWritableTree(p string) bool { return writableTreeOf(p) != "" }

// writableTreeOf names the writable tree holding p, or "".
func writableTreeOf(p string) string {
	for _, t := range writableTrees {
		if p == t || strings.HasPrefix(p, t+"/") {
			return t
		}
	}
	return ""
}

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
