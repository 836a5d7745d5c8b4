package seccomp

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
)

var update = flag.Bool("update", false, "rewrite testdata/filter.golden from the current policy")

const goldenPath = "testdata/filter.golden"

// Raw seccomp return values (linux/seccomp.h).
const (
	retAllow      = 0x7fff0000
	retErrno      = 0x00050000
	retErrnoEPERM = retErrno | 1
	retENOSYS     = retErrno | errnoENOSYS
)

const (
	auditArchX86_64 = 0xc000003e
	auditArchI386   = 0x40000003
	x32SyscallBit   = 0x40000000
)

func requireAMD64(t *testing.T) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skipf("the policy is written for amd64, this is %s", runtime.GOARCH)
	}
}

func dump(prog []bpf.Instruction) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# sandhold seccomp filter, %d instructions. Regenerate: go test ./internal/isolate/seccomp -run Golden -update\n", len(prog))
	for i, ins := range prog {
		fmt.Fprintf(&b, "%4d: %v\n", i, ins)
	}
	return b.String()
}

// TestGolden pins the compiled program, so a change to the table shows up in
// review as a change of testdata/filter.golden.
func TestGolden(t *testing.T) {
	requireAMD64(t)
	prog, err := Assemble()
	if err != nil {
		t.Fatal(err)
	}
	got := dump(prog)
	if *update {
		if err := os.WriteFile(goldenPath, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("compiled filter differs from %s; if the policy change is intended, rerun with -update and review the diff", filepath.Base(goldenPath))
	}
}

// seccompData lays out struct seccomp_data so that x/net/bpf's VM, which
// loads 32-bit words big-endian, reads the same numbers the kernel's
// native-endian (little-endian) loads would: every word is stored
// big-endian at the offset the filter loads it from.
func seccompData(archID uint32, nr uint32, args ...uint64) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[0:], nr)
	binary.BigEndian.PutUint32(b[4:], archID)
	for i, a := range args {
		off := 16 + 8*i
		binary.BigEndian.PutUint32(b[off:], uint32(a))       //nolint:gosec // G115: low half (little-endian host), truncation intended
		binary.BigEndian.PutUint32(b[off+4:], uint32(a>>32)) // high half
	}
	return b
}

func evaluate(t *testing.T, vm *bpf.VM, archID, nr uint32, args ...uint64) uint32 {
	t.Helper()
	out, err := vm.Run(seccompData(archID, nr, args...))
	if err != nil {
		t.Fatal(err)
	}
	return uint32(out) //nolint:gosec // G115: a seccomp return value, 32 bits by definition
}

