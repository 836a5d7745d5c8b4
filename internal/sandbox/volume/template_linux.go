package volume

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// A new workspace image is a copy of a pre-formatted template rather than
// a fresh mkfs.ext4: formatting is 20–25 ms of fork, exec and writes per
// sandbox, while a fresh ext4 of any size is a sparse file with ~240 KB of
// metadata in it, so copying only the template's data extents (SEEK_DATA /
// SEEK_HOLE with copy_file_range, or one FICLONE where the host file system
// shares extents) gives the same file system in a fraction of that.
//
// Templates live in the data dir (TemplateDirName), one per quota size, made
// with mkfs.ext4 the first time a size is needed and kept for later runs.
// Each one has a SHA-256 digest beside it over its non-zero 4 KiB blocks
// (holes and zeros read alike, so the digest does not depend on how the host
// file system lays the file out); a template whose digest does not match, or
// that is missing, is rebuilt before it is used. Verification happens once
// per server run and again whenever the file's identity (inode, size,
// mtime, ctime) changes.
//
// Every copy gets a file system UUID of its own. The templates are made
// with metadata_csum_seed, so ext4's metadata checksums are seeded from a
// value stored in the superblock rather than from the UUID, and changing
// the UUID rewrites only the superblock and its backups (each with its own
// checksum) — what `tune2fs -U` does on such a file system, without a fork.
//
// A copy is written under a temporary name next to the image, fsynced and
// renamed into place (RENAME_NOREPLACE), and the directory fsynced: if the
// server dies mid-copy, the next start finds no image and makes a new one;
// a half-written copy is never found under the image's name. A sandbox's
// start mounts the copy under its temporary name and makes it durable
// (fsync, rename, directory fsync) while the init starts, and answers only
// once that is done (Staged, Sandbox.startLocked).

// Caps and names of the templates with their reasons.
const (
	// TemplateDirName is the templates' directory in the data dir (not in
	// the workspaces directory, whose entries are sandboxes).
	TemplateDirName = "workspace-templates"
	// templateVersion names the mkfs options below; changing them makes
	// new templates rather than reusing old ones.
	templateVersion = "v2"
	// maxTemplates bounds the sizes kept as templates (a client picks its
	// quota, so sizes are client input); other sizes are formatted per
	// sandbox as before.
	maxTemplates = 8
	// maxTemplateExtents bounds the data extents read from a template: a
	// fresh ext4 has a few dozen.
	maxTemplateExtents = 4096
	// maxSuperCopies bounds the superblock copies rewritten per image
	// (sparse_super keeps them in groups 0, 1 and powers of 3, 5 and 7: a
	// few dozen even for terabytes).
	maxSuperCopies = 256
	// maxTemplateData bounds the bytes read from a template's data
	// extents: its metadata is well under 1% of its size.
	maxTemplateData = 256 << 20
	// TmpSuffix marks a copy not yet complete.
	TmpSuffix = ".tmp"
)

// ErrNoTemplate says a size gets no template (the cap is reached); the
// caller formats the image itself.
var ErrNoTemplate = errors.New("no workspace template for this size")

// ErrTemplateBusy says another start is verifying or building the size's
// template; the caller formats the image itself rather than wait. A
// template's first build (mkfs.ext4, fsync) is the warm pool's first step
// and, on a loaded disk, took long enough that a create waiting for it ran
// out of its init's setup deadline.
var ErrTemplateBusy = errors.New("workspace template being verified or built")

// Templates is the server's set of templates; its zero value is ready.
type Templates struct {
	// mu guards bySize; each template has its own lock.
	mu     sync.Mutex
	bySize map[int64]*wsTemplate

	// builds and clones count templates made and images copied (tests
	// and benchmarks read them).
	builds, clones atomic.Int64
}

// wsTemplate is one size's template.
type wsTemplate struct {
	// mu guards v and busy; it is never held across I/O. The verified
	// layout is replaced, never changed, so a copy uses a snapshot.
	mu sync.Mutex
	v  *verifiedTemplate
	// busy is set while one caller verifies or (re)builds the template;
	// the others do not wait for it (ErrTemplateBusy).
	busy bool
}

// verifiedTemplate is a template file checked against its digest.
type verifiedTemplate struct {
	id      fileID
	size    int64
	extents []extent
	supers  []superCopy
}

