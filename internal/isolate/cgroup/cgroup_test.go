package cgroup

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateName(t *testing.T) {
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"plain", "sbx-1a2b", true},
		{"uuid", "0f8e5c2a-4b1d-4e7a-9c3f-2d6b8a1e0c55", true},
		{"underscore", "exec_7", true},
		{"max length", strings.Repeat("a", maxNameLen), true},
		{"empty", "", false},
		{"too long", strings.Repeat("a", maxNameLen+1), false},
		{"dot", ".", false},
		{"dotdot", "..", false},
		{"slash", "a/b", false},
		{"parent escape", "../x", false},
		{"v2 leaf name", ".procs", false},
		{"control file lookalike", "memory.max", false},
		{"v1 tasks file", "tasks", false},
		{"v1 release agent", "release_agent", false},
		{"newline", "a\nb", false},
		{"nul", "a\x00b", false},
		{"space", "a b", false},
		{"unicode lookalike", "sbx\u2215x", false},
		{"tricky: dots inside", "a..b", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateName(tt.in)
			if (err == nil) != tt.ok {
				t.Fatalf("ValidateName(%q) = %v, want ok=%v", tt.in, err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidName) {
				t.Fatalf("error %v does not wrap ErrInvalidName", err)
			}
		})
	}
}

func TestValidateBase(t *testing.T) {
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"one level", "sandhold", true},
		{"two levels", "sandhold/sandboxes", true},
		{"empty", "", false},
		{"absolute", "/sandhold", false},
		{"trailing slash", "sandhold/", false},
		{"double slash", "a//b", false},
		{"parent", "sandhold/../x", false},
		{"too deep", "a/b/c/d/e", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := validateBase(tt.in); (err == nil) != tt.ok {
				t.Fatalf("validateBase(%q) = %v, want ok=%v", tt.in, err, tt.ok)
			}
		})
	}
}

func TestLimitsValidate(t *testing.T) {
	tests := []struct {
		name string
		l    Limits
		ok   bool
	}{
		{"zero is unlimited", Limits{}, true},
		{"typical", Limits{MemoryBytes: 1 << 30, Pids: 50, CPUMilli: 1000}, true},
		{"smallest cpu", Limits{CPUMilli: minCPUMilli}, true},
		{"smallest memory", Limits{MemoryBytes: minMemoryBytes}, true},
		{"negative memory", Limits{MemoryBytes: -1}, false},
		{"memory below minimum", Limits{MemoryBytes: 4096}, false},
		{"negative pids", Limits{Pids: -5}, false},
		{"negative cpu", Limits{CPUMilli: -1}, false},
		{"cpu below kernel minimum quota", Limits{CPUMilli: minCPUMilli - 1}, false},
		{"cpu overflow bait", Limits{CPUMilli: 1 << 62}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.l.Validate(); (err == nil) != tt.ok {
				t.Fatalf("Validate(%+v) = %v, want ok=%v", tt.l, err, tt.ok)
			}
		})
	}
}

func FuzzValidateName(f *testing.F) {
	for _, s := range []string{"sbx", "..", "a/b", ".procs", "tasks", strings.Repeat("z", 70)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if ValidateName(s) != nil {
			return
		}
		// Whatever passes must be a single, harmless path component.
		if s == "" || s == "." || s == ".." || strings.ContainsAny(s, "/.\x00\n") || len(s) > maxNameLen {
			t.Fatalf("accepted %q", s)
		}
	})
}
