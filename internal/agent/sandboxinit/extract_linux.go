package sandboxinit

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandhold/sandhold/internal/agent/fds"
	"github.com/sandhold/sandhold/internal/agent/proto"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/archive/deny"
	"github.com/sandhold/sandhold/internal/archive/spec"
)

// Bounds of the transfer ops, with their reasons.
const (
	// transferTimeout bounds one extraction or packing so a stuck client
	// (a pipe nobody reads) cannot pin an init goroutine forever.
	transferTimeout = 30 * time.Minute
)

// reasonSensitive and reasonHardLinked are the refusals of the
// sensitive-path policy in archives.
const (
	reasonSensitive  = deny.ReasonSensitive
	reasonHardLinked = deny.ReasonHardLinked
)

// An extraction may write only into the writable trees (WritableTrees:
// the ones landlock leaves writable). The destination is opened as an
// *os.Root on its top, so nothing — not a symlink on the way, not one
// planted during the extraction — leads a write out of that tree.

// splitTop returns the writable top holding p and p relative to it.
func splitTop(p string) (top, rel string, ok bool) {
	for _, t := range proto.WritableTrees {
		if p == t {
			return t, ".", true
		}
		if strings.HasPrefix(p, t+"/") {
			return t, p[len(t)+1:], true
		}
	}
	return "", "", false
}

func (s *server) transferOp(op proto.Op, r *proto.TransferReq, files []*os.File) (proto.Response, []*os.File, error) {
	if err := proto.CheckPath(r.Path); err != nil {
		return proto.Response{}, nil, err
	}
	var resp proto.TransferResp
	var err error
	switch op {
	case proto.OpStatFS:
		err = s.asUser(false, func() error {
			var st unix.Statfs_t
			if err := unix.Statfs(r.Path, &st); err != nil {
				return err
			}
			resp.Total = spec.BlocksBytes(st.Blocks, st.Bsize)
			resp.Free = spec.BlocksBytes(st.Bavail, st.Bsize)
			return nil
		})
	case proto.OpExtract, proto.OpPack:
		var g *extractorGroups
		if g, err = s.extractorFiles(r, files); err != nil {
			return proto.Response{}, nil, err
		}
		if op == proto.OpExtract {
			err = s.extract(r, files[0], g, &resp)
		} else {
			err = s.pack(r, files[0], g, &resp)
		}
	default:
		return proto.Response{}, nil, proto.Invalidf("unknown transfer op %q", op)
	}
	if err != nil {
		var ae *spec.Error
		if errors.As(err, &ae) {
			resp.Refused = &proto.Refusal{Entry: ae.Entry, Reason: ae.Reason, Kind: ae.Kind, Detail: ae.Detail}
			return proto.Response{Transfer: &resp}, nil, nil
		}
		return proto.Response{}, nil, err
	}
	return proto.Response{Transfer: &resp}, nil, nil
}

// extract checks the request and the archive's descriptor, then runs the
// extractor on them (see runExtractor): the init never parses an archive.
func (s *server) extract(r *proto.TransferReq, src *os.File, g *extractorGroups, resp *proto.TransferResp) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(src.Fd()), &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return proto.Invalidf("the archive must be a regular file")
	}
	top, rel, ok := splitTop(r.Path)
	if !ok {
		return &proto.Error{Code: "EROFS", Msg: "archives can only be extracted below /workspace, /tmp or /dev/shm"}
	}
	req := spec.ChildReq{Op: spec.ChildExtract, Top: top, Rel: rel, Path: r.Path, Format: r.Format, Limits: r.Limits, Deny: r.Deny}
	res, err := s.runExtractor(&req, src, g)
	resp.Result = res
	return err
}

func (s *server) pack(r *proto.TransferReq, w *os.File, g *extractorGroups, resp *proto.TransferResp) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(w.Fd()), &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return proto.Invalidf("pack writes to a pipe")
	}
	lim := r.Limits
	// The check walk holds one descriptor per level; Pack must not go
	// deeper than it looked.
	lim.MaxDepth = min(lim.MaxDepth, proto.MaxWalkDepth-1)
	// The check walk first: a refusal (sensitive or hard-linked file, a
	// tree too deep or too large, the time budget) comes before the first
	// byte, so the client gets a clear 4xx instead of a cut stream.
	if err := s.asUser(false, func() error { return checkTree(r.Path, r.Deny, lim) }); err != nil {
		return err
	}
	rel := strings.TrimPrefix(r.Path, "/")
	if rel == "" {
		rel = "."
	}
	req := spec.ChildReq{Op: spec.ChildPack, Top: "/", Rel: rel, Path: r.Path, Format: r.Format, Limits: lim, Deny: r.Deny}
	res, err := s.runExtractor(&req, w, g)
	resp.Result = res
	return err
}

