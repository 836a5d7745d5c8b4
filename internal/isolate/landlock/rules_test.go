package landlock

import (
	"errors"
	"io/fs"
	"slices"
	"testing"
	"time"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

type fakeInfo struct{ dir bool }

func (f fakeInfo) Name() string       { return "x" }
func (f fakeInfo) Size() int64        { return 0 }
func (f fakeInfo) Mode() fs.FileMode  { return map[bool]fs.FileMode{true: fs.ModeDir, false: 0}[f.dir] }
func (f fakeInfo) ModTime() time.Time { return time.Time{} }
func (f fakeInfo) IsDir() bool        { return f.dir }
func (f fakeInfo) Sys() any           { return nil }

// fakeStat answers from a map of path -> is a directory; anything absent
// does not exist.
func fakeStat(entries map[string]bool) func(string) (fs.FileInfo, error) {
	return func(p string) (fs.FileInfo, error) {
		dir, ok := entries[p]
		if !ok {
			return nil, fs.ErrNotExist
		}
		return fakeInfo{dir: dir}, nil
	}
}

var tree = fakeStat(map[string]bool{"/": true, "/usr": true, "/workspace": true, "/tmp": true, "/dev/null": false, "/dev/tty": false, "/etc/hostname": false})

func TestMakePlanErrors(t *testing.T) {
	cases := []struct {
		name        string
		abi         int
		r           Rules
		unavailable bool // the error must wrap ErrUnavailable
	}{
		{name: "abi-too-old", abi: 2, r: Rules{ReadOnly: []string{"/"}, AllowAllTCP: true}, unavailable: true},
		{name: "abi3-with-tcp-rules", abi: 3, r: Rules{ReadOnly: []string{"/"}, TCPConnect: []uint16{3128}}, unavailable: true},
		// An empty list means "no TCP at all": that needs ABI 4 too.
		{name: "abi3-empty-tcp-lists-still-restrict", abi: 3, r: Rules{ReadOnly: []string{"/"}}, unavailable: true},
		{name: "relative-path", abi: 7, r: Rules{ReadOnly: []string{"usr"}}},
		{name: "empty-path", abi: 7, r: Rules{ReadWrite: []string{""}}},
		{name: "dotdot-relative", abi: 7, r: Rules{ReadOnly: []string{"../etc"}}},
		{name: "missing-required", abi: 7, r: Rules{ReadOnly: []string{"/nope"}}},
		{name: "missing-required-other-optional", abi: 7, r: Rules{ReadOnly: []string{"/nope", "/nope2"}, Optional: []string{"/nope2"}}},
		{name: "optional-not-listed", abi: 7, r: Rules{ReadOnly: []string{"/"}, Optional: []string{"/typo"}}},
		{name: "readwrite-on-file", abi: 7, r: Rules{ReadWrite: []string{"/dev/null"}}},
		{name: "readwritefiles-on-dir", abi: 7, r: Rules{ReadWriteFiles: []string{"/tmp"}}},
		{name: "too-many-paths", abi: 7, r: Rules{ReadOnly: slices.Repeat([]string{"/"}, maxPaths+1)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := makePlan(tc.abi, tc.r, tree)
			if err == nil {
				t.Fatal("plan accepted")
			}
			if got := errors.Is(err, ErrUnavailable); got != tc.unavailable {
				t.Errorf("errors.Is(ErrUnavailable) = %v for %v", got, err)
			}
		})
	}
}

func TestMakePlan(t *testing.T) {
	full := Rules{
		ReadOnly:       []string{"/", "/etc/hostname", "/opt/missing"},
		ReadWrite:      []string{"/workspace", "/tmp"},
		ReadWriteFiles: []string{"/dev/null", "/dev/tty"},
		TCPConnect:     []uint16{3128},
		TCPBind:        []uint16{8080, 0},
		Optional:       []string{"/opt/missing"},
	}
	cases := []struct {
		name        string
		abi         int
		r           Rules
		wantFS      uint64
		wantNet     uint64
		wantScoped  uint64
		wantSkipped []string
		grants      map[string]uint64
	}{
		{
			name: "abi7-full", abi: 7, r: full,
			wantFS:      1<<16 - 1,
			wantNet:     ll.AccessNetBindTCP | ll.AccessNetConnectTCP,
			wantScoped:  ll.ScopeAbstractUnixSocket | ll.ScopeSignal,
			wantSkipped: []string{"/opt/missing"},
			grants: map[string]uint64{
				"/":             ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir,
				"/etc/hostname": ll.AccessFSExecute | ll.AccessFSReadFile,
				"/workspace":    1<<16 - 1,
				"/dev/null":     ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSTruncate | ll.AccessFSIoctlDev,
			},
		},
		{
			name: "abi4-no-ioctl-no-scope", abi: 4, r: full,
			wantFS:      1<<15 - 1,
			wantNet:     ll.AccessNetBindTCP | ll.AccessNetConnectTCP,
			wantSkipped: []string{"/opt/missing"},
			grants: map[string]uint64{
				"/workspace": 1<<15 - 1,
				"/dev/null":  ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSTruncate,
			},
		},
		{
			name: "abi3-allow-all-tcp", abi: 3,
			r:      Rules{ReadOnly: []string{"/"}, ReadWrite: []string{"/tmp"}, AllowAllTCP: true},
			wantFS: 1<<15 - 1,
		},
		{
			name: "abi9-resolve-unix-not-granted-in-readwrite", abi: 9,
			r:          Rules{ReadWrite: []string{"/tmp"}},
			wantFS:     1<<17 - 1,
			wantNet:    ll.AccessNetBindTCP | ll.AccessNetConnectTCP,
			wantScoped: ll.ScopeAbstractUnixSocket | ll.ScopeSignal,
			grants:     map[string]uint64{"/tmp": 1<<16 - 1},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := makePlan(tc.abi, tc.r, tree)
			if err != nil {
				t.Fatal(err)
			}
			if p.fs != tc.wantFS || p.net != tc.wantNet || p.scoped != tc.wantScoped {
				t.Errorf("handled fs=%#x net=%#x scoped=%#x, want %#x %#x %#x", p.fs, p.net, p.scoped, tc.wantFS, tc.wantNet, tc.wantScoped)
			}
			if !slices.Equal(p.status.Skipped, tc.wantSkipped) {
				t.Errorf("skipped %v, want %v", p.status.Skipped, tc.wantSkipped)
			}
			got := map[string]uint64{}
			for _, g := range p.grants {
				got[g.path] = g.access
				if g.access&^p.fs != 0 {
					t.Errorf("%s granted %#x beyond handled %#x (the kernel would refuse the rule)", g.path, g.access, p.fs)
				}
			}
			for path, want := range tc.grants {
				if got[path] != want {
					t.Errorf("grant %s = %#x, want %#x", path, got[path], want)
				}
			}
			if p.status.TCPRestricted != (tc.wantNet != 0) {
				t.Errorf("TCPRestricted = %v", p.status.TCPRestricted)
			}
			if p.status.ScopedSignals != (tc.wantScoped != 0) || p.status.DeviceIoctl != (tc.wantFS&ll.AccessFSIoctlDev != 0) {
				t.Errorf("status %+v", p.status)
			}
			if n := len(p.rules()); n != len(p.grants)+len(p.connect)+len(p.bind) {
				t.Errorf("rules() made %d rules", n)
			}
		})
	}
}
