package landlock

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"

	golandlock "github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// Rules says what the calling process may still do after Apply. Anything
// not granted here is denied.
type Rules struct {
	// ReadOnly: files and directory trees that may be read, listed and
	// executed.
	ReadOnly []string
	// ReadWrite: directory trees with full access beneath them (create,
	// write, remove, rename/link within granted trees, execute, truncate,
	// device ioctl).
	ReadWrite []string
	// ReadWriteFiles: single non-directory files, typically devices such as
	// /dev/null, /dev/tty, /dev/ptmx: read, write, truncate and ioctl.
	ReadWriteFiles []string
	// TCPConnect and TCPBind are the only TCP ports that may be connected
	// to or bound. Empty means no TCP at all (unless AllowAllTCP).
	TCPConnect []uint16
	TCPBind    []uint16
	// AllowAllTCP leaves TCP unrestricted; without it the port lists are
	// enforced and Landlock ABI 4 is required.
	AllowAllTCP bool
	// Optional names paths from the lists above that may be missing; they
	// are skipped (and reported in Status.Skipped). Any other missing path
	// is an error.
	Optional []string
}

// Status says what Apply enforced (or, from Plan, would enforce).
type Status struct {
	ABI                int      // the kernel's Landlock ABI version
	FSRights           string   // the file system rights being governed
	TCPRestricted      bool     // TCP bind/connect limited to the listed ports
	DeviceIoctl        bool     // ioctl on device files governed (ABI 5+)
	ScopedAbstractUnix bool     // abstract unix sockets outside the domain unreachable (ABI 6+)
	ScopedSignals      bool     // signals to processes outside the domain refused (ABI 6+)
	Skipped            []string // optional paths that did not exist
}

// Minimum ABI versions.
const (
	// MinABI: from ABI 3 truncate(2) is governed; below it a path Landlock
	// treats as read-only could still be truncated.
	MinABI = 3
	// minABITCP: TCP bind/connect rules appeared in ABI 4.
	minABITCP = 4
	// minABIScope: abstract unix socket and signal scoping appeared in ABI 6.
	minABIScope = 6
)

// fsRightsByABI is the set of file system rights each ABI can govern; we
// govern all of them, so anything new a kernel can restrict is restricted.
var fsRightsByABI = []struct {
	abi    int
	rights uint64
	why    string
}{
	{1, ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile | ll.AccessFSReadDir |
		ll.AccessFSRemoveDir | ll.AccessFSRemoveFile | ll.AccessFSMakeChar | ll.AccessFSMakeDir |
		ll.AccessFSMakeReg | ll.AccessFSMakeSock | ll.AccessFSMakeFifo | ll.AccessFSMakeBlock |
		ll.AccessFSMakeSym, "the original set"},
	{2, ll.AccessFSRefer, "rename/link across directories (denied everywhere in ABI 1)"},
	{3, ll.AccessFSTruncate, "truncate(2) and O_TRUNC"},
	{5, ll.AccessFSIoctlDev, "ioctl on character and block devices"},
	{9, ll.AccessFSResolveUnix, "connecting to pathname unix sockets of processes outside the domain"},
}

// Rights granted to each kind of entry, before intersecting with what the
// kernel governs.
const (
	// ReadOnly directories: read and list; execute, since /usr/bin must run.
	grantReadOnlyDir = ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir
	// ReadOnly files: only the rights a non-directory can carry.
	grantReadOnlyFile = ll.AccessFSExecute | ll.AccessFSReadFile
	// ReadWrite directories get everything except reaching unix sockets of
	// processes outside the domain (nothing there needs it).
	grantReadWriteDirMask = ^uint64(ll.AccessFSResolveUnix)
	// ReadWriteFiles: no execute; ioctl so terminals work (TCGETS, TIOCSWINSZ).
	grantReadWriteFile = ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSTruncate | ll.AccessFSIoctlDev
)

// maxPaths caps the number of path rules: the init passes a handful, and a
// huge list would mean a bug upstream rather than a policy.
const maxPaths = 256

// ErrUnavailable means the kernel cannot enforce what was asked (no
// Landlock, or an ABI too old). Callers branch on it to decide between
// refusing to start and the explicit insecure mode.
var ErrUnavailable = errors.New("landlock unavailable")

type grant struct {
	path   string
	access uint64
}

// plan is the computed ruleset: what to govern and what to grant.
type plan struct {
	fs, net, scoped uint64
	grants          []grant
	connect, bind   []uint16
	status          Status
}