type extent struct{ off, len int64 }

// superCopy is one copy of the ext4 superblock and where it lives.
type superCopy struct {
	off int64
	raw [superSize]byte
}

// fileID tells whether a template file is still the one verified.
type fileID struct {
	dev, ino     uint64
	size         int64
	mtime, ctime unix.Timespec
}

func statID(f *os.File) (fileID, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fileID{}, err
	}
	return fileID{dev: st.Dev, ino: st.Ino, size: st.Size, mtime: st.Mtim, ctime: st.Ctim}, nil
}

// Clone makes the image img (which must not exist) of the given size, a
// copy of the size's template in dir (built first if needed), with a fresh
// UUID. It returns ErrNoTemplate when the size gets no template.
func (t *Templates) Clone(dir, img string, size int64, clk Clock) error {
	st, err := t.stage(dir, img, size, clk)
	if err != nil {
		return err
	}
	if err := st.Commit(); err != nil {
		st.Abort()
		return err
	}
	mark(clk, "image_sync")
	return nil
}

// stage is clone without the last step: the copy is complete under its
// temporary name, not yet durable nor under img (Staged).
func (t *Templates) stage(dir, img string, size int64, clk Clock) (*Staged, error) {
	src, v, err := t.open(dir, size)
	if err != nil {
		return nil, err
	}
	defer func() { _ = src.Close() }()
	mark(clk, "template_open")
	st, err := StageCopy(img, size, true, func(dst *os.File) error { return copyTemplate(dst, src, v) })
	if err != nil {
		return nil, err
	}
	mark(clk, "image_copy")
	t.clones.Add(1)
	return st, nil
}

// open returns the size's template file, verified (rebuilt if missing or
// corrupt), and its layout. It never waits for another caller's
// verification or build: it answers ErrTemplateBusy instead.
func (t *Templates) open(dir string, size int64) (*os.File, *verifiedTemplate, error) {
	t.mu.Lock()
	if t.bySize == nil {
		t.bySize = make(map[int64]*wsTemplate)
	}
	tp := t.bySize[size]
	claimed := false
	if tp == nil {
		if len(t.bySize) >= maxTemplates {
			t.mu.Unlock()
			return nil, nil, ErrNoTemplate
		}
		// The first caller for a size claims it as it makes the entry.
		tp = &wsTemplate{busy: true}
		t.bySize[size] = tp
		claimed = true
	}
	t.mu.Unlock()

	path := filepath.Join(dir, TemplateName(size))
	if !claimed {
		tp.mu.Lock()
		v, busy := tp.v, tp.busy
		if v == nil && !busy {
			tp.busy = true // claimed: verify or build below
		}
		tp.mu.Unlock()
		switch {
		case busy:
			return nil, nil, ErrTemplateBusy
		case v != nil:
			f, err := openTemplate(path)
			if err == nil {
				if id, err := statID(f); err == nil && id == v.id {
					return f, v, nil
				}
				_ = f.Close()
			}
			// Changed or gone since it was verified: check it again,
			// unless another caller is at it already.
			tp.mu.Lock()
			if tp.busy {
				tp.mu.Unlock()
				return nil, nil, ErrTemplateBusy
			}
			tp.busy = true
			tp.mu.Unlock()
		}
	}
	f, v, err := t.verifyOrBuild(dir, path, size)
	tp.mu.Lock()
	tp.v, tp.busy = v, false
	tp.mu.Unlock()
	return f, v, err
}

// verifyOrBuild checks the template file at path, (re)building it when it
// is missing or corrupt. The caller has claimed the size (wsTemplate.busy).
func (t *Templates) verifyOrBuild(dir, path string, size int64) (*os.File, *verifiedTemplate, error) {
	f, err := openTemplate(path)
	if err == nil {
		// First use in this run, or the file changed: check it.
		v, verr := verifyTemplate(f, path, size)
		if verr == nil {
			return f, v, nil
		}
		_ = f.Close()
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, nil, err
	}
	// Missing or corrupt: (re)build it.
	if err := t.build(dir, path, size); err != nil {
		return nil, nil, err
	}
	if f, err = openTemplate(path); err != nil {
		return nil, nil, err
	}
	v, err := verifyTemplate(f, path, size)
	if err != nil {
		_ = f.Close()
		return nil, nil, fmt.Errorf("workspace template just built: %w", err)
	}
	return f, v, nil
}

