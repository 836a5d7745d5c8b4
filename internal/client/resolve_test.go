package client

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestResolveIn(t *testing.T) {
	sbs := []Sandbox{
		{ID: "sb1111aaaa00000000", Name: "demo"},
		{ID: "sb1111bbbb00000000", Name: "web"},
		{ID: "sb2222cccc00000000", Name: "sb2222cccc00000000"},
		{ID: "sb3333dddd00000000", Name: "twin"},
		{ID: "sb4444eeee00000000", Name: "twin"},
		{ID: "sb5555ffff00000000", Name: "sb1111"}, // a name that is another's id prefix
	}
	cases := []struct {
		name, ref, want, err string
	}{
		{"full-id", "sb1111bbbb00000000", "sb1111bbbb00000000", ""},
		{"name", "demo", "sb1111aaaa00000000", ""},
		{"unique-prefix", "sb1111a", "sb1111aaaa00000000", ""},
		{"prefix-without-sb", "2222", "sb2222cccc00000000", ""},
		{"name-beats-prefix", "sb1111", "sb5555ffff00000000", ""},
		{"ambiguous-name", "twin", "", "2 sandboxes are named twin (sb3333dddd00000000, sb4444eeee00000000)"},
		{"ambiguous-bare-prefix", "1111", "", "2 sandboxes have ids starting with 1111"},
		{"none", "nope", "", "not found"},
		{"escaped", "a\x1bb", "", `a\x1bb`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolveIn(sbs, tc.ref)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("resolve %q: %q, %v; want an error saying %q", tc.ref, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("resolve %q: %q, %v; want %q", tc.ref, got, err, tc.want)
			}
		})
	}
}

func TestDetachScanner(t *testing.T) {
	cases := []struct {
		name   string
		reads  []string
		sent   string
		detach bool
	}{
		{"plain", []string{"ls\r"}, "ls\r", false},
		{"keys", []string{"ab\x10\x11cd"}, "ab", true},
		{"keys-split", []string{"ab\x10", "\x11"}, "ab", true},
		{"ctrl-p-alone", []string{"a\x10b"}, "a\x10b", false},
		{"ctrl-p-twice", []string{"\x10\x10\x11"}, "\x10", true},
		{"ctrl-p-held-then-other", []string{"\x10", "x"}, "\x10x", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &detachScanner{keys: DefaultDetachKeys}
			var sent bytes.Buffer
			detach := false
			for _, r := range tc.reads {
				out, det := d.feed([]byte(r))
				sent.Write(out)
				if det {
					detach = true
					break
				}
			}
			if sent.String() != tc.sent || detach != tc.detach {
				t.Fatalf("sent %q detach %v; want %q %v", sent.String(), detach, tc.sent, tc.detach)
			}
		})
	}
}

func TestExplain(t *testing.T) {
	code := func(n int) *int { return &n }
	lim := &SandboxLimits{CPUTime: int64(30 * time.Second), MemoryBytes: 1 << 30}
	cases := []struct {
		name string
		r    ExecResult
		exit int
		want string
	}{
		{"ok", ExecResult{Status: "completed", ExitCode: code(0)}, 0, ""},
		{"own-failure", ExecResult{Status: "completed", ExitCode: code(3)}, 3, ""},
		{"timeout", ExecResult{Status: "timed_out", Reason: ReasonTimeout, Signal: 9}, 124, "timed out: the command ran past its wall limit of 1m0s"},
		{"cpu-by-cgroup", ExecResult{Status: "killed", Reason: ReasonCPU, Signal: 9}, 152, "killed: per-command CPU limit 30s (raise with `create --cpu-time`)"},
		{"cpu-by-rlimit", ExecResult{Status: "killed", Reason: ReasonCPU, Signal: 24}, 152, "killed: per-command CPU limit 30s"},
		{"memory", ExecResult{Status: "killed", Reason: ReasonMemory, Signal: 9}, 137, "killed: out of memory, the sandbox's memory limit of 1.0 GiB (raise with `create --memory`)"},
		{"sigkill", ExecResult{Status: "completed", Signal: 9}, 137, "killed by SIGKILL"},
		{"halt", ExecResult{Status: "killed", Reason: "halt: incident", Signal: 9}, 137, "killed: halt: incident"},
		{"client", ExecResult{Status: "killed", Reason: ReasonClient, Signal: 9}, 137, ""},
		{"sigterm", ExecResult{Status: "completed", Signal: 15}, 143, "killed by signal 15 (SIGTERM)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.r.ExitStatus(); got != tc.exit {
				t.Fatalf("exit status %d, want %d", got, tc.exit)
			}
			got := Explain(tc.r, DefaultTimeout, lim)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("Explain = %q, want %q", got, tc.want)
			}
		})
	}
}
