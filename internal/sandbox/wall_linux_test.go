package sandbox

import (
	"testing"
	"time"
)

// TestDetachedCommandsInATTLSandboxHaveNoWallLimit: a background command
// that names no timeout runs without a wall timer where the sandbox's TTL
// deletes the sandbox (and it); everywhere else the default applies, and
// a timeout given is kept.
func TestDetachedCommandsInATTLSandboxHaveNoWallLimit(t *testing.T) {
	m := newManager(t, testConfig(t), nil)
	ttl := create(t, m, Spec{TTL: time.Hour})
	plain := create(t, m, Spec{})
	cases := []struct {
		name string
		s    *Sandbox
		req  ExecRequest
		want time.Duration
	}{
		{"background-ttl", ttl, ExecRequest{Command: "true", Background: true}, 0},
		{"background-ttl-timeout-given", ttl, ExecRequest{Command: "true", Background: true, Timeout: 90 * time.Second}, 90 * time.Second},
		{"foreground-ttl", ttl, ExecRequest{Command: "true"}, DefaultTimeout},
		{"background-no-ttl", plain, ExecRequest{Command: "true", Background: true}, DefaultTimeout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.req
			if _, _, err := tc.s.execs.Check(&r); err != nil {
				t.Fatal(err)
			}
			if r.Timeout != tc.want {
				t.Fatalf("wall limit %v, want %v", r.Timeout, tc.want)
			}
		})
	}
	// And it runs: a background command without a wall timer ends as it
	// would (here on its own).
	e, err := ttl.Exec(t.Context(), ExecRequest{Command: "exit 3", Background: true})
	if err != nil {
		t.Fatal(err)
	}
	<-e.Done()
	if r := e.Result(); r.Status != StatusCompleted || r.ExitCode == nil || *r.ExitCode != 3 {
		t.Fatalf("result %+v", r)
	}
}