// extractorGroups is the extractor's program and the cgroup files it is
// started with (none: the sandbox's own groups).
type extractorGroups struct {
	prog          *os.File
	cgroups, home []*os.File
}

// extractorFiles splits an extract or pack request's descriptors: the
// archive or pipe, the program, then the cgroup files as a spawn's.
func (s *server) extractorFiles(r *proto.TransferReq, files []*os.File) (*extractorGroups, error) {
	if r.CgroupFDs < 0 || r.HomeFDs < 0 || len(files) != 2+r.CgroupFDs+r.HomeFDs {
		return nil, proto.Invalidf("an archive or pipe descriptor, the extractor's and %d+%d cgroup descriptors announced, %d attached", r.CgroupFDs, r.HomeFDs, len(files))
	}
	if s.setup.CgroupVersion != 2 && r.HomeFDs < r.CgroupFDs {
		// As for a spawn: the forking thread must be able to come back.
		return nil, proto.Invalidf("%d execution cgroup descriptors but only %d to return home", r.CgroupFDs, r.HomeFDs)
	}
	return &extractorGroups{prog: files[1], cgroups: files[2 : 2+r.CgroupFDs], home: files[2+r.CgroupFDs:]}, nil
}

// checkTree walks the tree at p (never following symlinks, one open
// directory per level) and refuses to pack it when it holds a name of the
// sensitive-path policy or a hard-linked file (the archive would carry it
// out, past the policy the file API applies), a name deeper than
// lim.MaxDepth or longer than lim.MaxPathLen, more than lim.MaxEntries
// objects, or when the walk runs past MaxWalkTime. Every refusal names
// the rule; none of them needs the whole tree in memory.
func checkTree(p string, deny proto.Deny, lim spec.Limits) error {
	fd, root, err := openRoot(p, true)
	if err != nil {
		return err
	}
	defer fds.Close(fd)
	var refusal error
	seen := 0
	// depth lim.MaxDepth+1: far enough to see the first name too deep.
	w := newWalker(root, min(lim.MaxDepth+1, proto.MaxWalkDepth), nil, proto.Deny{})
	w.hidden = true
	w.visit = func(_ int, _, rel string, st *unix.Stat_t) bool {
		seen++
		switch {
		case seen > lim.MaxEntries:
			refusal = &spec.Error{Entry: rel, Reason: spec.ReasonTooManyEntries, Kind: spec.KindTooLarge,
				Detail: fmt.Sprintf("the directory holds more than %d entries", lim.MaxEntries)}
		case strings.Count(rel, "/")+1 > lim.MaxDepth:
			refusal = &spec.Error{Entry: rel, Reason: spec.ReasonTooDeep, Kind: spec.KindTooLarge,
				Detail: fmt.Sprintf("the directory is more than %d levels deep", lim.MaxDepth)}
		case len(rel) > lim.MaxPathLen:
			refusal = &spec.Error{Entry: rel, Reason: spec.ReasonNameTooLong, Kind: spec.KindTooLarge}
		default:
			refusal = spec.PackPolicy(path.Join(root, rel), rel, statInfo{rel, st}, deny)
		}
		return refusal == nil
	}
	w.dir(fd, "", 1)
	if refusal != nil {
		return refusal
	}
	if w.cut {
		// Neither a refusal above nor the depth (checked by name):
		// the visit cap or the time budget ended the walk.
		return &spec.Error{Reason: reasonTreeTooSlow, Kind: spec.KindTooLarge,
			Detail: fmt.Sprintf("the directory could not be checked within %s or %d entries; archive a smaller one", proto.MaxWalkTime, proto.MaxWalkVisit)}
	}
	return nil
}

// reasonTreeTooSlow: the check walk ran out of time or visits.
const reasonTreeTooSlow = "tree_too_large"

// statInfo is an fs.FileInfo over a stat the walk already has.
type statInfo struct {
	name string
	st   *unix.Stat_t
}

func (s statInfo) Name() string       { return path.Base(s.name) }
func (s statInfo) Size() int64        { return s.st.Size }
func (s statInfo) Mode() fs.FileMode  { return fileMode(s.st.Mode) }
func (s statInfo) ModTime() time.Time { return time.Unix(0, s.st.Mtim.Nano()) }
func (s statInfo) IsDir() bool        { return s.Mode().IsDir() }
func (s statInfo) Sys() any {
	return &syscall.Stat_t{Nlink: s.st.Nlink, Mode: s.st.Mode, Size: s.st.Size}
}

// extractorEnv is the extractor's whole environment.
var extractorEnv = []string{"GOMAXPROCS=1", "GOTRACEBACK=none", proto.SandboxGODEBUG}

