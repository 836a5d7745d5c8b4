package main

import (
	"slices"
	"testing"
)

func TestSplitExecArgs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		flagSB string
		sb     string
		argv   []string
	}{
		{"sb-dashdash", []string{"sb1", "--", "ls", "-la"}, "", "sb1", []string{"ls", "-la"}},
		{"sb-no-dashdash", []string{"sb1", "ls", "-la"}, "", "sb1", []string{"ls", "-la"}},
		{"default-sandbox", []string{"--", "ls"}, "", "", []string{"ls"}},
		{"flag-sandbox", []string{"ls", "--", "x"}, "sb2", "sb2", []string{"ls", "--", "x"}},
		{"flag-and-dashdash", []string{"--", "ls"}, "sb2", "sb2", []string{"ls"}},
		{"dashdash-inside-command-kept", []string{"sb1", "--", "grep", "--", "-x"}, "", "sb1", []string{"grep", "--", "-x"}},
		{"nothing", nil, "", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb, argv := splitExecArgs(tc.args, tc.flagSB)
			if sb != tc.sb || !slices.Equal(argv, tc.argv) {
				t.Fatalf("got %q %q, want %q %q", sb, argv, tc.sb, tc.argv)
			}
		})
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
		{":nosb", "", "", false},
	} {
		sb, p, ok := splitRemote(tc.in)
		if sb != tc.sb || p != tc.path || ok != tc.remote {
			t.Errorf("splitRemote(%q) = %q %q %v", tc.in, sb, p, ok)
		}
	}
}
