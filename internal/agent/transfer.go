package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/sandhold/sandhold/internal/agent/proto"

	"github.com/sandhold/sandhold/internal/agent/initbin"
	"github.com/sandhold/sandhold/internal/archive/spec"
)

func refusalError(r *proto.Refusal) error {
	return &spec.Error{Entry: r.Entry, Reason: r.Reason, Kind: r.Kind, Detail: r.Detail}
}

func (c *Client) transfer(ctx context.Context, op proto.Op, r proto.TransferReq, f *os.File, cgroupFiles, homeFiles []*os.File) (*proto.TransferResp, error) {
	if err := proto.CheckPath(r.Path); err != nil {
		return nil, err
	}
	var attach []*os.File
	if f != nil {
		attach = []*os.File{f}
	}
	if op == proto.OpExtract || op == proto.OpPack {
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
	resp, files, err := c.call(ctx, proto.Request{Op: op, Transfer: &r}, attach, nil)
	proto.CloseAll(files)
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
func (c *Client) Extract(ctx context.Context, r proto.TransferReq, src *os.File) (spec.Result, error) {
	return c.ExtractIn(ctx, r, src, nil, nil)
}

// ExtractIn is Extract with the extractor started in an execution group:
// cgroupFiles are that group's, homeFiles the sandbox's own (as Spawn's);
// they stay the caller's.
func (c *Client) ExtractIn(ctx context.Context, r proto.TransferReq, src *os.File, cgroupFiles, homeFiles []*os.File) (spec.Result, error) {
	if src == nil {
		return spec.Result{}, errors.New("extract: no archive")
	}
	resp, err := c.transfer(ctx, proto.OpExtract, r, src, cgroupFiles, homeFiles)
	if resp == nil {
		return spec.Result{}, err
	}
	return resp.Result, err
}

// Pack writes the tree under r.Path to w (the write end of a pipe; it
// stays the caller's, who should close its copy once the request is sent).
// It returns when the init has finished writing.
func (c *Client) Pack(ctx context.Context, r proto.TransferReq, w *os.File) (spec.Result, error) {
	return c.PackIn(ctx, r, w, nil, nil)
}

// PackIn is Pack with the extractor started in an execution group (see
// ExtractIn).
func (c *Client) PackIn(ctx context.Context, r proto.TransferReq, w *os.File, cgroupFiles, homeFiles []*os.File) (spec.Result, error) {
	if w == nil {
		return spec.Result{}, errors.New("pack: no writer")
	}
	resp, err := c.transfer(ctx, proto.OpPack, r, w, cgroupFiles, homeFiles)
	if resp == nil {
		return spec.Result{}, err
	}
	return resp.Result, err
}

// StatFS reports the size and free bytes of the file system holding path.
func (c *Client) StatFS(ctx context.Context, path string) (total, free int64, err error) {
	resp, err := c.transfer(ctx, proto.OpStatFS, proto.TransferReq{Path: path}, nil, nil, nil)
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
// init, a test binary; sandboxinit.Entry hands such a start to package
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
