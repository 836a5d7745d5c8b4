package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/sandhold/sandhold/internal/agent/initbin"
	"github.com/sandhold/sandhold/internal/archive/spec"
)

// The transfer ops (extract_linux.go): archives are unpacked and packed
// inside the sandbox, by the extractor program the init runs as its child
// for each request (like a command, as the sandbox user), so the archive
// code only ever sees the sandbox's view through an *os.Root, and the
// init itself links no archive code. Archive bytes travel as descriptors:
// the archive to extract is attached to the request (a regular file, read
// twice), and the pipe a packed archive is written to likewise; the
// extractor program (Extractor) is attached after it.
const (
	// OpExtract unpacks the attached archive into Transfer.Path.
	OpExtract Op = "extract"
	// OpPack writes the tree under Transfer.Path to the attached pipe.
	OpPack Op = "pack"
	// OpStatFS reports the size and free space of the file system holding
	// Transfer.Path (the workspace quota).
	OpStatFS Op = "statfs"
)

// TransferReq is the argument of the transfer ops.
type TransferReq struct {
	// Path is the destination directory (extract), the directory to pack,
	// or any path on the file system to measure (statfs).
	Path   string      `json:"path"`
	Format spec.Format `json:"format,omitempty"`
	// Limits are the caps; for extract, MaxTotalBytes is lowered further
	// by the init to the free space of the destination's file system.
	Limits spec.Limits `json:"limits"`
	// Deny is the sensitive-path policy: pack refuses a tree holding a
	// denied name (it would otherwise carry the file out).
	Deny Deny `json:"deny"`
	// CgroupFDs and HomeFDs (extract, pack) count the execution group's
	// and the sandbox's own cgroup files attached after the archive and
	// the program, as SpawnReq's: the extractor then starts in that
	// execution group like a command; with none it stays in the
	// sandbox's own groups. Set by ExtractIn and PackIn.
	CgroupFDs int `json:"cgroup_fds,omitempty"`
	HomeFDs   int `json:"home_fds,omitempty"`
}

// Refusal is an archive refusal as it crosses the protocol.
type Refusal struct {
	Entry  string    `json:"entry,omitempty"`
	Reason string    `json:"reason"`
	Kind   spec.Kind `json:"kind"`
	Detail string    `json:"detail,omitempty"`
}

// TransferResp is the reply to a transfer op.
type TransferResp struct {
	Result spec.Result `json:"result"`
	// Refused is set when the archive code refused (nothing was written).
	Refused *Refusal `json:"refused,omitempty"`
	// Total and Free are statfs's answer in bytes (free: available to the
	// sandbox user).
	Total int64 `json:"total,omitempty"`
	Free  int64 `json:"free,omitempty"`
}

func refusalError(r *Refusal) error {
	return &spec.Error{Entry: r.Entry, Reason: r.Reason, Kind: r.Kind, Detail: r.Detail}
}

func (c *Client) transfer(ctx context.Context, op Op, r TransferReq, f *os.File, cgroupFiles, homeFiles []*os.File) (*TransferResp, error) {
	if err := CheckPath(r.Path); err != nil {
		return nil, err
	}
	var attach []*os.File
	if f != nil {
		attach = []*os.File{f}
	}
	if op == OpExtract || op == OpPack {
		// The init parses no archive: it runs this program for the
		// request (see Extractor).
		prog, err := Extractor()
		if err != nil {
			return nil, err
		}
		attach = append(attach, prog)
		r.CgroupFDs, r.HomeFDs = len(cgroupFiles), len(homeFiles)
		attach = append(append(attach, cgroupFiles...), homeFiles...)
	}
	resp, files, err := c.call(ctx, Request{Op: op, Transfer: &r}, attach, nil)
	closeAll(files)
	if err != nil {
		return nil, err
	}
	if resp.Transfer == nil {
		return nil, fmt.Errorf("%s reply without a result", op)
	}
	if resp.Transfer.Refused != nil {
		return resp.Transfer, refusalError(resp.Transfer.Refused)
	}
	return resp.Transfer, nil
}

// Extract unpacks src (a regular file; it stays the caller's) into the
// directory r.Path inside the sandbox. A refusal is an *archive.Error (= *spec.Error).
func (c *Client) Extract(ctx context.Context, r TransferReq, src *os.File) (spec.Result, error) {
	return c.ExtractIn(ctx, r, src, nil, nil)
}

// ExtractIn is Extract with the extractor started in an execution group:
// cgroupFiles are that group's, homeFiles the sandbox's own (as Spawn's);
// they stay the caller's.
func (c *Client) ExtractIn(ctx context.Context, r TransferReq, src *os.File, cgroupFiles, homeFiles []*os.File) (spec.Result, error) {
	if src == nil {
		return spec.Result{}, errors.New("extract: no archive")
	}
	resp, err := c.transfer(ctx, OpExtract, r, src, cgroupFiles, homeFiles)
	if resp == nil {
		return spec.Result{}, err
	}
	return resp.Result, err
}

// Pack writes the tree under r.Path to w (the write end of a pipe; it
// stays the caller's, who should close its copy once the request is sent).
// It returns when the init has finished writing.
func (c *Client) Pack(ctx context.Context, r TransferReq, w *os.File) (spec.Result, error) {
	return c.PackIn(ctx, r, w, nil, nil)
}

// PackIn is Pack with the extractor started in an execution group (see
// ExtractIn).
func (c *Client) PackIn(ctx context.Context, r TransferReq, w *os.File, cgroupFiles, homeFiles []*os.File) (spec.Result, error) {
	if w == nil {
		return spec.Result{}, errors.New("pack: no writer")
	}
	resp, err := c.transfer(ctx, OpPack, r, w, cgroupFiles, homeFiles)
	if resp == nil {
		return spec.Result{}, err
	}
	return resp.Result, err
}

// StatFS reports the size and free bytes of the file system holding path.
func (c *Client) StatFS(ctx context.Context, path string) (total, free int64, err error) {
	resp, err := c.transfer(ctx, OpStatFS, TransferReq{Path: path}, nil, nil, nil)
	if err != nil {
		return 0, 0, err
	}
	return resp.Total, resp.Free, nil
}

// extractor is the program Extractor returns, opened once per process.
var extractor struct {
	once sync.Once
	f    *os.File
	err  error
}

// Extractor is the extractor program the init runs for each extract or
// pack (spec.ChildName): the embedded cmd/sandhold-archive in a sealed
// memfd when the server was built with it (`make build`), else this very
// binary when it links package archive (the server built without the lean
// init, a test binary; agent.Entry hands such a start to package
// archive), opened once. A binary with neither cannot extract: the
// request is refused, never served another way.
func Extractor() (*os.File, error) {
	extractor.once.Do(func() {
		switch {
		case initbin.ArchiveEmbedded():
			extractor.f, extractor.err = initbin.ArchiveMemfd()
		case spec.Child != nil:
			// A copy in a sealed memfd: landlock lets a sandbox execute
			// no file of the host's tree, only what the sandbox sees
			// and a memfd.
			var prog []byte
			prog, extractor.err = os.ReadFile("/proc/self/exe")
			if extractor.err == nil {
				extractor.f, extractor.err = initbin.MemfdNamed(spec.ChildName, prog)
			}
		default:
			extractor.err = errors.New("extract: this program carries no extractor")
		}
	})
	return extractor.f, extractor.err
}
