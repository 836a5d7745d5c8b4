package main

import (
	"slices"
	"strings"
	"testing"
)

func TestSplitExecArgs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		flagSB string
		sb     string
		flags  []string
		argv   []string
	}{
		{"sb-dashdash", []string{"sb1", "--", "ls", "-la"}, "", "sb1", nil, []string{"ls", "-la"}},
		{"sb-no-dashdash", []string{"sb1", "ls", "-la"}, "", "sb1", nil, []string{"ls", "-la"}},
		{"sb-flags-dashdash", []string{"sb1", "--timeout", "90", "-i", "--", "sh", "-c", "x"}, "", "sb1", []string{"--timeout", "90", "-i"}, []string{"sh", "-c", "x"}},
		{"sb-cmd-with-dashdash-later", []string{"sb1", "grep", "--", "-x"}, "", "sb1", nil, []string{"grep", "--", "-x"}},
		{"default-sandbox", []string{"--", "ls"}, "", "", nil, []string{"ls"}},
		{"flag-sandbox", []string{"ls", "--", "x"}, "sb2", "sb2", nil, []string{"ls", "--", "x"}},
		{"flag-and-dashdash", []string{"--", "ls"}, "sb2", "sb2", nil, []string{"ls"}},
		{"dashdash-inside-command-kept", []string{"sb1", "--", "grep", "--", "-x"}, "", "sb1", nil, []string{"grep", "--", "-x"}},
		{"nothing", nil, "", "", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb, flags, argv := splitExecArgs(tc.args, tc.flagSB)
			if sb != tc.sb || !slices.Equal(flags, tc.flags) || !slices.Equal(argv, tc.argv) {
				t.Fatalf("got %q %q %q, want %q %q %q", sb, flags, argv, tc.sb, tc.flags, tc.argv)
			}
		})
	}
}

func TestParseExecFlags(t *testing.T) {
	f := execFlags{Cwd: "/a", Env: map[string]string{"A": "1"}}
	if err := parseExecFlags([]string{"--timeout", "90", "-e", "B=2", "-i", "--cwd", "/b"}, &f); err != nil {
		t.Fatal(err)
	}
	if f.Timeout != 90 || !f.Stdin || f.Cwd != "/b" || f.Env["A"] != "1" || f.Env["B"] != "2" {
		t.Fatalf("%+v", f)
	}
	if err := parseExecFlags([]string{"--bogus"}, &f); err == nil || !strings.Contains(err.Error(), "flags go before --") {
		t.Fatalf("unknown flag: %v", err)
	}
}

func TestSplitRemote(t *testing.T) {
	for _, tc := range []struct {
		in, sb, path string
		remote       bool
	}{
		{"sb1:/workspace/", "sb1", "/workspace/", true},
		{"sb1:rel/f", "sb1", "rel/f", true},
		{"sb1:", "sb1", "", true},
		{"./a:b", "", "", false},
		{"/abs/a:b", "", "", false},
		{"plain", "", "", false},
		{":/workspace/x", "", "/workspace/x", true},
	} {
		sb, p, ok := splitRemote(tc.in)
		if sb != tc.sb || p != tc.path || ok != tc.remote {
			t.Errorf("splitRemote(%q) = %q %q %v", tc.in, sb, p, ok)
		}
	}
}
