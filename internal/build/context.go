package build

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/template"
)

// Caps of a build context, with their reasons.
const (
	// maxContextEntries bounds the entries of an uploaded context (the
	// index is kept in memory).
	maxContextEntries = 65_536
	// maxCopySources bounds the sources of one COPY.
	maxCopySources = 256
)

// buildContext is an uploaded context, staged as one uncompressed tar
// file with an index of its entries: COPY reads entries by offset and
// never writes a context's name anywhere but into a layer stream, which
// the store unpacks under the archive rules.
type buildContext struct {
	f     *os.File
	dir   string
	index map[string]ctxEntry
	names []string // sorted
}

type ctxEntry struct {
	hdr *tar.Header
	off int64
}

// Close removes the staged context.
func (bc *buildContext) Close() {
	_ = bc.f.Close()
	_ = os.RemoveAll(bc.dir)
}

// saveContext stages r (a tar or a gzipped tar, at most max bytes as
// uploaded and as unpacked) and indexes it.
func saveContext(ctx context.Context, staging string, r io.Reader, max int64) (*buildContext, error) {
	dir, err := os.MkdirTemp(staging, "context-")
	if err != nil {
		return nil, fmt.Errorf("stage build context: %w", err)
	}
	bc := &buildContext{dir: dir, index: map[string]ctxEntry{}}
	ok := false
	defer func() {
		if !ok {
			if bc.f != nil {
				_ = bc.f.Close()
			}
			_ = os.RemoveAll(dir)
		}
	}()
	br := bufio.NewReader(io.LimitReader(template.Reader(ctx, r), max+1))
	var src io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fault.Wrap(fault.Invalid, err, "the build context is not a valid gzip stream")
		}
		src = zr
	}
	f, err := os.OpenFile(dir+"/context.tar", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600) //nolint:gosec // G304: a file of the server's staging directory
	if err != nil {
		return nil, fmt.Errorf("stage build context: %w", err)
	}
	bc.f = f
	n, err := io.Copy(f, io.LimitReader(src, max+1))
	if err != nil {
		return nil, fault.Wrap(fault.Invalid, err, "the build context could not be read")
	}
	if n > max {
		return nil, fault.New(fault.TooLarge, fmt.Sprintf("the build context is larger than %d bytes", max))
	}
	if err := bc.indexTar(); err != nil {
		return nil, err
	}
	ok = true
	return bc, nil
}

// countReader counts what has been read, for entries' offsets.
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (bc *buildContext) indexTar() error {
	if _, err := bc.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	cr := &countReader{r: bc.f}
	tr := tar.NewReader(cr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fault.Wrap(fault.Invalid, err, "the build context is not a tar archive")
		}
		if len(bc.index) >= maxContextEntries {
			return fault.New(fault.TooLarge, fmt.Sprintf("the build context holds more than %d entries", maxContextEntries))
		}
		name, ok := contextName(h.Name)
		if !ok {
			return fault.New(fault.Invalid, fmt.Sprintf("the build context names %q, outside itself", h.Name))
		}
		if name == "" {
			continue
		}
		if _, dup := bc.index[name]; dup {
			return fault.New(fault.Invalid, fmt.Sprintf("the build context names %q twice", h.Name))
		}
		bc.index[name] = ctxEntry{hdr: h, off: cr.n}
		bc.names = append(bc.names, name)
	}
	sort.Strings(bc.names)
	return nil
}

// contextName cleans an entry's name relative to the context's root; a
// name that leaves it is not ok.
func contextName(raw string) (string, bool) {
	if strings.HasPrefix(raw, "/") || strings.Contains(raw, "\\") || strings.ContainsRune(raw, 0) {
		return "", false
	}
	for _, p := range strings.Split(raw, "/") {
		if p == ".." {
			return "", false
		}
	}
	c := path.Clean("/" + raw)
	return strings.TrimPrefix(c, "/"), true
}

// open is a regular file's content.
func (bc *buildContext) open(name string) (io.Reader, *tar.Header, error) {
	e, ok := bc.index[name]
	if !ok || e.hdr.Typeflag != tar.TypeReg {
		return nil, nil, fault.New(fault.NotFound, fmt.Sprintf("the build context has no file %q", name))
	}
	return io.NewSectionReader(bc.f, e.off, e.hdr.Size), e.hdr, nil
}

func (bc *buildContext) read(name string, max int64) ([]byte, error) {
	r, h, err := bc.open(name)
	if err != nil {
		return nil, err
	}
	if h.Size > max {
		return nil, fault.New(fault.TooLarge, fmt.Sprintf("%s is larger than %d bytes", name, max))
	}
	return io.ReadAll(r)
}

