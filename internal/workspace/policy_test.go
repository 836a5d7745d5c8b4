package workspace

import (
	"errors"
	"path"
	"strings"
	"syscall"
	"testing"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/fault"
)

func TestSensitive(t *testing.T) {
	p := DefaultPolicy()
	cases := []struct {
		path   string
		denied bool
	}{
		{"/workspace/.env", true},
		{"/workspace/app/.env", true},
		{"/workspace/.env.example", false}, // a different name
		{"/workspace/.ssh", true},
		{"/workspace/.ssh/config", true},
		{"/workspace/a/.ssh/known_hosts", true},
		{"/workspace/ssh/config", false},
		{"/workspace/id_rsa", true},
		{"/workspace/id_rsa.pub", true},
		{"/workspace/id_rsa.txt", false},
		{"/workspace/.config/gh", true},
		{"/workspace/.config/gh/hosts.yml", true},
		{"/workspace/.config/ghost", false},
		{"/workspace/gh/hosts.yml", false},
		{"/workspace/.aws/credentials", true},
		{"/workspace/.kube/config", true},
		{"/workspace/.bash_history", true},
		{"/tmp/.netrc", true},
		{"/etc/shadow", true},
		{"/etc/shadow-", false}, // not below /etc/shadow
		{"/etc/ssh/ssh_host_ed25519_key", true},
		{"/root", true},
		{"/rootfs", false},
		{"/proc/self/environ", true},
		{"/proc/1/mem", true},
		{"/proc/42/cmdline", true},
		{"/proc/thread-self/fd", true},
		{"/proc/cpuinfo", false},
		{"/proc/meminfo", false},
		{"/workspace/src/main.go", false},
		{"/usr/bin/ls", false},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			if got, _ := p.sensitive(c.path); got != c.denied {
				t.Fatalf("sensitive(%q) = %v, want %v", c.path, got, c.denied)
			}
			err := p.check("read", "/given", c.path)
			if (err != nil) != c.denied {
				t.Fatalf("check = %v", err)
			}
			if err != nil {
				fe := FileErrorOf("read", "/given", err)
				if fe.ErrorType != TypePermissionDenied || fe.Path != "/given" || strings.Contains(fe.Message, c.path) {
					t.Fatalf("refusal = %+v (must name the given path only)", fe)
				}
				if fault.KindOf(err) != fault.Forbidden {
					t.Fatalf("kind %s", fault.KindOf(err))
				}
			}
		})
	}
}

func TestCleanPath(t *testing.T) {
	cases := []struct {
		in, out string
		ok      bool
	}{
		{"/workspace/a", "/workspace/a", true},
		{"/workspace//a/", "/workspace/a", true},
		{"/", "/", true},
		{"/workspace/%2e%2e", "/workspace/%2e%2e", true},
		{"/workspace/..", "", false},
		{"/workspace/./a", "", false},
		{"/workspace/a/..", "", false},
		{"workspace/a", "", false},
		{"", "", false},
		{"/a\x00b", "", false},
		{"/" + strings.Repeat("a", 256), "", false},
		{"/" + strings.Repeat("a/", 2049), "", false},
		{"/workspace/...", "/workspace/...", true}, // a name, not a parent
	}
	for _, c := range cases {
		got, err := cleanPath("read", c.in)
		if (err == nil) != c.ok || got != c.out {
			t.Errorf("cleanPath(%q) = %q, %v; want %q ok=%v", c.in, got, err, c.out, c.ok)
		}
		if err != nil && FileErrorOf("read", c.in, err).ErrorType != TypeInvalidPath {
			t.Errorf("cleanPath(%q): error type %q", c.in, FileErrorOf("read", c.in, err).ErrorType)
		}
	}
}