func openTemplate(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0) //nolint:gosec // G304: a template in the server's own data dir
	if err != nil {
		return nil, fmt.Errorf("open workspace template: %w", err)
	}
	return f, nil
}

// build formats a new template for size and puts it (and its digest) in
// place atomically.
func (t *Templates) build(dir, path string, size int64) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create workspace template dir: %w", err)
	}
	// Templates of earlier runs count against the cap too.
	if n, err := countTemplates(dir, filepath.Base(path)); err != nil {
		return err
	} else if n >= maxTemplates {
		return ErrNoTemplate
	}
	err := writeCopy(path, size, false, nil, func(f *os.File) error {
		// mkfs and debugfs write through their own descriptors; the
		// copy's is only used to fsync the result.
		if err := Run(context.Background(), "mkfs.ext4", mkfsArgs(f.Name(), 0, true)...); err != nil {
			return err
		}
		// A workspace starts empty: lost+found goes here, once, rather
		// than from every copy after its mount (a directory removal
		// and a discard per sandbox, 1-8 ms of a cold create). e2fsck
		// makes it again if it ever needs it.
		return Run(context.Background(), "debugfs", "-w", "-R", "rmdir lost+found", f.Name())
	})
	if err != nil {
		return fmt.Errorf("build workspace template: %w", err)
	}
	f, err := openTemplate(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	_, sum, err := templateDigest(f, size)
	if err != nil {
		return err
	}
	if err := writeCopy(path+".sha256", -1, false, nil, func(d *os.File) error {
		_, err := d.WriteString(sum + "\n")
		return err
	}); err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("write workspace template digest: %w", err)
	}
	t.builds.Add(1)
	return nil
}

// countTemplates counts the template images in dir other than name.
func countTemplates(dir, name string) (int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("list workspace templates: %w", err)
	}
	n := 0
	for _, e := range entries {
		if e.Name() != name && strings.HasSuffix(e.Name(), ".img") {
			n++
		}
	}
	return n, nil
}

// mkfsArgs are mkfs.ext4's arguments for a workspace image: no journal (no
// jbd2 thread per sandbox), no reserved blocks, no resize inode (a
// workspace never grows online; it would add 2.4 MB of reserved
// descriptors to every image), lazily initialised inode tables (the image
// is sparse, so they read as zero). A template is owned by root and seeds
// its checksums from the superblock so that copies can change their UUID;
// its copies are given to the sandbox's user when first mounted.
func mkfsArgs(img string, uid int, template bool) []string {
	features := "^has_journal,^resize_inode"
	if template {
		features += ",metadata_csum_seed"
	}
	return []string{"-q", "-F", "-O", features, "-m", "0",
		"-E", fmt.Sprintf("root_owner=%d:%d,lazy_itable_init=1,nodiscard", uid, uid), "-L", "workspace", img}
}

// writeCopy makes path through a temporary name: fill writes the content
// (size >= 0 truncates the file to size first), then the file is fsynced
// and renamed into place and its directory fsynced. An existing path is
// replaced, or with noReplace an error (RENAME_NOREPLACE: a workspace image
// is never overwritten).
func writeCopy(path string, size int64, noReplace bool, clk Clock, fill func(*os.File) error) error {
	st, err := StageCopy(path, size, noReplace, fill)
	if err != nil {
		return err
	}
	mark(clk, "image_copy")
	if err := st.Commit(); err != nil {
		st.Abort()
		return err
	}
	mark(clk, "image_sync")
	return nil
}

// Staged is a file written in full under its temporary name (tmp)
// and not yet made durable: commit fsyncs it, renames it to path and
// fsyncs the directory; abort removes it. Until commit returns, nothing
// is found under path, so a crash in between leaves no file there (the
// next write removes the stale temporary copy, and a new sandbox's whole
// directory goes at the next start: Manager.reapWorkspaces).
type Staged struct {
	tmp, path string
	noReplace bool
	f         *os.File
}

// Tmp is the staged copy's temporary name.
func (st *Staged) Tmp() string { return st.tmp }

// File is the staged copy, open for reading and writing until Commit or
// Abort.
func (st *Staged) File() *os.File { return st.f }

