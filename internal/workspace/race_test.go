package workspace_test

import (
	"context"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/workspace"
)

// hookFS records the primitives a call uses and lets a test act in the
// sandbox between two of them (a symlink swapped in mid-call).
type hookFS struct {
	workspace.FS
	mu    sync.Mutex
	ops   []agent.Op
	after func(op agent.Op, r agent.FileReq)
}

func (h *hookFS) File(ctx context.Context, op agent.Op, r agent.FileReq) (*agent.FileResp, *os.File, error) {
	resp, f, err := h.FS.File(ctx, op, r)
	h.mu.Lock()
	h.ops = append(h.ops, op)
	after := h.after
	h.mu.Unlock()
	if after != nil {
		after(op, r)
	}
	return resp, f, err
}

func (h *hookFS) take() []agent.Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	ops := h.ops
	h.ops = nil
	return ops
}

func newHooked(t *testing.T, s *server, id string) (*workspace.Service, *hookFS) {
	h := &hookFS{FS: s.sandbox(id)}
	svc := workspace.New(workspace.Config{Resolve: func(context.Context, auth.Caller, string) (workspace.FS, error) { return h, nil }})
	t.Cleanup(svc.Close)
	return svc, h
}

// TestSensitiveSameAnswer: a forbidden path gets the same error whether
// or not it exists, and both calls take the same code path — the same
// sequence of primitives, which ends at the resolve, before anything
// looks at existence.
func TestSensitiveSameAnswer(t *testing.T) {
	s := start(t, nil)
	id := s.newSandbox()
	s.sh(id, fixture("/workspace/s", []string{".ssh/", ".ssh/id_rsa", ".env", "app/", "id_ed25519"}))
	svc, h := newHooked(t, s, id)
	c := adminCaller(s)
	ctx := context.Background()
	ops := map[string]func(p string) error{
		"read": func(p string) error { _, err := svc.Read(ctx, c, workspace.ReadArgs{File: p}); return err },
		"write": func(p string) error {
			_, err := svc.Write(ctx, c, workspace.WriteArgs{File: p, Content: "x"})
			return err
		},
		"search": func(p string) error {
			_, err := svc.Search(ctx, c, workspace.SearchArgs{File: p, Regex: "."})
			return err
		},
		"list": func(p string) error { _, err := svc.List(ctx, c, workspace.ListArgs{Path: p}); return err },
		"grep": func(p string) error {
			_, err := svc.Grep(ctx, c, workspace.GrepArgs{Path: p, Pattern: "."})
			return err
		},
		"editor create": func(p string) error {
			txt := "x"
			_, err := svc.Editor(ctx, c, workspace.EditorArgs{Command: "create", Path: p, FileText: &txt})
			return err
		},
		"watch": func(p string) error {
			_, err := svc.WatchCreate(ctx, c, workspace.WatchCreateArgs{Path: p})
			return err
		},
	}
	pairs := []struct{ name, exists, missing string }{
		{"key in .ssh", "/workspace/s/.ssh/id_rsa", "/workspace/s/.ssh/id_ecdsa"},
		{".env", "/workspace/s/.env", "/workspace/s/app/.env"},
		{"key name", "/workspace/s/id_ed25519", "/workspace/s/app/id_ed25519"},
		{"missing parents", "/workspace/s/.ssh", "/workspace/s/no/such/dir/.ssh"},
	}
	for _, p := range pairs {
		for name, op := range ops {
			t.Run(p.name+"/"+name, func(t *testing.T) {
				h.take()
				e1 := op(p.exists)
				ops1 := h.take()
				e2 := op(p.missing)
				ops2 := h.take()
				if e1 == nil || e2 == nil {
					t.Fatalf("not refused: %v / %v", e1, e2)
				}
				f1, f2 := workspace.FileErrorOf(name, p.exists, e1), workspace.FileErrorOf(name, p.missing, e2)
				if f1.ErrorType != f2.ErrorType || f1.Message != f2.Message || f1.Reason != f2.Reason ||
					fault.KindOf(e1) != fault.KindOf(e2) || fault.KindOf(e1) != fault.Forbidden ||
					strings.ReplaceAll(fault.Public(e1), p.exists, "P") != strings.ReplaceAll(fault.Public(e2), p.missing, "P") {
					t.Fatalf("answers differ:\n exists:  %s %+v\n missing: %s %+v", fault.Public(e1), f1, fault.Public(e2), f2)
				}
				// A sensitive name as given is refused before any round
				// trip; one resolved to a sensitive name, after the one
				// resolve. Either way, never past it.
				if !reflect.DeepEqual(ops1, ops2) || len(ops1) > 1 || (len(ops1) == 1 && ops1[0] != agent.OpResolve) {
					t.Fatalf("code paths differ or go past resolve: exists %v, missing %v", ops1, ops2)
				}
			})
		}
	}
}