// FuzzCleanPath: whatever cleanPath accepts is a path the init accepts
// (absolute, clean, no NUL, not too long) and holds no parent step; what
// it refuses is an invalid_path error, never a panic.
func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{"/workspace/a", "/../etc", "/a/./b", "//x//", "/a\x00", "%2e%2e", "/workspace/…/x", "/" + strings.Repeat("x/", 300)} {
		f.Add(s)
	}
	p := DefaultPolicy()
	f.Fuzz(func(t *testing.T, in string) {
		out, err := cleanPath("fuzz", in)
		if err != nil {
			if fe := FileErrorOf("fuzz", in, err); fe.ErrorType != TypeInvalidPath {
				t.Fatalf("refusal of %q has type %q", in, fe.ErrorType)
			}
			return
		}
		if cerr := agent.CheckPath(out); cerr != nil {
			t.Fatalf("cleanPath(%q) = %q, which the init refuses: %v", in, out, cerr)
		}
		for _, c := range strings.Split(out, "/") {
			if c == ".." || c == "." {
				t.Fatalf("cleanPath(%q) = %q holds a %q component", in, out, c)
			}
		}
		if path.Clean(out) != out {
			t.Fatalf("cleanPath(%q) = %q is not clean", in, out)
		}
		// The policy answers every accepted path without panicking, and
		// a path below a denied directory is denied.
		_, _ = p.sensitive(out)
		if bad, _ := p.sensitive(path.Join("/workspace/.ssh", out)); !bad {
			t.Fatalf("%q below .ssh not denied", out)
		}
	})
}

func TestFileErrMapping(t *testing.T) {
	cases := []struct {
		err  error
		typ  string
		kind fault.Kind
	}{
		{&agent.Error{Code: "ENOENT"}, TypeNotFound, fault.NotFound},
		{&agent.Error{Code: "EACCES"}, TypePermissionDenied, fault.Forbidden},
		{&agent.Error{Code: "EEXIST"}, TypeAlreadyExists, fault.Conflict},
		{&agent.Error{Code: "ELOOP"}, TypeInvalidPath, fault.Invalid},
		{&agent.Error{Code: "EISDIR"}, TypeInvalidTarget, fault.Invalid},
		{&agent.Error{Code: agent.CodeNotRegular}, TypeInvalidTarget, fault.Invalid},
		{&agent.Error{Code: "EROFS"}, TypeReadOnly, fault.Forbidden},
		{&agent.Error{Code: "ENOSPC"}, TypeNoSpace, fault.TooLarge},
		{&agent.Error{Code: "EDQUOT"}, TypeNoSpace, fault.TooLarge},
		{&agent.Error{Code: "EIO"}, TypeIO, fault.Internal},
		{&agent.Error{Code: "internal", Msg: "/var/lib/sandhold/x broke"}, TypeIO, fault.Internal},
		{syscall.ENOSPC, TypeNoSpace, fault.TooLarge},
		{agent.ErrGone, TypeIO, fault.Unavailable},
		{fault.New(fault.NotFound, "no such sandbox"), TypeNotFound, fault.NotFound},
		{errors.New("/var/lib/sandhold/secret path"), TypeIO, fault.Internal},
	}
	for _, c := range cases {
		err := fileErr("read", "/workspace/x", c.err)
		fe := FileErrorOf("read", "/workspace/x", err)
		if fe.ErrorType != c.typ || fault.KindOf(err) != c.kind {
			t.Errorf("%v → %s/%s, want %s/%s", c.err, fe.ErrorType, fault.KindOf(err), c.typ, c.kind)
		}
		if strings.Contains(fe.Message, "/var/lib") || strings.Contains(fault.Public(err), "/var/lib") {
			t.Errorf("%v: host path in the message %q", c.err, fe.Message)
		}
	}
}

func TestPySliceAndSize(t *testing.T) {
	ip := func(v int) *int { return &v }
	for _, c := range []struct {
		n          int
		start, end *int
		lo, hi     int
	}{
		{5, nil, nil, 0, 5}, {5, ip(1), ip(3), 1, 3}, {5, ip(-2), nil, 3, 5}, {5, ip(4), ip(2), 4, 4}, {5, ip(10), nil, 5, 5}, {0, ip(0), ip(1), 0, 0},
	} {
		if lo, hi := pySlice(c.n, c.start, c.end); lo != c.lo || hi != c.hi {
			t.Errorf("pySlice(%d) = %d,%d want %d,%d", c.n, lo, hi, c.lo, c.hi)
		}
	}
	for in, want := range map[string]int64{"1M": 1 << 20, "500K": 500 << 10, "2g": 2 << 30, "1024": 1024} {
		if got, ok := parseSize(in); !ok || got != want {
			t.Errorf("parseSize(%q) = %d %v", in, got, ok)
		}
	}
	for _, bad := range []string{"", "M", "-1K", "1T", "99999999999999G"} {
		if _, ok := parseSize(bad); ok {
			t.Errorf("parseSize(%q) accepted", bad)
		}
	}
}