// StageCopy writes path's content under its temporary name (see writeCopy).
func StageCopy(path string, size int64, noReplace bool, fill func(*os.File) error) (_ *Staged, err error) {
	tmp := path + TmpSuffix
	// A copy left by a server that died mid-write is never used.
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale copy: %w", err)
	}
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600) //nolint:gosec // G304: a file in the server's own data dir
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", filepath.Base(tmp), err)
	}
	st := &Staged{tmp: tmp, path: path, noReplace: noReplace, f: f}
	defer func() {
		if err != nil {
			st.Abort()
		}
	}()
	if size >= 0 {
		if err := f.Truncate(size); err != nil {
			return nil, fmt.Errorf("size %s: %w", filepath.Base(tmp), err)
		}
	}
	if err := fill(f); err != nil {
		return nil, err
	}
	return st, nil
}

// commit makes the staged file durable under its name.
func (st *Staged) Commit() error {
	if err := st.f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", filepath.Base(st.tmp), err)
	}
	cerr := st.f.Close()
	st.f = nil
	if cerr != nil {
		return fmt.Errorf("close %s: %w", filepath.Base(st.tmp), cerr)
	}
	flags := uint(0)
	if st.noReplace {
		flags = unix.RENAME_NOREPLACE
	}
	if err := unix.Renameat2(unix.AT_FDCWD, st.tmp, unix.AT_FDCWD, st.path, flags); err != nil {
		return fmt.Errorf("rename %s into place: %w", filepath.Base(st.tmp), err)
	}
	return SyncDir(filepath.Dir(st.path))
}

// abort drops a staged file that will not be committed (after a failed
// commit too: the temporary name is gone once the rename succeeded).
func (st *Staged) Abort() {
	if st.f != nil {
		_ = st.f.Close()
		st.f = nil
	}
	_ = os.Remove(st.tmp)
}

func SyncDir(dir string) error {
	d, err := os.Open(dir) //nolint:gosec // G304: a directory in the server's own data dir
	if err != nil {
		return fmt.Errorf("open %s: %w", filepath.Base(dir), err)
	}
	defer func() { _ = d.Close() }()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", filepath.Base(dir), err)
	}
	return nil
}

// copyTemplate copies the template's content into dst (already of the
// template's size) and gives the copy a fresh UUID.
func copyTemplate(dst, src *os.File, v *verifiedTemplate) error {
	// One FICLONE shares every extent where the host file system can
	// (btrfs, XFS); ext4 cannot, and the data extents are copied.
	if err := unix.IoctlFileClone(int(dst.Fd()), int(src.Fd())); err != nil {
		for _, e := range v.extents {
			if err := copyRange(dst, src, e); err != nil {
				return err
			}
		}
	}
	var uuid [16]byte
	if _, err := rand.Read(uuid[:]); err != nil {
		return fmt.Errorf("workspace uuid: %w", err)
	}
	uuid[6] = uuid[6]&0x0f | 0x40 // version 4
	uuid[8] = uuid[8]&0x3f | 0x80 // RFC 4122 variant
	for _, sc := range v.supers {
		raw := sc.raw
		setUUID(&raw, uuid)
		if _, err := dst.WriteAt(raw[:], sc.off); err != nil {
			return fmt.Errorf("write workspace superblock: %w", err)
		}
	}
	return nil
}

// copyRange copies one extent with copy_file_range (in-kernel, no user
// buffer), falling back to read and write where the kernel refuses.
func copyRange(dst, src *os.File, e extent) error {
	roff, woff, left := e.off, e.off, e.len
	for left > 0 {
		n, err := unix.CopyFileRange(int(src.Fd()), &roff, int(dst.Fd()), &woff, int(min(left, 1<<30)), 0) //nolint:gosec // G115: at most 2^30
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EXDEV) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) {
				_, err = io.Copy(io.NewOffsetWriter(dst, woff), io.NewSectionReader(src, roff, left))
				if err != nil {
					return fmt.Errorf("copy workspace template: %w", err)
				}
				return nil
			}
			return fmt.Errorf("copy workspace template: %w", err)
		}
		if n == 0 {
			return fmt.Errorf("copy workspace template: short read at %d", roff)
		}
		left -= int64(n)
	}
	return nil
}