// makePlan validates r against the kernel's ABI version; stat says what a
// path is (os.Stat, or a fake in tests).
func makePlan(abi int, r Rules, stat func(string) (fs.FileInfo, error)) (*plan, error) {
	if abi < MinABI {
		return nil, fmt.Errorf("%w: kernel Landlock ABI %d, need at least %d", ErrUnavailable, abi, MinABI)
	}
	if !r.AllowAllTCP && abi < minABITCP {
		return nil, fmt.Errorf("%w: TCP port rules need Landlock ABI %d, kernel has %d (set AllowAllTCP to go without)",
			ErrUnavailable, minABITCP, abi)
	}
	if n := len(r.ReadOnly) + len(r.ReadWrite) + len(r.ReadWriteFiles); n > maxPaths {
		return nil, fmt.Errorf("landlock: %d paths, limit %d", n, maxPaths)
	}
	p := &plan{status: Status{ABI: abi}}
	for _, row := range fsRightsByABI {
		if abi >= row.abi {
			p.fs |= row.rights
		}
	}
	p.status.FSRights = golandlock.AccessFSSet(p.fs).String()
	p.status.DeviceIoctl = p.fs&ll.AccessFSIoctlDev != 0
	if !r.AllowAllTCP {
		p.net = ll.AccessNetBindTCP | ll.AccessNetConnectTCP
		p.connect = slices.Clone(r.TCPConnect)
		p.bind = slices.Clone(r.TCPBind)
		p.status.TCPRestricted = true
	}
	if abi >= minABIScope {
		p.scoped = ll.ScopeAbstractUnixSocket | ll.ScopeSignal
		p.status.ScopedAbstractUnix, p.status.ScopedSignals = true, true
	}

	listed := map[string]bool{}
	for _, l := range [][]string{r.ReadOnly, r.ReadWrite, r.ReadWriteFiles} {
		for _, path := range l {
			listed[path] = true
		}
	}
	optional := map[string]bool{}
	for _, path := range r.Optional {
		if !listed[path] {
			return nil, fmt.Errorf("landlock: optional path %q is in no list", path)
		}
		optional[path] = true
	}

	kinds := []struct {
		name  string
		paths []string
		// rights returns the grant for a path of the given kind, or an
		// error when the kind does not fit the list.
		rights func(isDir bool) (uint64, error)
	}{
		{"ReadOnly", r.ReadOnly, func(isDir bool) (uint64, error) {
			if isDir {
				return grantReadOnlyDir, nil
			}
			return grantReadOnlyFile, nil
		}},
		{"ReadWrite", r.ReadWrite, func(isDir bool) (uint64, error) {
			if !isDir {
				return 0, errors.New("not a directory (single files go in ReadWriteFiles)")
			}
			return grantReadWriteDirMask, nil
		}},
		{"ReadWriteFiles", r.ReadWriteFiles, func(isDir bool) (uint64, error) {
			if isDir {
				return 0, errors.New("is a directory (directories go in ReadWrite)")
			}
			return grantReadWriteFile, nil
		}},
	}
	for _, k := range kinds {
		for _, path := range k.paths {
			if path == "" || !filepath.IsAbs(path) {
				return nil, fmt.Errorf("landlock: %s path %q is not absolute", k.name, path)
			}
			fi, err := stat(path)
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) && optional[path] {
					p.status.Skipped = append(p.status.Skipped, path)
					continue
				}
				return nil, fmt.Errorf("landlock: %s path %q: %w", k.name, path, err)
			}
			want, err := k.rights(fi.IsDir())
			if err != nil {
				return nil, fmt.Errorf("landlock: %s path %q: %w", k.name, path, err)
			}
			if access := want & p.fs; access != 0 {
				p.grants = append(p.grants, grant{path: path, access: access})
			}
		}
	}
	return p, nil
}

// config and rules translate the plan for go-landlock. The config is not
// best-effort: go-landlock refuses instead of enforcing less.
func (p *plan) config() golandlock.Config {
	return golandlock.Config{
		HandledAccessFS:  golandlock.AccessFSSet(p.fs),
		HandledAccessNet: golandlock.AccessNetSet(p.net),
		Scoped:           golandlock.ScopedSet(p.scoped),
	}
}

func (p *plan) rules() []golandlock.Rule {
	out := make([]golandlock.Rule, 0, len(p.grants)+len(p.connect)+len(p.bind))
	for _, g := range p.grants {
		out = append(out, golandlock.PathAccess(golandlock.AccessFSSet(g.access), g.path))
	}
	for _, port := range p.connect {
		out = append(out, golandlock.ConnectTCP(port))
	}
	for _, port := range p.bind {
		out = append(out, golandlock.BindTCP(port))
	}
	return out
}
