package template

import (
	"context"
	"debug/elf"
	"io"
)

// Reader reads r until ctx ends: an upload a source stages stops when its
// call is cancelled.
func Reader(ctx context.Context, r io.Reader) io.Reader { return ctxReader{ctx, r} }

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// StaticBusybox is the host's busybox when it is statically linked (it
// runs in a template's tree without the host's libraries), else "": the
// self-test's template and the tests' images carry it.
func StaticBusybox() string {
	for _, p := range []string{"/bin/busybox", "/usr/bin/busybox"} {
		f, err := elf.Open(p)
		if err != nil {
			continue
		}
		static := true
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				static = false // it needs the host's dynamic loader
			}
		}
		_ = f.Close()
		if static {
			return p
		}
	}
	return ""
}