// verifyTemplate checks a template file against its stored digest and
// reads its layout.
func verifyTemplate(f *os.File, path string, size int64) (*verifiedTemplate, error) {
	id, err := statID(f)
	if err != nil {
		return nil, fmt.Errorf("stat workspace template: %w", err)
	}
	if id.size != size {
		return nil, fmt.Errorf("workspace template has size %d, want %d", id.size, size)
	}
	want, err := os.ReadFile(path + ".sha256") //nolint:gosec // G304: beside the template in the server's own data dir
	if err != nil {
		return nil, fmt.Errorf("read workspace template digest: %w", err)
	}
	extents, sum, err := templateDigest(f, size)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(string(want)) != sum {
		return nil, errors.New("workspace template does not match its digest")
	}
	supers, err := readSupers(f, size)
	if err != nil {
		return nil, err
	}
	return &verifiedTemplate{id: id, size: size, extents: extents, supers: supers}, nil
}

// templateDigest lists f's data extents and hashes its non-zero 4 KiB
// blocks with their offsets.
func templateDigest(f *os.File, size int64) ([]extent, string, error) {
	var extents []extent
	h := sha256.New()
	var sz [8]byte
	binary.LittleEndian.PutUint64(sz[:], uint64(size)) //nolint:gosec // G115: a file size is not negative
	h.Write(sz[:])
	buf := make([]byte, 4096)
	zero := make([]byte, 4096)
	var read int64
	for off := int64(0); off < size; {
		data, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // no data past off
		}
		if err != nil {
			return nil, "", fmt.Errorf("seek workspace template: %w", err)
		}
		hole, err := unix.Seek(int(f.Fd()), data, unix.SEEK_HOLE)
		if err != nil {
			return nil, "", fmt.Errorf("seek workspace template: %w", err)
		}
		hole = min(hole, size)
		if len(extents) >= maxTemplateExtents {
			return nil, "", errors.New("workspace template has too many extents")
		}
		if read += hole - data; read > maxTemplateData {
			return nil, "", errors.New("workspace template has too much data")
		}
		extents = append(extents, extent{off: data, len: hole - data})
		for b := data &^ 4095; b < hole; b += 4096 {
			n, err := f.ReadAt(buf, b)
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, "", fmt.Errorf("read workspace template: %w", err)
			}
			if bytes.Equal(buf[:n], zero[:n]) {
				continue
			}
			binary.LittleEndian.PutUint64(sz[:], uint64(b)) //nolint:gosec // G115: an offset is not negative
			h.Write(sz[:])
			h.Write(buf[:n])
		}
		off = hole
	}
	return extents, hex.EncodeToString(h.Sum(nil)), nil
}