// TestSymlinkSwappedMidCall swaps a directory of the path for a symlink
// out of the workspace after the path was resolved and checked, before
// the call acts: the call fails and nothing is written or read there.
func TestSymlinkSwappedMidCall(t *testing.T) {
	s := start(t, nil)
	id := s.newSandbox()
	s.sh(id, "mkdir -p /tmp/outside && printf s3cret > /tmp/outside/f\n"+fixture("/workspace/s", []string{"wdir/", "rdir/", "rdir/f"}))
	svc, h := newHooked(t, s, id)
	sb := s.sandbox(id)
	ctx := context.Background()
	swap := func(dir string) func(op agent.Op, r agent.FileReq) {
		var once sync.Once
		return func(op agent.Op, _ agent.FileReq) {
			if op != agent.OpResolve {
				return
			}
			once.Do(func() {
				if _, _, err := sb.File(ctx, agent.OpRename, agent.FileReq{Path: dir, Path2: dir + ".old"}); err != nil {
					t.Errorf("swap: %v", err)
				}
				if _, _, err := sb.File(ctx, agent.OpSymlink, agent.FileReq{Path: "/tmp/outside", Path2: dir}); err != nil {
					t.Errorf("swap: %v", err)
				}
			})
		}
	}
	c := adminCaller(s)

	h.after = swap("/workspace/s/wdir")
	_, err := svc.Write(ctx, c, workspace.WriteArgs{File: "/workspace/s/wdir/new.txt", Content: "ESCAPED"})
	if fe := workspace.FileErrorOf("write", "", err); err == nil || fe.ErrorType != "invalid_path" {
		t.Fatalf("write through a swapped symlink: %v %+v", err, fe)
	}

	h.after = swap("/workspace/s/rdir")
	res, err := svc.Read(ctx, c, workspace.ReadArgs{File: "/workspace/s/rdir/f"})
	if err == nil || strings.Contains(res.Content, "s3cret") {
		t.Fatalf("read through a swapped symlink: %q %v", res.Content, err)
	}
	h.after = nil
	if out := s.sh(id, "ls -A /tmp/outside"); out != "f\n" {
		t.Fatalf("/tmp/outside now holds: %q", out)
	}
}

// TestWritesAreAtomic: readers racing writers of two different contents
// only ever see one content or the other, never a mix or a prefix, and no
// temporary file is left behind.
func TestWritesAreAtomic(t *testing.T) {
	s := start(t, nil)
	id := s.newSandbox()
	s.sh(id, "mkdir -p /workspace/at")
	sb := s.sandbox(id)
	svc := workspace.New(workspace.Config{Resolve: func(context.Context, auth.Caller, string) (workspace.FS, error) { return sb, nil }})
	defer svc.Close()
	ctx, c := context.Background(), adminCaller(s)
	a, b := strings.Repeat("a", 256<<10), strings.Repeat("b", 256<<10)
	const f = "/workspace/at/file"
	if _, err := svc.Write(ctx, c, workspace.WriteArgs{File: f, Content: a}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w, content := range []string{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 15; i++ {
				if _, err := svc.Write(ctx, c, workspace.WriteArgs{File: f, Content: content}); err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(stop) }()
	reads := 0
	for done := false; !done; {
		select {
		case <-stop:
			done = true
		default:
		}
		res, err := svc.Read(ctx, c, workspace.ReadArgs{File: f})
		if err != nil {
			t.Fatal(err)
		}
		if res.Content != a && res.Content != b {
			t.Fatalf("torn read: %d bytes, starts %q", len(res.Content), res.Content[:min(8, len(res.Content))])
		}
		reads++
	}
	if out := s.sh(id, "ls -A /workspace/at"); out != "file\n" {
		t.Fatalf("left behind: %q", out)
	}
	t.Logf("%d reads raced 30 writes of 256 KiB", reads)
}
