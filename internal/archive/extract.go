package archive

import (
	"archive/zip"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Extract unpacks the archive src (a regular file, read twice) of the given
// format into dir, a directory inside dst, all or nothing. See the package
// doc for the passes, the staging directory and the policy. dir is created
// (with missing parents) if needed and removed again if the extraction fails.
//
// dir is resolved by the root (symlinks are followed only while they stay
// inside dst). A caller that checked a path policy on dir should avoid a
// check-then-use race on dir itself by opening the checked directory as the
// root and passing dir ".".
func Extract(ctx context.Context, src *os.File, format Format, dst *os.Root, dir string, lim Limits) (Result, error) {
	return ExtractChecked(ctx, src, format, dst, dir, lim, nil)
}

// NameCheck judges one name an extraction would create (slash-separated,
// relative to the destination directory). A non-nil error refuses the
// whole archive in pass one, before anything is written (an *Error as it
// is, anything else as a forbidden entry). It lets the caller apply a
// policy the archive code does not know: a sensitive-path table.
type NameCheck func(name string) error

// ExtractChecked is Extract with check applied to every entry's name in
// pass one (nil: none).
func ExtractChecked(ctx context.Context, src *os.File, format Format, dst *os.Root, dir string, lim Limits, check NameCheck) (Result, error) {
	if err := lim.Validate(); err != nil {
		return Result{}, err
	}
	if !filepath.IsLocal(dir) {
		return Result{}, refuse("", KindInvalid, ReasonDestination, "the destination must be a relative path inside the root")
	}
	size, err := fileSize(src)
	if err != nil {
		return Result{}, err
	}
	got, err := Detect(src, size)
	if err != nil {
		return Result{}, err
	}
	if got != format {
		return Result{}, refuse("", KindInvalid, ReasonFormatMismatch, "the archive is "+string(got)+", not "+string(format))
	}
	x := &extraction{ctx: ctx, src: src, size: size, format: format, lim: lim}
	if format == FormatZip {
		if x.zip, err = openZip(src, size, lim); err != nil {
			return Result{}, err
		}
	}

	// Pass one: count everything, write nothing.
	p := newPlan(lim)
	buf := make([]byte, copyBufSize)
	if err := x.walk(func(e entry, body io.Reader) error {
		if check != nil {
			if err := check(e.name); err != nil {
				return asError(e.raw, err, KindForbidden, ReasonPolicy)
			}
		}
		if err := p.add(e); err != nil {
			return err
		}
		if body != nil {
			if _, err := io.CopyBuffer(onlyWrite{io.Discard}, body, buf); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return Result{}, err
	}
	if len(p.nodes) == 0 {
		return Result{}, refuse("", KindInvalid, ReasonEmptyArchive, "")
	}
	if err := p.checkLinks(); err != nil {
		return Result{}, err
	}
	x.passOne = x.total

	// Pass two: stage, then move into place.
	if err := x.install(dst, dir, p); err != nil {
		return Result{}, err
	}
	return p.res, nil
}

// extraction is the state shared by both passes.
type extraction struct {
	ctx     context.Context
	src     *os.File
	size    int64
	format  Format
	lim     Limits
	zip     *zip.Reader
	total   int64 // actual bytes of the last pass
	passOne int64 // actual bytes of pass one, which pass two must reproduce
}

// walk runs one pass with a fresh budget.
func (x *extraction) walk(visit visitFunc) error {
	b := &budget{lim: x.lim, srcSize: x.size}
	var err error
	if x.format == FormatZip {
		err = walkZip(x.ctx, x.zip, b, visit)
	} else {
		err = walkTar(x.ctx, x.src, x.size, x.format, b, visit)
	}
	x.total = b.total
	return err
}

// install creates dir if needed, stages the archive inside it and moves the
// top-level entries into place, undoing everything on failure.
func (x *extraction) install(dst *os.Root, dir string, p *plan) (err error) {
	created, err := makeDir(dst, dir)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			// Deepest first; Remove (not RemoveAll): only what we made, and only if empty.
			for i := len(created) - 1; i >= 0; i-- {
				_ = dst.Remove(created[i])
			}
		}
	}()
	dr, err := dst.OpenRoot(dir)
	if err != nil {
		return ioError("", err)
	}
	defer dr.Close() //nolint:errcheck // a root handle: nothing to flush, and the extraction's outcome is already decided

	tops := p.tops()
	slices.Sort(tops)
	for _, t := range tops {
		if _, err := dr.Lstat(t); err == nil {
			return refuse(t, KindConflict, ReasonTargetExists, "the destination already has this name")
		} else if !errors.Is(err, fs.ErrNotExist) {
			return ioError(t, err)
		}
	}

	staging := stagingPrefix + rand.Text()
	if err := dr.Mkdir(staging, 0o700); err != nil {
		return ioError("", err)
	}
	defer func() {
		if err != nil {
			_ = dr.RemoveAll(staging)
		}
	}()
	sr, err := dr.OpenRoot(staging)
	if err != nil {
		return ioError("", err)
	}
	defer sr.Close() //nolint:errcheck // a root handle: nothing to flush
	if err := x.stage(sr, p); err != nil {
		return err
	}
	if err := moveTops(dr, sr, tops); err != nil {
		return err
	}
	// Everything is in place: the extraction succeeded. The staging directory
	// is empty unless another process dropped something in it meanwhile;
	// removing it is best effort and its contents never were the archive's.
	_ = dr.RemoveAll(staging)
	return nil
}

// makeDir creates dir and its missing parents, returning what it created.
func makeDir(dst *os.Root, dir string) ([]string, error) {
	if dir == "" {
		dir = "."
	}
	var created []string
	parts := strings.Split(dir, "/")
	// Bounded by len(dir); the root refuses escapes on every call.
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		if p == "" || parts[i] == "." {
			continue
		}
		fi, err := dst.Stat(p)
		if err == nil {
			if !fi.IsDir() {
				return created, refuse("", KindConflict, ReasonPathConflict, "the destination is not a directory")
			}
			continue
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return created, ioError("", err)
		}
		if err := dst.Mkdir(p, 0o755); err != nil {
			return created, ioError("", err)
		}
		created = append(created, p)
	}
	return created, nil
}

