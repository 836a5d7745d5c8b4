package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// CPUProbe answers Group.CPUUsage through a descriptor held open, as a
// Probe answers Populated: each reading is one pread at offset 0 (a cgroup
// control file is generated afresh at every read), without the open, the
// close and the runtime poller's registration of an os.File that a read
// of the path costs. The exec path reads an execution group's CPU time
// after every command (sandbox, slot); on this project's VMs the open of a
// cgroupfs file was most of that reading's cost.
type CPUProbe struct {
	fd   int
	what string // for errors: the group and file
	// key names the field of a "key value" file (v2 cpu.stat); empty for
	// a file of one integer (v1 cpuacct.usage).
	key  string
	unit time.Duration
}

// cpuProbeBufBytes holds cpu.stat (nine short lines on 6.x kernels) or
// cpuacct.usage.
const cpuProbeBufBytes = 1024

// OpenCPUProbe opens g's CPU time: v1 cpuacct.usage (ErrNoCPUAccounting
// where no cpuacct hierarchy is mounted), v2 cpu.stat's usage_usec. The
// caller closes it. It reads the same figure as g.CPUUsage.
func OpenCPUProbe(g Group) (*CPUProbe, error) {
	var path, what, key string
	unit := time.Nanosecond
	switch g := g.(type) {
	case *v1Group:
		acct := g.dir("cpuacct")
		if acct == "" {
			return nil, ErrNoCPUAccounting
		}
		path, what = acct+"/cpuacct.usage", fmt.Sprintf("cpuacct.usage of cgroup %q", g.rel)
	case *v2Group:
		path, what, key, unit = g.dir()+"/cpu.stat", fmt.Sprintf("cpu.stat of cgroup %q", g.rel), "usage_usec", time.Microsecond
	default:
		return nil, fmt.Errorf("CPU probe of a %T: %w", g, errors.ErrUnsupported)
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", what, err)
	}
	p := &CPUProbe{fd: fd, what: what, key: key, unit: unit}
	if _, err := p.Usage(); err != nil {
		_ = p.Close()
		return nil, err
	}
	return p, nil
}

// Usage is the group's CPU time now (Group.CPUUsage).
func (p *CPUProbe) Usage() (time.Duration, error) {
	var buf [cpuProbeBufBytes]byte
	n, err := unix.Pread(p.fd, buf[:], 0)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", p.what, err)
	}
	if n == len(buf) {
		return 0, fmt.Errorf("read %s: larger than %d bytes", p.what, cpuProbeBufBytes)
	}
	b := buf[:n]
	if p.key != "" {
		v, ok := keyedField(b, p.key)
		if !ok {
			return 0, fmt.Errorf("%s: no %q field", p.what, p.key)
		}
		b = v
	}
	v, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", p.what, err)
	}
	return time.Duration(v) * p.unit, nil
}

// Close closes the descriptor; a closed probe's Usage fails.
func (p *CPUProbe) Close() error {
	if p.fd < 0 {
		return nil
	}
	err := unix.Close(p.fd)
	p.fd = -1
	return err
}
