package archive

import (
	"io/fs"
	"strings"
)

type entryKind uint8

const (
	kindDir entryKind = iota + 1
	kindFile
	kindSymlink
)

// entry is one archive member after classification and name cleaning.
type entry struct {
	raw    string // name as in the archive, for errors
	name   string // cleaned, slash-separated, relative
	kind   entryKind
	mode   fs.FileMode // permission and special bits as in the archive
	size   int64       // claimed content size (files)
	target string      // symlink target
}

// node is one file system object the extraction will create.
type node struct {
	kind     entryKind
	explicit bool
	perm     fs.FileMode // final permissions
}

// plan is the pass-one state: the tree to create and the manifest that pass
// two is checked against. Its maps and slices hold at most MaxEntries items.
type plan struct {
	lim      Limits
	nodes    map[string]*node
	folds    map[string]string
	manifest []entry
	links    []entry
	implied  int // directories created only because a path names them
	res      Result
}

func newPlan(lim Limits) *plan {
	return &plan{lim: lim, nodes: map[string]*node{}, folds: map[string]string{}}
}

// finalPerm applies the mode policy of the package doc.
func finalPerm(kind entryKind, m fs.FileMode) fs.FileMode {
	p := m.Perm() & modeMask
	if kind == kindDir {
		p |= 0o700
	}
	return p
}

// add records an entry, creating implied parent directories, and refuses
// duplicates, case collisions, children of files or symlinks, the
// MaxEntries+1st entry and the MaxEntries+1st implied directory (so a
// deep-path archive creates at most 2*MaxEntries objects, not
// MaxEntries*MaxDepth).
func (p *plan) add(e entry) error {
	if len(p.manifest) >= p.lim.MaxEntries {
		return refuse(e.raw, KindTooLarge, ReasonTooManyEntries, "")
	}
	// Implied parents, outermost first. Depth is capped by cleanName.
	parent := parentOf(e.name)
	if parent != "" {
		for i := 0; i <= len(parent); i++ {
			if i < len(parent) && parent[i] != '/' {
				continue
			}
			prefix := parent[:i]
			n := p.nodes[prefix]
			switch {
			case n == nil:
				if p.implied >= p.lim.MaxEntries {
					return refuse(e.raw, KindTooLarge, ReasonTooManyEntries, "too many implied directories")
				}
				p.implied++
				if err := p.create(e, prefix, &node{kind: kindDir, perm: finalPerm(kindDir, 0o755)}); err != nil {
					return err
				}
			case n.kind == kindSymlink:
				return refuse(e.raw, KindForbidden, ReasonWriteThrough, "a parent is a symlink entry")
			case n.kind != kindDir:
				return refuse(e.raw, KindConflict, ReasonPathConflict, "a parent is a file entry")
			}
		}
	}
	if n := p.nodes[e.name]; n != nil {
		if n.kind == kindDir && e.kind == kindDir && !n.explicit {
			n.explicit = true
			n.perm = finalPerm(kindDir, e.mode)
			p.strip(e)
			p.manifest = append(p.manifest, e)
			return nil
		}
		if n.kind == kindDir && e.kind == kindSymlink {
			return refuse(e.raw, KindForbidden, ReasonWriteThrough, "a symlink replaces a directory that has entries")
		}
		return refuse(e.raw, KindConflict, ReasonDuplicate, "")
	}
	if err := p.create(e, e.name, &node{kind: e.kind, explicit: true, perm: finalPerm(e.kind, e.mode)}); err != nil {
		return err
	}
	p.strip(e)
	p.manifest = append(p.manifest, e)
	switch e.kind {
	case kindFile:
		p.res.Files++
		p.res.Bytes += e.size // the meter refuses any entry whose real size differs
	case kindSymlink:
		p.res.Symlinks++
		p.links = append(p.links, e)
	}
	return nil
}

func (p *plan) strip(e entry) {
	if e.mode&specialBits != 0 {
		p.res.Stripped++
	}
}

func (p *plan) create(e entry, name string, n *node) error {
	k := foldKey(name)
	if other, ok := p.folds[k]; ok && other != name {
		return refuse(e.raw, KindConflict, ReasonCaseCollision, "")
	}
	p.folds[k] = name
	p.nodes[name] = n
	if n.kind == kindDir {
		p.res.Dirs++
	}
	return nil
}

// checkLinks validates symlink targets once every name is known (a target
// may name a directory that a later entry creates).
func (p *plan) checkLinks() error {
	for _, l := range p.links {
		if err := p.checkTarget(l); err != nil {
			return err
		}
	}
	return nil
}

// checkTarget resolves a symlink target lexically from the link's
// directory. It must stay inside the destination and may pass only through
// directories this archive creates: passing through another symlink
// (`d/l -> ..` then `m -> d/l/..`) could escape although each link looks
// inside on its own.
func (p *plan) checkTarget(l entry) error {
	t := l.target
	if t == "" {
		return refuse(l.raw, KindInvalid, ReasonSymlinkOutside, "empty symlink target")
	}
	if len(t) > p.lim.MaxPathLen {
		return refuse(l.raw, KindInvalid, ReasonNameTooLong, "symlink target too long")
	}
	if e := checkChars(t); e != nil {
		e.Entry = l.raw
		e.Detail = "in symlink target"
		return e
	}
	if t[0] == '/' {
		return refuse(l.raw, KindForbidden, ReasonSymlinkOutside, "absolute symlink target")
	}
	var stack []string
	if d := parentOf(l.name); d != "" {
		stack = strings.Split(d, "/")
	}
	comps := strings.Split(t, "/")
	// Bounded by len(t) <= MaxPathLen.
	for i, c := range comps {
		switch c {
		case "", ".":
			continue
		case "..":
			if len(stack) == 0 {
				return refuse(l.raw, KindForbidden, ReasonSymlinkOutside, "symlink target leaves the destination")
			}
			stack = stack[:len(stack)-1]
			continue
		}
		stack = append(stack, c)
		if i == len(comps)-1 {
			break
		}
		if n := p.nodes[strings.Join(stack, "/")]; n == nil || n.kind != kindDir {
			return refuse(l.raw, KindForbidden, ReasonSymlinkOutside, "symlink target passes through a path that is not a directory of this archive")
		}
	}
	return nil
}

// tops returns the top-level names the extraction creates.
func (p *plan) tops() []string {
	var out []string
	for name := range p.nodes {
		if !strings.Contains(name, "/") {
			out = append(out, name)
		}
	}
	return out
}