// match lists the context entries a COPY source names: the entry itself
// and, for a directory, everything below it; a pattern (*, ?, [) matches
// names at its depth.
func (bc *buildContext) match(src string) (base string, names []string) {
	src, _ = contextName(src)
	if src == "" || src == "." {
		return "", bc.names
	}
	glob := strings.ContainsAny(src, "*?[")
	for _, n := range bc.names {
		if glob {
			depth := strings.Count(src, "/") + 1
			parts := strings.SplitN(n, "/", depth+1)
			if len(parts) < depth {
				continue
			}
			top := strings.Join(parts[:depth], "/")
			if ok, _ := path.Match(src, top); !ok {
				continue
			}
		} else if n != src && !strings.HasPrefix(n, src+"/") {
			continue
		}
		names = append(names, n)
	}
	if glob {
		return path.Dir(src), names
	}
	return src, names
}

// copyStep adds a COPY or ADD as a layer: the named context entries under
// the destination, owned by --chown's user (root by default).
func (st *state) copyStep(ctx context.Context, in Instruction) error {
	if in.Flags["from"] != "" {
		return lineErr(in, "COPY --from (multi-stage) is not supported")
	}
	if st.ctx2 == nil {
		return lineErr(in, "there is no build context to copy from: upload one (POST /v1/templates/build)")
	}
	args := in.Args
	if !in.JSON {
		var err error
		if args, err = words(in.Rest); err != nil {
			return lineErr(in, err.Error())
		}
	}
	if len(args) < 2 || len(args) > maxCopySources+1 {
		return lineErr(in, "needs sources and a destination")
	}
	for i := range args {
		v, err := expand(args[i], st.vars)
		if err != nil {
			return lineErr(in, err.Error())
		}
		args[i] = v
	}
	srcs, dest := args[:len(args)-1], args[len(args)-1]
	for _, s := range srcs {
		if strings.Contains(s, "://") {
			return lineErr(in, "ADD from a URL is not supported (RUN curl where egress allows)")
		}
	}
	uid, gid, err := st.chownOf(in)
	if err != nil {
		return err
	}
	if !path.IsAbs(dest) {
		base := st.cfg.WorkingDir
		if base == "" {
			base = "/"
		}
		trail := strings.HasSuffix(dest, "/")
		dest = path.Join(base, dest)
		if trail {
			dest += "/"
		}
	}
	plan, digest, err := st.copyPlan(in, srcs, dest)
	if err != nil {
		return err
	}
	st.next(in.Cmd, strings.Join(srcs, "\x00"), dest, fmt.Sprintf("%d:%d", uid, gid), digest)
	return st.addCached(ctx, func(w io.Writer) error { return st.writeCopy(w, plan, uid, gid) })
}

// copyItem is one entry a COPY writes: a context entry (or an entry of an
// archive ADD extracts) at its place in the tree.
type copyItem struct {
	from    string // context name
	to      string // tree path, relative
	extract bool   // ADD of a local tar: its entries go below to
}

// copyPlan resolves a COPY's sources into items and digests what they
// copy (for the step's cache key).
func (st *state) copyPlan(in Instruction, srcs []string, dest string) ([]copyItem, string, error) {
	h := sha256.New()
	var plan []copyItem
	destDir := strings.HasSuffix(dest, "/") || len(srcs) > 1
	dest = strings.TrimPrefix(path.Clean(dest), "/")
	for _, src := range srcs {
		base, names := st.ctx2.match(src)
		if len(names) == 0 {
			return nil, "", lineErr(in, fmt.Sprintf("%q is not in the build context", src))
		}
		for _, n := range names {
			e := st.ctx2.index[n]
			rel := strings.TrimPrefix(strings.TrimPrefix(n, base), "/")
			var to string
			switch {
			case rel == "" && e.hdr.Typeflag == tar.TypeDir:
				continue // the directory itself: its content goes to dest
			case rel == "" && (destDir || strings.ContainsAny(src, "*?[")):
				to = path.Join(dest, path.Base(n))
			case rel == "":
				to = dest
			default:
				to = path.Join(dest, rel)
			}
			item := copyItem{from: n, to: to}
			if in.Cmd == "ADD" && e.hdr.Typeflag == tar.TypeReg && isArchive(n) {
				item.to, item.extract = strings.TrimSuffix(dest, "/"), true
			}
			plan = append(plan, item)
			_, _ = fmt.Fprintf(h, "%s\x00%s\x00%d\x00%o\x00%d\x00%s\n", item.from, item.to, e.hdr.Size, e.hdr.Mode, e.hdr.ModTime.Unix(), e.hdr.Linkname)
			if e.hdr.Typeflag == tar.TypeReg {
				r, _, _ := st.ctx2.open(n)
				_, _ = io.Copy(h, r)
			}
		}
	}
	return plan, hex.EncodeToString(h.Sum(nil)), nil
}