func newVM(t *testing.T) *bpf.VM {
	t.Helper()
	prog, err := Assemble()
	if err != nil {
		t.Fatal(err)
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	return vm
}

func nr(t *testing.T, name string) uint32 {
	t.Helper()
	n, ok := arch.X86_64.SyscallNames[name]
	if !ok {
		t.Fatalf("no x86-64 syscall %q", name)
	}
	return uint32(n) //nolint:gosec // G115: an x86-64 syscall number (< 1024)
}

func retName(r uint32) string {
	switch r {
	case retAllow:
		return "allow"
	case retErrnoEPERM:
		return "EPERM"
	case retENOSYS:
		return "ENOSYS"
	}
	return fmt.Sprintf("%#x", r)
}

// TestDecisions runs the compiled program in a BPF interpreter over
// hand-made seccomp_data, including the cases a table cannot show: other
// architectures, x32, smuggled high bits, flag combinations.
func TestDecisions(t *testing.T) {
	requireAMD64(t)
	vm := newVM(t)
	const (
		cloneVM, cloneFS, cloneFiles, cloneSighand, cloneThread   = 0x100, 0x200, 0x400, 0x800, 0x10000
		cloneVfork, clonePidfd, sigchld                           = 0x4000, 0x1000, 17
		goThreadFlags                                             = cloneVM | cloneFS | cloneFiles | cloneSighand | cloneThread | 0x80000 | 0x40000
		sockStream, sockDgram, sockRaw, sockSeqpacket, sockPacket = 1, 2, 3, 5, 10
		sockNonblock, sockCloexec                                 = 0x800, 0x80000
		afPacket, afVsock, afALG                                  = 17, 40, 38
	)
	cases := []struct {
		name string
		arch uint32
		call string
		nr   uint32 // used when call is empty
		args []uint64
		want uint32
	}{
		{name: "read", call: "read", want: retAllow},
		{name: "futex", call: "futex", want: retAllow},
		{name: "exit_group", call: "exit_group", want: retAllow},
		{name: "mount", call: "mount", want: retErrnoEPERM},
		{name: "ptrace", call: "ptrace", want: retErrnoEPERM},
		{name: "unknown-syscall-number", nr: 1000, want: retErrnoEPERM},
		{name: "highest-number", nr: 0x3fffffff, want: retErrnoEPERM},

		{name: "arch-i386-getpid", arch: auditArchI386, nr: 20, want: retErrnoEPERM},
		{name: "arch-i386-read-number-3", arch: auditArchI386, nr: 3, want: retErrnoEPERM},
		{name: "arch-aarch64-read", arch: 0xc00000b7, nr: 63, want: retErrnoEPERM},
		{name: "x32-read", nr: x32SyscallBit /* | 0, read */, want: retENOSYS},
		{name: "x32-mount", nr: x32SyscallBit | 165, want: retENOSYS},
		{name: "nr-minus-one", nr: 0xffffffff, want: retENOSYS},

		{name: "clone-fork", call: "clone", args: []uint64{sigchld}, want: retAllow},
		{name: "clone-go-thread", call: "clone", args: []uint64{goThreadFlags}, want: retAllow},
		{name: "clone-go-forkexec", call: "clone", args: []uint64{cloneVfork | cloneVM | clonePidfd}, want: retAllow},
		{name: "clone-newns", call: "clone", args: []uint64{cloneNewNS | sigchld}, want: retErrnoEPERM},
		{name: "clone-newuser", call: "clone", args: []uint64{cloneNewUser | sigchld}, want: retErrnoEPERM},
		{name: "clone-newnet-with-thread-flags", call: "clone", args: []uint64{goThreadFlags | cloneNewNet}, want: retErrnoEPERM},
		{name: "clone-newcgroup", call: "clone", args: []uint64{cloneNewCgroup}, want: retErrnoEPERM},
		{name: "clone-newpid-newipc-newuts", call: "clone", args: []uint64{cloneNewPID | cloneNewIPC | cloneNewUTS}, want: retErrnoEPERM},
		{name: "clone-high-bits-only", call: "clone", args: []uint64{1 << 40}, want: retAllow},
		{name: "clone-high-bits-and-newns", call: "clone", args: []uint64{1<<40 | cloneNewNS}, want: retErrnoEPERM},
		{name: "clone3", call: "clone3", want: retENOSYS},
		{name: "unshare", call: "unshare", args: []uint64{cloneNewUser}, want: retErrnoEPERM},
		{name: "unshare-zero", call: "unshare", args: []uint64{0}, want: retErrnoEPERM},

		{name: "personality-linux", call: "personality", args: []uint64{0}, want: retAllow},
		{name: "personality-query", call: "personality", args: []uint64{0xffffffff}, want: retAllow},
		{name: "personality-0x8", call: "personality", args: []uint64{8}, want: retAllow},
		{name: "personality-uname26", call: "personality", args: []uint64{0x20000}, want: retAllow},
		{name: "personality-uname26-linux32", call: "personality", args: []uint64{0x20008}, want: retAllow},
		{name: "personality-addr-no-randomize", call: "personality", args: []uint64{0x0040000}, want: retErrnoEPERM},
		{name: "personality-read-implies-exec", call: "personality", args: []uint64{0x0400000}, want: retErrnoEPERM},
		{name: "personality-zero-with-high-bits", call: "personality", args: []uint64{1 << 32}, want: retErrnoEPERM},

		{name: "socket-unix-stream", call: "socket", args: []uint64{afUNIX, sockStream | sockCloexec}, want: retAllow},
		{name: "socket-inet-stream", call: "socket", args: []uint64{afINET, sockStream}, want: retAllow},
		{name: "socket-inet-dgram-nonblock-cloexec", call: "socket", args: []uint64{afINET, sockDgram | sockNonblock | sockCloexec}, want: retAllow},
		{name: "socket-inet6-stream", call: "socket", args: []uint64{afINET6, sockStream | sockCloexec}, want: retAllow},
		{name: "socket-inet-seqpacket", call: "socket", args: []uint64{afINET, sockSeqpacket}, want: retAllow},
		{name: "socket-netlink-raw", call: "socket", args: []uint64{afNETLINK, sockRaw | sockCloexec}, want: retAllow},
		{name: "socket-inet-raw", call: "socket", args: []uint64{afINET, sockRaw}, want: retErrnoEPERM},
		{name: "socket-inet-raw-cloexec", call: "socket", args: []uint64{afINET, sockRaw | sockCloexec}, want: retErrnoEPERM},
		{name: "socket-inet6-raw-nonblock", call: "socket", args: []uint64{afINET6, sockRaw | sockNonblock}, want: retErrnoEPERM},
		// The type's low nibble must be exactly 1, 2 or 5: SOCK_PACKET (10)
		// and the other odd types have one of the two low bits clear, which
		// the old bit test took for STREAM or DGRAM.
		{name: "socket-inet-sock-packet", call: "socket", args: []uint64{afINET, sockPacket}, want: retErrnoEPERM},
		{name: "socket-inet-sock-packet-cloexec", call: "socket", args: []uint64{afINET, sockPacket | sockCloexec}, want: retErrnoEPERM},
		{name: "socket-inet6-sock-packet-nonblock", call: "socket", args: []uint64{afINET6, sockPacket | sockNonblock}, want: retErrnoEPERM},
		{name: "socket-inet-rdm", call: "socket", args: []uint64{afINET, 4}, want: retErrnoEPERM},
		{name: "socket-inet-dccp", call: "socket", args: []uint64{afINET, 6, 33}, want: retErrnoEPERM},
		{name: "socket-inet-type-0", call: "socket", args: []uint64{afINET, 0}, want: retErrnoEPERM},
		{name: "socket-inet-type-9", call: "socket", args: []uint64{afINET, 9}, want: retErrnoEPERM},
		{name: "socket-inet6-type-13", call: "socket", args: []uint64{afINET6, 13}, want: retErrnoEPERM},
		{name: "socket-inet-type-15", call: "socket", args: []uint64{afINET, 15 | sockCloexec}, want: retErrnoEPERM},
		{name: "socket-inet-stream-in-high-half", call: "socket", args: []uint64{afINET, 1<<32 | sockPacket}, want: retErrnoEPERM},
		{name: "socket-inet-stream-high-half-ignored", call: "socket", args: []uint64{afINET, 1<<32 | sockStream}, want: retAllow},
		{name: "socket-inet6-seqpacket-cloexec-nonblock", call: "socket", args: []uint64{afINET6, sockSeqpacket | sockCloexec | sockNonblock}, want: retAllow},
		{name: "socket-packet", call: "socket", args: []uint64{afPacket, sockRaw}, want: retErrnoEPERM},
		{name: "socket-packet-dgram", call: "socket", args: []uint64{afPacket, sockDgram}, want: retErrnoEPERM},
		{name: "socket-vsock", call: "socket", args: []uint64{afVsock, sockStream}, want: retErrnoEPERM},
		{name: "socket-alg", call: "socket", args: []uint64{afALG, 5}, want: retErrnoEPERM},
		// The kernel truncates the int family to 32 bits: AF_INET with a
		// high bit must not pass as "some other family" nor as AF_INET.
		{name: "socket-family-high-bits", call: "socket", args: []uint64{1<<32 | afPacket, sockRaw}, want: retErrnoEPERM},
		{name: "socket-unix-high-bits", call: "socket", args: []uint64{1<<32 | afUNIX, sockStream}, want: retErrnoEPERM},
		{name: "socket-inet-tcp", call: "socket", args: []uint64{afINET, sockStream, 6}, want: retAllow},
		{name: "socket-inet6-udp", call: "socket", args: []uint64{afINET6, sockDgram, 17}, want: retAllow},
		{name: "socket-inet-icmp-dgram", call: "socket", args: []uint64{afINET, sockDgram, 1}, want: retAllow},
		{name: "socket-inet-mptcp", call: "socket", args: []uint64{afINET, sockStream, 262}, want: retErrnoEPERM},
		{name: "socket-inet6-mptcp-cloexec", call: "socket", args: []uint64{afINET6, sockStream | sockCloexec, 262}, want: retErrnoEPERM},
		{name: "socket-inet-mptcp-high-bits", call: "socket", args: []uint64{afINET, sockStream, 1<<32 | 262}, want: retErrnoEPERM},
		{name: "socket-inet-tcp-high-bits-in-protocol", call: "socket", args: []uint64{afINET, sockStream, 1<<32 | 6}, want: retAllow},
		{name: "ioctl-tcgets", call: "ioctl", args: []uint64{0, 0x5401}, want: retAllow},
		{name: "ioctl-tiocswinsz", call: "ioctl", args: []uint64{0, 0x5414}, want: retAllow},
		{name: "ioctl-tiocgwinsz-one-bit-more-than-tiocsti", call: "ioctl", args: []uint64{0, 0x5413}, want: retAllow},
		{name: "ioctl-tiocsctty", call: "ioctl", args: []uint64{0, 0x540e}, want: retAllow},
		{name: "ioctl-fionread", call: "ioctl", args: []uint64{3, 0x541b}, want: retAllow},
		{name: "ioctl-tiocsti", call: "ioctl", args: []uint64{0, tiocsti}, want: retErrnoEPERM},
		{name: "ioctl-tiocsti-high-bits", call: "ioctl", args: []uint64{0, 0xdead0000_00000000 | tiocsti}, want: retErrnoEPERM},
		{name: "ioctl-tiocsti-sign-extended", call: "ioctl", args: []uint64{0, 0xffffffff_00000000 | tiocsti}, want: retErrnoEPERM},
		{name: "ioctl-tioclinux", call: "ioctl", args: []uint64{0, tioclinux}, want: retErrnoEPERM},
		{name: "ioctl-tiocsti-plus-high-low-bit", call: "ioctl", args: []uint64{0, 0x80000000 | tiocsti}, want: retAllow},
		{name: "ioctl-zero", call: "ioctl", args: []uint64{0, 0}, want: retAllow},
		{name: "socketpair", call: "socketpair", args: []uint64{afUNIX, sockStream}, want: retAllow},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.arch
			if a == 0 {
				a = auditArchX86_64
			}
			n := tc.nr
			if tc.call != "" {
				n = nr(t, tc.call)
			}
			if got := evaluate(t, vm, a, n, tc.args...); got != tc.want {
				t.Errorf("%s(%#x) = %s, want %s", tc.name, tc.args, retName(got), retName(tc.want))
			}
		})
	}
}

