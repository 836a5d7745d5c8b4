package sandbox

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/fault"
)

// TestLabelsEnvAndTTL: a spec's labels are kept and listed, its
// environment reaches every command (a command's own env wins), the
// privileged variables stay admin-only as for an execution, and SetTTL
// moves the end a listing shows.
func TestLabelsEnvAndTTL(t *testing.T) {
	m := newManager(t, testConfig(t), nil)
	s := create(t, m, Spec{Labels: map[string]string{"team": "a"}, Env: map[string]string{"FROM_SPEC": "spec", "BOTH": "spec"}, TTL: time.Hour})
	if got := s.Info().Labels["team"]; got != "a" {
		t.Fatalf("labels: %v", s.Info().Labels)
	}
	r := run(t, s, ExecRequest{Command: "echo $FROM_SPEC-$BOTH", Env: map[string]string{"BOTH": "call"}})
	if r.Stdout != "spec-call\n" {
		t.Fatalf("env: %q", r.Stdout)
	}
	in := s.Info()
	if in.Expires == nil || !in.Expires.Equal(in.Created.Add(time.Hour)) {
		t.Fatalf("expires %v, created %v", in.Expires, in.Created)
	}
	in, err := m.SetTTL(context.Background(), owner, s.ID(), 2*time.Hour)
	if err != nil || !in.Expires.Equal(in.Created.Add(2*time.Hour)) {
		t.Fatalf("SetTTL: %v %v", in.Expires, err)
	}
	if _, err := m.SetTTL(context.Background(), Caller{KeyID: "key-b"}, s.ID(), time.Hour); !fault.Is(err, fault.NotFound) {
		t.Fatalf("another key's SetTTL: %v", err)
	}
	for _, tc := range []struct {
		name string
		spec Spec
		want string
	}{
		{"LD_PRELOAD for an agent", Spec{Env: map[string]string{"LD_PRELOAD": "/x.so"}}, "admin keys"},
		{"a bad variable name", Spec{Env: map[string]string{"A-B": "1"}}, "not valid"},
		{"an empty label key", Spec{Labels: map[string]string{"": "v"}}, "label keys"},
		{"a long label value", Spec{Labels: map[string]string{"k": strings.Repeat("v", 1024+1)}}, "label keys"}, // values up to 1024 bytes,
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.Create(context.Background(), owner, tc.spec)
			if !fault.Is(err, fault.Invalid) || !strings.Contains(fault.Public(err), tc.want) {
				t.Fatalf("create: %v (want invalid, %q)", err, tc.want)
			}
		})
	}
}

// TestTTLEndHibernates: on_expire hibernate keeps the sandbox at the end
// of its TTL — hibernated, its files kept — and leaves it so on later
// rounds; without it (or when a sandbox cannot
// hibernate) the end deletes, as before.
func TestTTLEndHibernates(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, withSnapshots(t, testConfig(t)), nil)
	hib := create(t, m, Spec{TTL: time.Hour, OnExpire: ExpireHibernate, Limits: Limits{DiskBytes: 64 << 20}})
	sh(t, hib, "echo kept > f")
	del := create(t, m, Spec{TTL: time.Hour, Limits: Limits{DiskBytes: 64 << 20}})
	later := time.Now().Add(2 * time.Hour)
	m.expire(later)
	if st := hib.State(); st != Hibernated {
		t.Fatalf("on_expire hibernate: state %s after the TTL's end", st)
	}
	if _, err := m.Get(owner, del.ID()); !fault.Is(err, fault.NotFound) {
		t.Fatalf("no on_expire: the TTL's end left it (%v)", err)
	}
	m.expire(later) // a hibernated sandbox waits for its next use
	if _, err := m.Get(owner, hib.ID()); err != nil || hib.State() != Hibernated {
		t.Fatalf("a second round: %v, state %s", err, hib.State())
	}
	if _, err := m.SetTTL(ctx, owner, hib.ID(), 3*time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := m.Resume(ctx, owner, hib.ID()); err != nil {
		t.Fatal(err)
	}
	if r := sh(t, hib, "cat f"); r.Stdout != "kept\n" {
		t.Fatalf("resumed: %q", r.Stdout)
	}
	if _, err := m.Create(ctx, owner, Spec{OnExpire: "archive"}); !fault.Is(err, fault.Invalid) {
		t.Fatalf("on_expire archive: %v", err)
	}
}