// The ext4 superblock fields read and written here (offsets within the
// 1024-byte superblock; see the kernel's struct ext4_super_block).
const (
	superSize          = 1024
	superOff           = 1024 // the primary copy's place in the image
	sbBlocksCountLo    = 0x04
	sbFirstDataBlock   = 0x14
	sbLogBlockSize     = 0x18
	sbBlocksPerGroup   = 0x20
	sbMagic            = 0x38
	sbBlockGroupNr     = 0x5a
	sbFeatureCompat    = 0x5c
	sbFeatureIncompat  = 0x60
	sbFeatureROCompat  = 0x64
	sbUUID             = 0x68
	sbBlocksCountHi    = 0x150
	sbBackupBGs        = 0x24c
	sbChecksum         = 0x3fc
	ext4Magic          = 0xef53
	compatSparseSuper2 = 0x200
	incompat64Bit      = 0x80
	incompatCsumSeed   = 0x2000
	roCompatSparse     = 0x1
	roCompatMetaCsum   = 0x400
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// superChecksum is ext4's superblock checksum: the kernel's crc32c with
// seed ~0 and no final inversion over the bytes before s_checksum.
func superChecksum(raw *[superSize]byte) uint32 {
	return ^crc32.Checksum(raw[:sbChecksum], castagnoli)
}

func setUUID(raw *[superSize]byte, uuid [16]byte) {
	copy(raw[sbUUID:sbUUID+16], uuid[:])
	if binary.LittleEndian.Uint32(raw[sbFeatureROCompat:])&roCompatMetaCsum != 0 {
		binary.LittleEndian.PutUint32(raw[sbChecksum:], superChecksum(raw))
	}
}

// readSupers reads the primary superblock and every backup, checks that
// they agree and that a new UUID needs no other metadata rewritten.
func readSupers(f *os.File, size int64) ([]superCopy, error) {
	var primary superCopy
	primary.off = superOff
	if _, err := f.ReadAt(primary.raw[:], superOff); err != nil {
		return nil, fmt.Errorf("read workspace template superblock: %w", err)
	}
	le := binary.LittleEndian
	p := &primary.raw
	if le.Uint16(p[sbMagic:]) != ext4Magic {
		return nil, errors.New("workspace template is not ext4")
	}
	ro, incompat := le.Uint32(p[sbFeatureROCompat:]), le.Uint32(p[sbFeatureIncompat:])
	if ro&roCompatMetaCsum != 0 && incompat&incompatCsumSeed == 0 {
		// Checksums seeded from the UUID: a new UUID would need every
		// checksum rewritten.
		return nil, errors.New("workspace template lacks metadata_csum_seed")
	}
	logBS := le.Uint32(p[sbLogBlockSize:])
	if logBS > 6 {
		return nil, errors.New("workspace template has a bad block size")
	}
	bs := int64(1024) << logBS
	bpg := int64(le.Uint32(p[sbBlocksPerGroup:]))
	first := int64(le.Uint32(p[sbFirstDataBlock:]))
	blocks := int64(le.Uint32(p[sbBlocksCountLo:]))
	if incompat&incompat64Bit != 0 {
		blocks |= int64(le.Uint32(p[sbBlocksCountHi:])) << 32
	}
	if bpg == 0 || blocks*bs > size || first >= blocks {
		return nil, errors.New("workspace template superblock does not fit the image")
	}
	groups := (blocks - first + bpg - 1) / bpg
	if ro&roCompatMetaCsum != 0 && le.Uint32(p[sbChecksum:]) != superChecksum(p) {
		return nil, errors.New("workspace template superblock checksum mismatch")
	}
	out := []superCopy{primary}
	for _, g := range backupGroups(p, groups) {
		if len(out) >= maxSuperCopies {
			return nil, errors.New("workspace template has too many superblock copies")
		}
		sc := superCopy{off: (g*bpg + first) * bs}
		if _, err := f.ReadAt(sc.raw[:], sc.off); err != nil {
			return nil, fmt.Errorf("read workspace template backup superblock: %w", err)
		}
		b := &sc.raw
		if le.Uint16(b[sbMagic:]) != ext4Magic || int64(le.Uint16(b[sbBlockGroupNr:])) != g&0xffff ||
			!bytes.Equal(b[sbUUID:sbUUID+16], p[sbUUID:sbUUID+16]) {
			return nil, fmt.Errorf("workspace template backup superblock %d does not match", g)
		}
		if ro&roCompatMetaCsum != 0 && le.Uint32(b[sbChecksum:]) != superChecksum(b) {
			return nil, fmt.Errorf("workspace template backup superblock %d checksum mismatch", g)
		}
		out = append(out, sc)
	}
	return out, nil
}

// backupGroups lists the block groups holding a backup superblock.
func backupGroups(p *[superSize]byte, groups int64) []int64 {
	le := binary.LittleEndian
	var gs []int64
	switch {
	case le.Uint32(p[sbFeatureCompat:])&compatSparseSuper2 != 0:
		for i := range int64(2) {
			if g := int64(le.Uint32(p[sbBackupBGs+4*i:])); g > 0 && g < groups {
				gs = append(gs, g)
			}
		}
	case le.Uint32(p[sbFeatureROCompat:])&roCompatSparse != 0:
		if groups > 1 {
			gs = append(gs, 1)
		}
		for _, base := range []int64{3, 5, 7} {
			for g := base; g < groups; g *= base {
				gs = append(gs, g)
			}
		}
	default:
		for g := int64(1); g < groups && g <= maxSuperCopies; g++ {
			gs = append(gs, g)
		}
	}
	return gs
}

// TemplateName is the file name of the template of one size in the
// templates' directory.
func TemplateName(size int64) string {
	return "ext4-" + templateVersion + "-" + strconv.FormatInt(size, 10) + ".img"
}

// Copies counts the images copied from a template (tests read it).
func (t *Templates) Copies() int64 { return t.clones.Load() }

// Sizes counts the sizes that have a template, made or being made.
func (t *Templates) Sizes() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.bySize)
}