// TestTableRowsHold checks every row of the table against the compiled
// program: unconditioned allow rows allow, deny rows return their errno. So
// a documentation row can never silently disagree with the filter.
func TestTableRowsHold(t *testing.T) {
	requireAMD64(t)
	vm := newVM(t)
	seen := map[string]Action{}
	conditionedDeny := map[string]bool{}
	for _, r := range Policy().Rules {
		for _, name := range r.Names {
			if len(r.When) > 0 && r.Action != Allow {
				// A conditioned deny row carves out of a later allow
				// row; after it, it would be dead code.
				if _, after := seen[name]; after {
					t.Errorf("conditioned %v row for %s comes after the row that decides it", r.Action, name)
				}
				conditionedDeny[name] = true
				continue
			}
			if prev, dup := seen[name]; dup {
				t.Errorf("%s appears twice (%v and %v)", name, prev, r.Action)
			}
			seen[name] = r.Action
			if len(r.When) > 0 {
				continue // covered case by case in TestDecisions
			}
			if conditionedDeny[name] {
				continue // the conditioned row decides some calls; see TestDecisions
			}
			want := map[Action]uint32{Allow: retAllow, DenyEPERM: retErrnoEPERM, DenyENOSYS: retENOSYS}[r.Action]
			if got := evaluate(t, vm, auditArchX86_64, nr(t, name)); got != want {
				t.Errorf("%s: filter says %s, table says %v", name, retName(got), r.Action)
			}
		}
		if r.Why == "" {
			t.Errorf("row %v has no reason", r.Names)
		}
	}
}