// stage runs pass two into the staging root: files and directories in
// archive order, then directory modes deepest first, then symlinks last.
func (x *extraction) stage(sr *os.Root, p *plan) error {
	made := map[string]bool{}
	mkdirs := func(raw, name string) error {
		for i := 0; i <= len(name); i++ {
			if i < len(name) && name[i] != '/' {
				continue
			}
			d := name[:i]
			if d == "" || made[d] {
				continue
			}
			if err := sr.Mkdir(d, 0o700); err != nil {
				return ioError(raw, err)
			}
			made[d] = true
		}
		return nil
	}
	buf := make([]byte, copyBufSize)
	i := 0
	err := x.walk(func(e entry, body io.Reader) error {
		if i >= len(p.manifest) || !sameEntry(p.manifest[i], e) {
			return refuse(e.raw, KindInvalid, ReasonSourceChanged, "the archive changed between the two passes")
		}
		i++
		switch e.kind {
		case kindDir:
			return mkdirs(e.raw, e.name)
		case kindSymlink:
			return mkdirs(e.raw, parentOf(e.name))
		}
		if err := mkdirs(e.raw, parentOf(e.name)); err != nil {
			return err
		}
		f, err := sr.OpenFile(e.name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return ioError(e.raw, err)
		}
		_, err = io.CopyBuffer(onlyWrite{f}, body, buf)
		if err == nil {
			err = f.Chmod(p.nodes[e.name].perm)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return ioError(e.raw, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if i != len(p.manifest) {
		return refuse("", KindInvalid, ReasonSourceChanged, "the archive changed between the two passes")
	}
	if x.total != x.passOne {
		return refuse("", KindInvalid, ReasonSourceChanged, "the archive changed between the two passes")
	}
	dirs := make([]string, 0, len(made))
	for d := range made {
		dirs = append(dirs, d)
	}
	slices.SortFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	for _, d := range dirs {
		if err := sr.Chmod(d, p.nodes[d].perm); err != nil {
			return ioError(d, err)
		}
	}
	for _, l := range p.links {
		if err := sr.Symlink(l.target, l.name); err != nil {
			return ioError(l.raw, err)
		}
	}
	return nil
}

// copyBufSize is the chunk the meter sees per Read: the granularity of the
// caps and of cancellation inside a big entry.
const copyBufSize = 128 << 10

// onlyWrite hides *os.File's ReadFrom so CopyBuffer uses our buffer and
// every chunk passes the meter first.
type onlyWrite struct{ w io.Writer }

func (o onlyWrite) Write(p []byte) (int, error) { return o.w.Write(p) }

func sameEntry(a, b entry) bool {
	return a.name == b.name && a.kind == b.kind && a.size == b.size && a.target == b.target && a.mode == b.mode
}

// moveTops renames every top-level entry from the staging root into the
// destination without replacing anything; on failure it moves back what it
// already moved.
func moveTops(dr, sr *os.Root, tops []string) error {
	dd, err := dr.Open(".")
	if err != nil {
		return ioError("", err)
	}
	defer dd.Close() //nolint:errcheck // read-only directory handle used only for renameat2
	sd, err := sr.Open(".")
	if err != nil {
		return ioError("", err)
	}
	defer sd.Close() //nolint:errcheck // read-only directory handle used only for renameat2
	for i, t := range tops {
		if err := renameNoReplace(sd, t, dd, t); err != nil {
			for j := i - 1; j >= 0; j-- {
				_ = renameNoReplace(dd, tops[j], sd, tops[j])
			}
			if errors.Is(err, fs.ErrExist) {
				return &Error{Entry: t, Kind: KindConflict, Reason: ReasonTargetExists, Detail: "the destination already has this name", Err: err}
			}
			return ioError(t, err)
		}
	}
	return nil
}

// ioError classifies a file system failure while writing.
func ioError(raw string, err error) error {
	var ae *Error
	switch {
	case errors.As(err, &ae):
		return err
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return &Error{Entry: raw, Kind: KindTooLarge, Reason: ReasonNoSpace, Err: err}
	}
	return &Error{Entry: raw, Kind: KindInternal, Reason: ReasonIO, Err: err}
}