func isArchive(name string) bool {
	for _, s := range []string{".tar", ".tar.gz", ".tgz"} {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// writeCopy writes the COPY's layer: each destination's parents as the
// tree has them (so an existing /home/user keeps its owner), then the
// items owned by uid:gid.
func (st *state) writeCopy(w io.Writer, plan []copyItem, uid, gid int) error {
	tw := tar.NewWriter(w)
	done := map[string]bool{}
	for _, it := range plan {
		if err := st.parents(tw, path.Dir(it.to), done); err != nil {
			return err
		}
		e := st.ctx2.index[it.from]
		if it.extract {
			if err := st.extractInto(tw, it, uid, gid, done); err != nil {
				return err
			}
			continue
		}
		h := *e.hdr
		h.Name, h.Uid, h.Gid, h.Uname, h.Gname = it.to, uid, gid, "", ""
		h.PAXRecords, h.Xattrs = nil, nil //nolint:staticcheck // SA1019: cleared, never applied
		switch h.Typeflag {
		case tar.TypeDir:
			h.Name += "/"
			done[it.to] = true
		case tar.TypeReg, tar.TypeSymlink:
		default:
			continue // hardlinks and special files of a context are not copied
		}
		if err := tw.WriteHeader(&h); err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			r, _, _ := st.ctx2.open(it.from)
			if _, err := io.Copy(tw, r); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

// extractInto writes a local archive's entries below it.to (ADD).
func (st *state) extractInto(tw *tar.Writer, it copyItem, uid, gid int, done map[string]bool) error {
	r, _, _ := st.ctx2.open(it.from)
	br := bufio.NewReader(r)
	var src io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fault.Wrap(fault.Invalid, err, fmt.Sprintf("ADD %s: not a valid gzip stream", it.from))
		}
		src = zr
	}
	if err := st.parents(tw, it.to, done); err != nil {
		return err
	}
	tr := tar.NewReader(src)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fault.Wrap(fault.Invalid, err, fmt.Sprintf("ADD %s: not a tar archive", it.from))
		}
		name, ok := contextName(h.Name)
		if !ok {
			return fault.New(fault.Invalid, fmt.Sprintf("ADD %s: names %q, outside itself", it.from, h.Name))
		}
		if name == "" {
			continue
		}
		h.Name = path.Join(it.to, name)
		if h.Typeflag == tar.TypeDir {
			h.Name += "/"
		}
		h.PAXRecords, h.Xattrs = nil, nil //nolint:staticcheck // SA1019: cleared, never applied
		if h.Typeflag == tar.TypeLink {
			if ln, ok := contextName(h.Linkname); ok {
				h.Linkname = path.Join(it.to, ln)
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		// A gzip bomb stops at the layer's MaxBytes: AddLayer refuses the
		// pipe this tar goes into (addCached).
		if _, err := io.Copy(tw, tr); err != nil { // #nosec G110 -- bounded by the layer's MaxBytes downstream
			return err
		}
	}
}

// parents writes directory entries for rel and each of its parents, with
// the attributes the tree gives them (root's 0755 where it has none), once.
func (st *state) parents(tw *tar.Writer, rel string, done map[string]bool) error {
	if rel == "." || rel == "" || rel == "/" {
		return nil
	}
	rel = strings.TrimPrefix(rel, "/")
	var chain []string
	for p := rel; p != "." && p != ""; p = path.Dir(p) {
		chain = append(chain, p)
	}
	for i := len(chain) - 1; i >= 0; i-- {
		p := chain[i]
		if done[p] {
			continue
		}
		done[p] = true
		h := &tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: 0o755, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if a, ok := st.b.store.Stat(st.layers, p); ok && a.Dir {
			h.Mode, h.Uid, h.Gid = int64(a.Mode), a.UID, a.GID
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
	}
	return nil
}

// dirLayerWriter writes WORKDIR's layer: rel and its parents.
func (st *state) dirLayerWriter(rel string) func(io.Writer) error {
	return func(w io.Writer) error {
		tw := tar.NewWriter(w)
		if err := st.parents(tw, rel, map[string]bool{}); err != nil {
			return err
		}
		return tw.Close()
	}
}