// TestMustDeny is the list, kept separately from the table so that
// deleting a deny row (or moving the syscall to an allow row) fails here.
func TestMustDeny(t *testing.T) {
	requireAMD64(t)
	vm := newVM(t)
	mustDeny := []string{
		"mount", "umount2", "pivot_root", "chroot", "ptrace", "process_vm_readv",
		"process_vm_writev", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup",
		"io_uring_enter", "io_uring_register", "keyctl", "add_key", "request_key",
		"open_by_handle_at", "name_to_handle_at", "kexec_load", "kexec_file_load",
		"init_module", "finit_module", "delete_module", "unshare", "setns", "reboot",
		"swapon", "swapoff", "acct", "settimeofday", "clock_settime", "adjtimex",
		"quotactl", "lookup_dcookie", "nfsservctl", "syslog", "vhangup", "fanotify_init",
		"iopl", "ioperm", "mbind", "migrate_pages", "move_pages", "set_mempolicy",
		"fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
	}
	for _, name := range mustDeny {
		if got := evaluate(t, vm, auditArchX86_64, nr(t, name)); got != retErrnoEPERM {
			t.Errorf("%s: %s, want EPERM", name, retName(got))
		}
	}
}

func TestAssembleRejectsBadRows(t *testing.T) {
	requireAMD64(t)
	cases := []struct {
		name string
		rule Rule
	}{
		{name: "unknown-syscall", rule: Rule{Action: Allow, Names: []string{"no_such_syscall"}}},
		{name: "arg-out-of-range", rule: Rule{Action: Allow, Names: []string{"socket"}, When: [][]Cond{{{Arg: 6, Op: Equal}}}}},
		{name: "unknown-op", rule: Rule{Action: Allow, Names: []string{"socket"}, When: [][]Cond{{{Arg: 0, Op: 99}}}}},
		{name: "too-many-conditions", rule: Rule{Action: Allow, Names: []string{"ioctl"}, When: [][]Cond{slices.Repeat([]Cond{{Arg: 1, Op: BitsAny, Value: 1}}, maxConds+1)}}},
		{name: "equal-low32-wide-value", rule: Rule{Action: DenyEPERM, Names: []string{"ioctl"}, When: [][]Cond{{{Arg: 1, Op: EqualLow32, Value: 1 << 32}}}}},
		{name: "vacuous-bits-clear", rule: Rule{Action: Allow, Names: []string{"clone"}, When: [][]Cond{{{Arg: 0, Op: BitsClear}}}}},
		{name: "empty-bits-any", rule: Rule{Action: Allow, Names: []string{"clone"}, When: [][]Cond{{{Arg: 0, Op: BitsAny}}}}},
		{name: "no-names", rule: Rule{Action: Allow}},
		{name: "empty-alternative", rule: Rule{Action: Allow, Names: []string{"socket"}, When: [][]Cond{{}}}},
		{name: "unknown-action", rule: Rule{Action: 42, Names: []string{"read"}}},
		{name: "duplicate-in-row", rule: Rule{Action: Allow, Names: []string{"read", "read"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tbl := Table{Default: DenyEPERM, Rules: []Rule{tc.rule}}
			if _, err := assemble(tbl); err == nil {
				t.Fatal("assembled a broken table")
			}
		})
	}
}

func TestPolicyIsACopy(t *testing.T) {
	p := Policy()
	p.Rules[0].Names[0] = "mount"
	if Policy().Rules[0].Names[0] == "mount" {
		t.Fatal("Policy() shares its table with callers")
	}
}

// referenceVerdict evaluates the table directly, the way its comments read:
// the first compiled row that names the syscall and whose conditions hold
// decides; otherwise the default.
func referenceVerdict(t Table, nr uint32, args [6]uint64) Action {
	for _, r := range t.Rules {
		if r.Action == t.Default && len(r.When) == 0 {
			continue
		}
		named := false
		for _, name := range r.Names {
			if n, ok := arch.X86_64.SyscallNames[name]; ok && uint32(n) == nr { //nolint:gosec // G115: an x86-64 syscall number (< 1024)
				named = true
			}
		}
		if !named {
			continue
		}
		if len(r.When) == 0 {
			return r.Action
		}
		for _, alt := range r.When {
			holds := true
			for _, c := range alt {
				a := args[c.Arg]
				switch c.Op {
				case Equal:
					holds = holds && a == c.Value
				case BitsClear:
					holds = holds && a&c.Value == 0
				case BitsAny:
					holds = holds && a&c.Value != 0
				case EqualLow32:
					holds = holds && uint32(a) == uint32(c.Value) && c.Value>>32 == 0 //nolint:gosec // G115: comparing low halves is the rule
				case MaskedEqualLow32:
					holds = holds && uint32(a)&c.Mask == uint32(c.Value) && c.Value>>32 == 0 //nolint:gosec // G115: comparing low halves is the rule
				}
			}
			if holds {
				return r.Action
			}
		}
	}
	return t.Default
}

// TestCompiledMatchesTable compares the BPF program with referenceVerdict
// over every syscall number and argument vectors built to trip an
// assembler: words equal to other syscall numbers (a stale accumulator
// compared as a syscall number), the ioctl requests, flag words, high
// halves set, and pseudo-random values.
func TestCompiledMatchesTable(t *testing.T) {
	requireAMD64(t)
	vm := newVM(t)
	tbl := Policy()
	want := map[Action]uint32{Allow: retAllow, DenyEPERM: retErrnoEPERM, DenyENOSYS: retENOSYS}

	words := []uint64{0, 1, 2, 3, 8, 10, 16, 17, 41, 56, 135, 262, 435, 0x80000, tiocsti, tioclinux, 0x5413,
		cloneNewNS, cloneNewUser | 0x11, 0x20000, 0x20008, 0x0400000, 0xffffffff, 1 << 32, 1<<32 | tiocsti,
		0xffffffff_00000000 | 41, ^uint64(0)}
	for _, r := range tbl.Rules { // every syscall number the table names, as an argument word
		for _, name := range r.Names {
			if n, ok := arch.X86_64.SyscallNames[name]; ok {
				words = append(words, uint64(n), uint64(n)<<32) //nolint:gosec // G115: an x86-64 syscall number (>= 0)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2)) //nolint:gosec // G404: fixed seed on purpose, the same vectors every run
	var vectors [][6]uint64
	for _, w := range words {
		for arg := range 3 {
			var v [6]uint64
			v[arg] = w
			vectors = append(vectors, v)
		}
	}
	for range 40 {
		var v [6]uint64
		for i := range v {
			v[i] = words[rng.IntN(len(words))]
		}
		vectors = append(vectors, v)
	}
	// Arguments only matter for syscalls in conditioned rows (and for the
	// row after a failed one, which is what the full set probes); every
	// other number gets a sample of the vectors.
	conditionedNr := map[uint32]bool{}
	for _, r := range tbl.Rules {
		for _, name := range r.Names {
			if n, ok := arch.X86_64.SyscallNames[name]; ok && len(r.When) > 0 {
				conditionedNr[uint32(n)] = true //nolint:gosec // G115: an x86-64 syscall number (< 1024)
			}
		}
	}
	sample := vectors[:0:0]
	for i := 0; i < len(vectors); i += 97 {
		sample = append(sample, vectors[i])
	}
	mismatches := 0
	for nr := uint32(0); nr < 470; nr++ {
		vs := sample
		if conditionedNr[nr] {
			vs = vectors
		}
		for _, v := range vs {
			got := evaluate(t, vm, auditArchX86_64, nr, v[:]...)
			exp := want[referenceVerdict(tbl, nr, v)]
			if got != exp {
				mismatches++
				if mismatches <= 10 {
					t.Errorf("nr %d args %#x: program says %s, table says %s", nr, v, retName(got), retName(exp))
				}
			}
		}
	}
	if mismatches > 10 {
		t.Errorf("... %d mismatches in all", mismatches)
	}
}

// FuzzCompiledMatchesTable extends TestCompiledMatchesTable to arbitrary
// syscall numbers and argument words.
func FuzzCompiledMatchesTable(f *testing.F) {
	if runtime.GOARCH != "amd64" {
		f.Skip("amd64 only")
	}
	f.Add(uint32(16), uint64(0), uint64(tiocsti), uint64(0))
	f.Add(uint32(41), uint64(afINET), uint64(3), uint64(0))
	f.Add(uint32(56), uint64(cloneNewNS), uint64(0), uint64(0))
	f.Add(uint32(135), uint64(435), uint64(0), uint64(0))
	prog, err := Assemble()
	if err != nil {
		f.Fatal(err)
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		f.Fatal(err)
	}
	tbl := Policy()
	want := map[Action]uint32{Allow: retAllow, DenyEPERM: retErrnoEPERM, DenyENOSYS: retENOSYS}
	f.Fuzz(func(t *testing.T, nr uint32, a0, a1, a2 uint64) {
		args := [6]uint64{a0, a1, a2}
		exp := want[referenceVerdict(tbl, nr, args)]
		if nr >= x32SyscallBit {
			exp = retENOSYS
		}
		if got := evaluate(t, vm, auditArchX86_64, nr, args[:]...); got != exp {
			t.Errorf("nr %d args %#x: program says %s, table says %s", nr, args, retName(got), retName(exp))
		}
	})
}

// BenchmarkAssemble measures building the program, which every new sandbox
// init pays once before Install.
func BenchmarkAssemble(b *testing.B) {
	if runtime.GOARCH != "amd64" {
		b.Skip("amd64 only")
	}
	for b.Loop() {
		if _, err := Assemble(); err != nil {
			b.Fatal(err)
		}
	}
}
