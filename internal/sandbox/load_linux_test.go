package sandbox

import (
	"context"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/fault"
)

// waitUserPids polls the user group until it holds n tasks (bounded by a
// generous deadline: the processes start in milliseconds).
func waitUserPids(t *testing.T, s *Sandbox, n int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s.mu.Lock()
		g := s.user
		s.mu.Unlock()
		st, err := g.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if st.Pids == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("user group holds %d tasks, want %d", st.Pids, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPidsLimitCountsOnlyUserProcesses: the whole pids budget is the
// user's (the init's threads live beside the user group), and a spawn past
// it is a rate-limit refusal naming the limit with a Retry-After, not an
// internal error.
func TestPidsLimitCountsOnlyUserProcesses(t *testing.T) {
	m := newManager(t, testConfig(t), nil)
	s := create(t, m, Spec{Limits: Limits{Pids: 8}})

	// bash + 5 sleeps = 6 of the 8 pids. A spawn needs two for the moment
	// of the fork: the init's forking thread sits in the execution's group
	// (so the child is born there) beside the new process.
	bg, err := s.Exec(context.Background(), ExecRequest{Command: "for i in 1 2 3 4 5; do sleep 60 & done; wait", Background: true})
	if err != nil {
		t.Fatalf("background exec: %v", err)
	}
	t.Cleanup(bg.Kill)
	waitUserPids(t, s, 6)
	// The last pids are the user's to use, however many threads the init
	// has (with the init in the same group, its threads alone spent 8).
	if r := run(t, s, ExecRequest{Argv: []string{"/bin/true"}}); r.Status != StatusCompleted || *r.ExitCode != 0 {
		t.Fatalf("7th process: %+v", r)
	}
	hold, err := s.Exec(context.Background(), ExecRequest{Argv: []string{"/bin/sleep", "60"}, Background: true})
	if err != nil {
		t.Fatalf("7th process (background): %v", err)
	}
	t.Cleanup(hold.Kill)
	waitUserPids(t, s, 7)

	_, err = s.Exec(context.Background(), ExecRequest{Argv: []string{"/bin/true"}})
	var fe *fault.Error
	if !asFault(err, &fe) || fe.Kind != fault.RateLimited || fe.RetryAfter <= 0 {
		t.Fatalf("process past the limit: got %v, want a rate_limited fault with Retry-After", err)
	}
	if want := "pids 8"; !contains(fe.Msg, want) {
		t.Errorf("message %q does not name the limit (%q)", fe.Msg, want)
	}
	// Ending the holder frees the budget again.
	hold.Kill()
	<-hold.Done()
	if r := run(t, s, ExecRequest{Argv: []string{"/bin/true"}}); r.Status != StatusCompleted {
		t.Fatalf("after a process ended: %+v", r)
	}
}

// TestBadCwdIsInvalid: a cwd that is clean and absolute but not a usable
// directory is the caller's error, named as the cwd field.
func TestBadCwdIsInvalid(t *testing.T) {
	m := newManager(t, testConfig(t), nil)
	s := create(t, m, Spec{})
	if r := run(t, s, ExecRequest{Command: "echo x > /workspace/plain"}); r.Status != StatusCompleted {
		t.Fatalf("setup: %+v", r)
	}
	for _, cwd := range []string{"/proc/self/fd/3", "/proc/self/fd/0", "/workspace/plain", "/etc/hostname", "/nonexistent"} {
		t.Run(cwd, func(t *testing.T) {
			_, err := s.Exec(context.Background(), ExecRequest{Argv: []string{"/bin/true"}, Cwd: cwd})
			var fe *fault.Error
			if !asFault(err, &fe) || (fe.Kind != fault.Invalid && fe.Kind != fault.Forbidden) {
				t.Fatalf("cwd %q: got %v, want an invalid (or forbidden) fault", cwd, err)
			}
		})
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestDiskBudgetRefusesOverCommit: the sum of workspace quotas stays
// within the server's disk budget; over it a create is a clear conflict
// naming limits.disk, and deleting a sandbox gives its quota back.
func TestDiskBudgetRefusesOverCommit(t *testing.T) {
	cfg := testConfig(t)
	cfg.DiskBudget = 100 << 20
	m := newManager(t, cfg, nil)
	first := create(t, m, Spec{Limits: Limits{DiskBytes: 64 << 20}})
	_, err := m.Create(context.Background(), owner, Spec{Limits: Limits{DiskBytes: 64 << 20}})
	var fe *fault.Error
	if !asFault(err, &fe) || fe.Kind != fault.Conflict || fe.Field != "limits.disk" || !contains(fe.Msg, "SANDBOX_DISK_BUDGET") {
		t.Fatalf("over the budget: got %v, want a conflict on limits.disk naming the budget", err)
	}
	if got := m.DiskCommitted(); got != 64<<20 {
		t.Fatalf("committed %d after a refusal, want %d", got, 64<<20)
	}
	if _, err := m.Create(context.Background(), owner, Spec{Limits: Limits{DiskBytes: 32 << 20}}); err != nil {
		t.Fatalf("within the budget: %v", err)
	}
	if err := m.Delete(context.Background(), owner, first.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(context.Background(), owner, Spec{Limits: Limits{DiskBytes: 64 << 20}}); err != nil {
		t.Fatalf("after a delete freed its quota: %v", err)
	}
}

// TestKillAfterReleaseSparesTheNextProcess: a released process's
// execution group goes back to the free list and serves the next spawn; a
// late Kill of the first (a session closed after its shell ended) must not
// kill the second.
func TestKillAfterReleaseSparesTheNextProcess(t *testing.T) {
	m := newManager(t, testConfig(t), nil)
	s := create(t, m, Spec{})
	a, err := s.Spawn(context.Background(), SpawnSpec{Argv: []string{"/bin/true"}})
	if err != nil {
		t.Fatal(err)
	}
	<-a.Exited()
	a.Release()
	b, err := s.Spawn(context.Background(), SpawnSpec{Argv: []string{"/bin/sleep", "30"}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	if a.Group() != b.Group() {
		t.Skip("the second spawn did not reuse the first one's group; nothing to race")
	}
	a.Kill()
	select {
	case <-b.Exited():
		t.Fatal("a late Kill of a released process killed the next process in its group")
	case <-time.After(500 * time.Millisecond):
	}
}