// maxExtractorReply bounds the extractor's reply (a result and a refusal:
// well under a KiB).
const maxExtractorReply = 64 << 10

// runExtractor runs one extraction or packing in the extractor program
// (spec.ChildReq on its stdin, f as spec.ChildFD, its reply on stdout)
// and returns its result or refusal. g.prog is the program: the sealed
// memfd of cmd/sandhold-archive the server attaches, or a binary that
// links package archive. It is forked on forkLoop's thread like a
// command: in the sandbox's namespaces, under the init's landlock ruleset
// and seccomp filter with no_new_privs, with that thread's empty bounding
// set, as the sandbox user (so no capabilities), in its own session; in
// the execution group g.cgroups names, else in the sandbox's own groups.
// A timeout (transferTimeout) kills it.
func (s *server) runExtractor(req *spec.ChildReq, f *os.File, g *extractorGroups) (spec.Result, error) {
	req.TimeoutMS = transferTimeout.Milliseconds()
	body, err := json.Marshal(req)
	if err != nil {
		return spec.Result{}, err
	}
	inR, inW, err := pipe()
	if err != nil {
		return spec.Result{}, err
	}
	outR, outW, err := pipe()
	if err != nil {
		fds.Close(inR)
		fds.Close(inW)
		return spec.Result{}, err
	}
	in := os.NewFile(uintptr(inW), "extractor stdin")
	out := os.NewFile(uintptr(outR), "extractor stdout")
	defer func() { _ = in.Close(); _ = out.Close() }()
	// The child's descriptors: stdin, stdout, stderr (/dev/null), the
	// archive at spec.ChildFD, the program after it (executed by its
	// /proc/self/fd name in the child, whose table ForkExec set up).
	childFDs := []uintptr{uintptr(inR), uintptr(outW), uintptr(s.devNull), f.Fd(), g.prog.Fd()}
	path := "/proc/self/fd/" + strconv.Itoa(len(childFDs)-1)
	attr := &syscall.SysProcAttr{
		Setsid:     true,
		Credential: &syscall.Credential{Uid: uint32(s.setup.UID), Gid: uint32(s.setup.GID), Groups: []uint32{}}, //nolint:gosec // G115: the sandbox user's ids from the server's setup, 1000 by default
	}
	// One P: extraction and packing are one stream each, and a second P
	// cost the start ≈ 40 page faults (BENCHMARKS.md, "The extractor out
	// of the init"); GODEBUG as for the init (launch_linux.go).
	proc := &syscall.ProcAttr{Dir: "/", Env: extractorEnv, Files: childFDs, Sys: attr}
	type forked struct {
		pid int
		err error
	}
	done := make(chan forked, 1)
	s.forks <- spawnJob{run: func() {
		pid, err, homeErr := s.forkInGroup(noReport, path, []string{spec.ChildName, "init"}, proc, g.cgroups, g.home)
		if homeErr != nil {
			s.lost = homeErr
		}
		done <- forked{pid, err}
	}}
	fk := <-done
	fds.Close(inR)
	fds.Close(outW)
	if fk.err != nil {
		return spec.Result{}, fmt.Errorf("start the extractor: %w", fk.err)
	}
	// The request may exceed the pipe's buffer; it is written beside the
	// wait for the reply.
	go func() {
		_, _ = in.Write(body)
		_ = in.Close()
	}()
	// The timeout kills the extractor only while its reply is still
	// open: its stdout closes when it exits, before the reaper can
	// collect it and its pid be reused.
	var mu sync.Mutex
	finished := false
	timer := time.AfterFunc(transferTimeout+10*time.Second, func() {
		mu.Lock()
		defer mu.Unlock()
		if !finished {
			_ = unix.Kill(fk.pid, unix.SIGKILL)
		}
	})
	reply, rerr := io.ReadAll(io.LimitReader(out, maxExtractorReply))
	mu.Lock()
	finished = true
	mu.Unlock()
	timer.Stop()
	if rerr != nil {
		return spec.Result{}, fmt.Errorf("read the extractor's reply: %w", rerr)
	}
	var resp spec.ChildResp
	if len(reply) == 0 {
		return spec.Result{}, errors.New("the extractor ended without a reply")
	}
	if err := json.Unmarshal(reply, &resp); err != nil {
		return spec.Result{}, fmt.Errorf("the extractor's reply: %w", err)
	}
	switch {
	case resp.Refused != nil:
		return resp.Result, resp.Refused
	case resp.Failed && resp.Code != "":
		return resp.Result, &proto.Error{Code: resp.Code, Msg: resp.Msg}
	case resp.Failed:
		return resp.Result, &proto.Error{Code: proto.CodeInternal, Msg: resp.Msg}
	}
	return resp.Result, nil
}
