package cgroup

import (
	"bytes"
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

// fileProbe reads one control file again and again through a descriptor
// held open. cgroupfs control files are seq_files: a read at offset 0
// generates the content afresh, so pread(fd, buf, 0) sees the current
// value without an open and a close (and without the runtime poller an
// os.File would register the descriptor with).
type fileProbe struct {
	fd   int
	what string // for errors: the group and file
	// key, when set, names the field of a "key value" file; otherwise
	// the file holds one integer.
	key string
}

var _ Probe = (*fileProbe)(nil)

func openProbe(path, what, key string) (*fileProbe, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", what, err)
	}
	p := &fileProbe{fd: fd, what: what, key: key}
	if _, err := p.Populated(); err != nil {
		_ = p.Close()
		return nil, err
	}
	return p, nil
}

// probeBufBytes holds pids.current or cgroup.events (two short lines).
const probeBufBytes = 128

func (p *fileProbe) Populated() (bool, error) {
	var buf [probeBufBytes]byte
	n, err := unix.Pread(p.fd, buf[:], 0)
	if err != nil {
		return false, fmt.Errorf("read %s: %w", p.what, err)
	}
	if n == len(buf) {
		return false, fmt.Errorf("read %s: larger than %d bytes", p.what, probeBufBytes)
	}
	b := buf[:n]
	if p.key != "" {
		v, ok := keyedField(b, p.key)
		if !ok {
			return false, fmt.Errorf("%s: no %q field", p.what, p.key)
		}
		b = v
	}
	v, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil {
		return false, fmt.Errorf("parse %s: %w", p.what, err)
	}
	return v > 0, nil
}

func (p *fileProbe) Close() error {
	if p.fd < 0 {
		return nil
	}
	err := unix.Close(p.fd)
	p.fd = -1
	return err
}

// keyedField returns the value of key in "key value" lines.
func keyedField(b []byte, key string) ([]byte, bool) {
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		k, v, ok := bytes.Cut(line, []byte{' '})
		if ok && string(k) == key {
			return v, true
		}
	}
	return nil, false
}

// OpenProbe holds pids.current open: it counts the tasks of the whole
// subtree, as Populated does.
func (g *v1Group) OpenProbe() (Probe, error) {
	return openProbe(g.dir("pids")+"/pids.current", fmt.Sprintf("pids.current of cgroup %q", g.rel), "")
}

// OpenProbe holds cgroup.events open (its "populated" field covers the
// subtree).
func (g *v2Group) OpenProbe() (Probe, error) {
	return openProbe(g.dir()+"/cgroup.events", fmt.Sprintf("cgroup.events of cgroup %q", g.rel), "populated")
}
