package pidgroup

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxProcBytes caps what is read of a /proc/<pid> file.
const maxProcBytes = 16 << 10

// Member is one process of an execution group, pinned by a pidfd.
type Member struct {
	FD    int
	Pid   int // host pid
	Pgid  int // host process group
	NSpid int // pid inside the sandbox
}

// Pin pins every process of a group whose pids procs lists: each is
// opened as a pidfd and kept only if procs still lists it afterwards.
func Pin(procs func() ([]int, error)) ([]Member, error) {
	pids, err := procs()
	if err != nil {
		return nil, err
	}
	var out []Member
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // gone already
		}
		m := Member{FD: fd, Pid: pid}
		if m.Pgid, m.NSpid, err = procIDs(pid); err != nil {
			_ = unix.Close(fd)
			continue
		}
		out = append(out, m)
	}
	// Keep only those still in the group now that they are pinned.
	again, err := procs()
	if err != nil {
		Close(out)
		return nil, err
	}
	still := make(map[int]bool, len(again))
	for _, pid := range again {
		still[pid] = true
	}
	kept := out[:0]
	for _, m := range out {
		if still[m.Pid] {
			kept = append(kept, m)
		} else {
			_ = unix.Close(m.FD)
		}
	}
	return kept, nil
}

// Close closes the members' pidfds.
func Close(ms []Member) {
	for _, m := range ms {
		_ = unix.Close(m.FD)
	}
}

// procIDs reads a host pid's process group and its pid in the innermost
// pid namespace.
func procIDs(pid int) (pgid, nspid int, err error) {
	stat, err := readProc(pid, "stat")
	if err != nil {
		return 0, 0, err
	}
	// "pid (comm) state ppid pgrp …": comm may hold anything but ends at
	// the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, errors.New("malformed stat")
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 3 {
		return 0, 0, errors.New("malformed stat")
	}
	if pgid, err = strconv.Atoi(f[2]); err != nil {
		return 0, 0, err
	}
	status, err := readProc(pid, "status")
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			fs := strings.Fields(rest)
			if len(fs) == 0 {
				break
			}
			nspid, err = strconv.Atoi(fs[len(fs)-1])
			return pgid, nspid, err
		}
	}
	return 0, 0, errors.New("no NSpid")
}

func readProc(pid int, name string) ([]byte, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/" + name) //nolint:gosec // G304: a /proc file of a pid we started, by a fixed name
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	buf := make([]byte, maxProcBytes)
	n, err := f.Read(buf)
	if n == 0 && err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// Send signals the members match picks; it reports how many it reached.
func Send(ms []Member, sig syscall.Signal, match func(Member) bool) int {
	n := 0
	for _, m := range ms {
		if match(m) && unix.PidfdSendSignal(m.FD, sig, nil, 0) == nil {
			n++
		}
	}
	return n
}
