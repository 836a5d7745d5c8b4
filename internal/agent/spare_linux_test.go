package agent

import (
	"context"
	"os"
	"strings"
	"testing"
)

// TestCloneSpareRefusesASandbox: a spare is cloned with nothing of a
// sandbox; a spec that carries any (a workspace, a setup field, the host's
// network) is refused before anything is cloned.
func TestCloneSpareRefusesASandbox(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*LaunchSpec)
	}{
		{"workspace", func(s *LaunchSpec) { s.Workspace = os.Stdin }},
		{"awaited workspace", func(s *LaunchSpec) { s.AwaitWorkspace = func() (*os.File, error) { return nil, nil } }},
		{"cgroups", func(s *LaunchSpec) { s.Place = func(int) error { return nil } }},
		{"egress", func(s *LaunchSpec) { s.OnConn = func(*os.File) {} }},
		{"hostname", func(s *LaunchSpec) { s.Setup.Hostname = "sandbox" }},
		{"loopback ports", func(s *LaunchSpec) { s.Setup.LoopbackPorts = []uint16{3000} }},
		{"kernel limits", func(s *LaunchSpec) { s.Setup.Kernel.InotifyWatches = 1 }},
		{"host network", func(s *LaunchSpec) { s.Setup.HostNetwork = true }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := LaunchSpec{Exe: "/nonexistent", HostUID: 1 << 30, HostGID: 1 << 30}
			tc.mutate(&spec)
			sp, err := CloneSpare(context.Background(), spec)
			if err == nil {
				sp.Kill()
				t.Fatal("cloned a spare with something of a sandbox")
			}
			if !strings.Contains(err.Error(), "nothing of a sandbox") {
				t.Fatalf("err = %v, want the refusal", err)
			}
		})
	}
}
