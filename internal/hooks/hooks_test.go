package hooks_test

import (
	"context"
	"encoding/json"
	"io"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/daemon"
	"github.com/sandhold/sandhold/internal/daemon/daemontest"
	"github.com/sandhold/sandhold/internal/hooks"
)

func call(t *testing.T, cl *daemontest.Client, name string, args map[string]any, out any) daemontest.Reply {
	t.Helper()
	r := cl.Do("POST", "/v1/tools/call", map[string]any{"name": name, "arguments": args})
	if out != nil && r.Success {
		if err := json.Unmarshal(r.Data, out); err != nil {
			t.Fatalf("%s: decode %s: %v", name, r.Raw, err)
		}
	}
	return r
}

func hookRuns(t *testing.T, cl *daemontest.Client, sb string) map[string]audit.Record {
	t.Helper()
	var page struct {
		Records []audit.Record `json:"records"`
	}
	cl.JSON("GET", "/v1/audit?action=sandbox.hook&sandbox="+url.QueryEscape(sb), nil, 200, &page)
	out := map[string]audit.Record{}
	for _, r := range page.Records {
		if r.Action == "sandbox.hook" {
			out[r.Target] = r
		}
	}
	return out
}

// TestShutdownHooksRunBeforeDelete registers hooks, deletes the sandbox,
// and reads from the audit log that they ran inside it, in priority
// order (the second sees the first's file), and that a hook past its
// timeout was killed without holding up the others.
func TestShutdownHooksRunBeforeDelete(t *testing.T) {
	d := daemontest.Start(t, nil)
	cl := daemontest.NewClient(t, d)
	sb := cl.NewSandbox(nil)
	reg := func(args map[string]any) hooks.Hook {
		t.Helper()
		args["sandbox"] = sb
		var h hooks.Hook
		if r := call(t, cl, hooks.ToolRegister.Name(), args, &h); !r.Success {
			t.Fatalf("register %v: %d %s", args, r.Status, r.Raw)
		}
		return h
	}
	h := reg(map[string]any{"name": "flush", "command": "echo saved > /workspace/flushed", "priority": 1})
	if h.Event != "shutdown" || h.Timeout != 10 || h.Source != "api" {
		t.Fatalf("defaults: %+v", h)
	}
	reg(map[string]any{"name": "check", "command": "test \"$(cat /workspace/flushed)\" = saved"})
	reg(map[string]any{"name": "slow", "command": "sleep 30", "timeout": 1, "priority": 50})
	reg(map[string]any{"name": "gone", "command": "true"})

	var list []hooks.Hook
	call(t, cl, hooks.ToolList.Name(), map[string]any{"sandbox": sb}, &list)
	var names []string
	for _, h := range list {
		names = append(names, h.Name)
	}
	if strings.Join(names, ",") != "flush,slow,check,gone" {
		t.Fatalf("list order %v", names)
	}
	if r := call(t, cl, hooks.ToolRemove.Name(), map[string]any{"sandbox": sb, "name": "gone"}, nil); !r.Success {
		t.Fatalf("remove: %s", r.Raw)
	}
	if r := call(t, cl, hooks.ToolRemove.Name(), map[string]any{"sandbox": sb, "name": "gone"}, nil); r.Success || r.Status != 404 {
		t.Fatalf("remove twice: %d %s", r.Status, r.Raw)
	}
	if len(hookRuns(t, cl, sb)) != 0 {
		t.Fatal("hooks ran before any shutdown")
	}

	cl.JSON("DELETE", "/v1/sandboxes/"+sb, nil, 200, nil)
	runs := hookRuns(t, cl, sb)
	var got []string
	for n := range runs {
		got = append(got, n)
	}
	sort.Strings(got)
	if strings.Join(got, ",") != "check,flush,slow" {
		t.Fatalf("runs %v", got)
	}
	for _, n := range []string{"flush", "check"} {
		if r := runs[n]; r.Verdict != "completed" || r.Detail["exit_code"] != float64(0) {
			t.Errorf("%s: %s %v", n, r.Verdict, r.Detail)
		}
	}
	if r := runs["slow"]; r.Verdict != "timed_out" {
		t.Errorf("slow: %s %v", r.Verdict, r.Detail)
	}
	if runs["flush"].Seq > runs["check"].Seq {
		t.Error("priority 1 ran after priority 100")
	}
}

// TestHookRegistrationIsChecked: field rules, the per-sandbox cap's
// neighbour (names), and the command guard's verdict in the audit record.
func TestHookRegistrationIsChecked(t *testing.T) {
	d := daemontest.Start(t, nil)
	cl := daemontest.NewClient(t, d)
	sb := cl.NewSandbox(nil)
	for _, tc := range []struct {
		name string
		args map[string]any
	}{
		{"bad-name", map[string]any{"name": "a b", "command": "true"}},
		{"bad-event", map[string]any{"name": "a", "command": "true", "event": "startup"}},
		{"no-command", map[string]any{"name": "a"}},
		{"long-timeout", map[string]any{"name": "a", "command": "true", "timeout": 3600}},
		{"zero-timeout", map[string]any{"name": "a", "command": "true", "timeout": 0}},
		{"unknown-field", map[string]any{"name": "a", "command": "true", "when": "later"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.args["sandbox"] = sb
			if r := call(t, cl, hooks.ToolRegister.Name(), tc.args, nil); r.Success || r.Status != 400 {
				t.Fatalf("%d %s", r.Status, r.Raw)
			}
		})
	}
	if r := call(t, cl, hooks.ToolRegister.Name(), map[string]any{"sandbox": sb, "name": "wipe", "command": "rm -rf /"}, nil); !r.Success {
		t.Fatalf("admin may register a dangerous hook: %d %s", r.Status, r.Raw)
	}
	var page struct {
		Records []audit.Record `json:"records"`
	}
	cl.JSON("GET", "/v1/audit?action="+hooks.ToolRegister.Name()+"&limit=50", nil, 200, &page)
	found := false
	for _, r := range page.Records {
		if r.Target == "wipe" {
			found = true
			if r.Detail["risk"] != "dangerous" || r.Detail["guard"] != "flagged" {
				t.Errorf("guard verdict not recorded: %v", r.Detail)
			}
		}
	}
	if !found {
		t.Fatal("no audit record of the registration")
	}
}

// TestShutdownHooksRunWhenTheServerStops: a server stopping runs the
// hooks of its running sandboxes before it stops them; the next server on
// the same data dir shows the run in the audit log.
func TestShutdownHooksRunWhenTheServerStops(t *testing.T) {
	daemontest.RequireSandboxes(t)
	dir := t.TempDir()
	d, err := daemon.New(config.Config{Listen: "127.0.0.1:0", DataDir: dir, DisableRateLimit: true, DiskBudget: 1 << 40},
		daemon.WithLogger(daemon.NewLogger(io.Discard, "error")), daemon.WithStderr(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	<-d.Ready()
	cl := daemontest.NewClient(t, d)
	sb := cl.NewSandbox(nil)
	cl.Exec(sb, "true") // running
	if r := call(t, cl, hooks.ToolRegister.Name(), map[string]any{"sandbox": sb, "name": "bye", "command": "echo bye > /workspace/bye"}, nil); !r.Success {
		t.Fatalf("register: %s", r.Raw)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}

	d2 := daemontest.Start(t, func(c *config.Config) { c.DataDir = dir })
	cl2 := daemontest.NewClient(t, d2)
	run, ok := hookRuns(t, cl2, sb)["bye"]
	if !ok || run.Verdict != "completed" || run.Detail["reason"] != "server_stop" {
		t.Fatalf("hook run %+v (found %v)", run, ok)
	}
	if res := cl2.Exec(sb, "cat /workspace/bye"); res.Stdout != "bye\n" {
		t.Fatalf("the hook's file: %+v", res)
	}
}
