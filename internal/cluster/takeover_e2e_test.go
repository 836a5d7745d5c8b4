package cluster_test

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/cluster"
	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/daemon/daemontest"
	"github.com/sandhold/sandhold/internal/store"
	"github.com/sandhold/sandhold/internal/store/pgtest"
	"github.com/sandhold/sandhold/internal/testenv"
)

// TestHibernatedSandboxResumesOnAnotherNode: two nodes share the database
// and the snapshot directory. A sandbox hibernated on a node that then
// stops resumes, with its files, on the other node at the first call that
// addresses it there; a sandbox that was not hibernated stays lost with
// its node (its workspace was there).
func TestHibernatedSandboxResumesOnAnotherNode(t *testing.T) {
	c := twoNodes(t)
	a, b, admin := c.a, c.b, c.admin
	nodeOf := c.nodeOf

	var key, other struct{ ID, Key string }
	b.ok("POST", "/v1/keys", admin, map[string]string{"name": "agent-h", "role": "agent"}, 201, &key)
	b.ok("POST", "/v1/keys", admin, map[string]string{"name": "agent-o", "role": "agent"}, 201, &other)
	// Creates go to the least loaded node (ties by name): of three, two
	// share a node, the home of the two sandboxes below.
	on := map[string][]string{}
	for range 3 {
		var sb struct{ ID string }
		a.ok("POST", "/v1/sandboxes", key.Key, map[string]any{"limits": map[string]any{"disk": "64MB"}}, 201, &sb)
		on[nodeOf(sb.ID)] = append(on[nodeOf(sb.ID)], sb.ID)
	}
	home := "node-a"
	if len(on[home]) < 2 {
		home, a, b = "node-b", b, a
	}
	if len(on[home]) < 2 {
		t.Fatalf("placement: %v", on)
	}
	hib, plain := struct{ ID string }{on[home][0]}, struct{ ID string }{on[home][1]}
	a.ok("POST", "/v1/sandboxes/"+hib.ID+"/exec", key.Key, map[string]any{"command": "echo kept > f && mkdir -p d && echo deep > d/g"}, 200, nil)
	a.ok("POST", "/v1/sandboxes/"+plain.ID+"/exec", key.Key, map[string]any{"command": "echo here > f"}, 200, nil)
	var info struct{ State string }
	a.ok("POST", "/v1/sandboxes/"+hib.ID+"/hibernate", key.Key, nil, 200, &info)
	if info.State != "hibernated" {
		t.Fatalf("state %q after hibernate", info.State)
	}

	a.stop() // the sandboxes' node goes away; its heartbeat stops
	testenv.Eventually(t, "the hibernated sandbox answers through the other node", func() bool {
		code, _ := b.do("GET", "/v1/sandboxes/"+hib.ID, key.Key, nil)
		return code == 200
	})
	if n := nodeOf(hib.ID); n == home {
		t.Fatalf("the sandbox is still recorded on %s", n)
	}
	var res struct{ Stdout string }
	b.ok("POST", "/v1/sandboxes/"+hib.ID+"/exec", key.Key, map[string]any{"command": "cat f d/g; stat -c %u f"}, 200, &res)
	if res.Stdout != "kept\ndeep\n1000\n" {
		t.Errorf("resumed on the other node: %q, want its files, owned by the sandbox's user", res.Stdout)
	}
	// The move is audited (the caller's sandbox.adopt, from the dead node).
	_, audited := b.raw("GET", "/v1/audit?action=sandbox.adopt&sandbox="+hib.ID, admin, nil, nil)
	if !strings.Contains(audited, `"from":"`+home+`"`) {
		t.Errorf("no sandbox.adopt record naming %s: %.1000s", home, audited)
	}
	// The sandbox that was not hibernated stays lost: its workspace was
	// on the node that went away. Only its owner (and admins) learn that;
	// to another key, or a key that is no key, it is as unknown as any id.
	code, body := b.raw("GET", "/v1/sandboxes/"+plain.ID, key.Key, nil, nil)
	if code != 503 || !strings.Contains(body, "sandbox lost") {
		t.Errorf("a running sandbox of the dead node: %d %s, want 503 lost", code, body)
	}
	if code, body := b.raw("GET", "/v1/sandboxes/"+plain.ID, admin, nil, nil); code != 503 {
		t.Errorf("an admin's GET of the lost sandbox: %d %s, want 503", code, body)
	}
	for _, k := range []struct{ name, key string }{{"another key", other.Key}, {"a wrong key", key.Key + "x"}} {
		code, body := b.raw("GET", "/v1/sandboxes/"+plain.ID, k.key, nil, nil)
		_, unknown := b.raw("GET", "/v1/sandboxes/sb0123456789abcdef", k.key, nil, nil)
		if code == 503 || strings.Contains(body, "lost") || strings.Contains(body, home) {
			t.Errorf("%s's GET of the lost sandbox: %d %s, want what an unknown id gets (%s)", k.name, code, body, unknown)
		}
	}
	if code, body := b.do("POST", "/v1/sandboxes/"+plain.ID+"/exec", other.Key, map[string]any{"command": "true"}); code != 404 {
		t.Errorf("another key's exec in the lost sandbox: %d %s, want 404", code, body)
	}
	if n := nodeOf(plain.ID); n != home {
		t.Errorf("a sandbox that was not hibernated moved to %s", n)
	}
}

// TestOnlyTheOwnersCallTakesOver: the take-over of a dead node's
// hibernated sandbox is the sandbox.adopt tool, dispatched inside the
// authenticated call that needs the sandbox. A request with no key, a
// wrong key, another tenant's key or a viewer's, and any call during HALT
// leave the sandbox on its dead node (the store says so); the owner's
// call moves it, and the audit holds the owner's sandbox.adopt.
func TestOnlyTheOwnersCallTakesOver(t *testing.T) {
	c := twoNodes(t)
	var owner, other, viewer struct{ ID, Key string }
	c.a.ok("POST", "/v1/keys", c.admin, map[string]string{"name": "owner", "role": "agent"}, 201, &owner)
	c.a.ok("POST", "/v1/keys", c.admin, map[string]string{"name": "other", "role": "agent"}, 201, &other)
	c.a.ok("POST", "/v1/keys", c.admin, map[string]string{"name": "viewer", "role": "viewer"}, 201, &viewer)
	// Of three creates two share a node (least loaded, ties by name): sb
	// is taken over by a native call, aio by an AIO route's.
	on := map[string][]string{}
	for range 3 {
		var sb struct{ ID string }
		c.a.ok("POST", "/v1/sandboxes", owner.Key, map[string]any{"limits": map[string]any{"disk": "64MB"}}, 201, &sb)
		on[c.nodeOf(sb.ID)] = append(on[c.nodeOf(sb.ID)], sb.ID)
	}
	home, dies, via := "node-a", c.a, c.b
	if len(on[home]) < 2 {
		home, dies, via = "node-b", c.b, c.a
	}
	sb, aio := struct{ ID string }{on[home][0]}, on[home][1]
	for _, id := range []string{sb.ID, aio} {
		dies.ok("POST", "/v1/sandboxes/"+id+"/exec", owner.Key, map[string]any{"command": "echo kept > f"}, 200, nil)
		dies.ok("POST", "/v1/sandboxes/"+id+"/hibernate", owner.Key, nil, 200, nil)
	}
	dies.stop()
	testenv.Eventually(t, home+" counts as dead", func() bool {
		ns, err := c.st.Nodes(context.Background())
		if err != nil {
			return false
		}
		for _, n := range ns {
			if n.Name == home {
				return !n.Alive(time.Now(), cluster.DeadAfter)
			}
		}
		return true // deregistered
	})

	path := "/v1/sandboxes/" + sb.ID
	tests := []struct {
		name, key string
		want      int
	}{
		{"no key", "", http.StatusUnauthorized},
		{"wrong key", "shk_" + strings.Repeat("w", 43), http.StatusUnauthorized},
		{"another tenant's key", other.Key, http.StatusNotFound},
		{"a viewer's key", viewer.Key, http.StatusForbidden},
	}
	aioExec := "/sandboxes/" + aio + "/v1/shell/exec"
	for _, tc := range tests {
		for _, call := range []struct{ method, path, body string }{{"GET", path, ""}, {"DELETE", path, ""}, {"POST", aioExec, `{"command":"cat f"}`}} {
			code, body := via.raw(call.method, call.path, tc.key, strings.NewReader(call.body), map[string]string{"Content-Type": "application/json"})
			if code != tc.want {
				t.Errorf("%s: %s %s = %d %s, want %d", tc.name, call.method, call.path, code, body, tc.want)
			}
			if n, m := c.nodeOf(sb.ID), c.nodeOf(aio); n != home || m != home {
				t.Fatalf("%s: %s %s moved a sandbox (now on %s and %s)", tc.name, call.method, call.path, n, m)
			}
		}
	}
	// HALT: the owner's call is refused, the sandbox stays.
	via.ok("POST", "/v1/control/halt", c.admin, map[string]string{"reason": "test"}, 200, nil)
	if code, body := via.raw("GET", path, owner.Key, nil, nil); code == http.StatusOK {
		t.Errorf("during HALT: %d %s, want the take-over refused", code, body)
	}
	if n := c.nodeOf(sb.ID); n != home {
		t.Fatalf("a call during HALT moved the sandbox to %s", n)
	}
	denied := adoptRecords(t, via.node, c.admin, sb.ID)
	if len(denied) == 0 || denied[len(denied)-1].Verdict != "denied" || denied[len(denied)-1].Detail["reason"] != "halted" {
		t.Errorf("during HALT: sandbox.adopt records %+v, want the last denied as halted", denied)
	}
	via.ok("POST", "/v1/control/unhalt", c.admin, nil, 200, nil)

	// The owner's call takes it over, as a call of the owner's.
	var info struct{ State, Node string }
	via.ok("GET", path, owner.Key, nil, 200, &info)
	if want := map[string]string{"node-a": "node-b", "node-b": "node-a"}[home]; c.nodeOf(sb.ID) != want || info.State != "hibernated" {
		t.Fatalf("after the owner's call: on %s in state %q, want on %s, still hibernated", c.nodeOf(sb.ID), info.State, want)
	}
	recs := adoptRecords(t, via.node, c.admin, sb.ID)
	last := recs[len(recs)-1]
	if last.Actor != owner.ID || last.Verdict != "allowed" || last.Detail["from"] != home || last.Detail["depth"] != float64(1) {
		t.Errorf("the take-over's record: %+v, want the owner's allowed sandbox.adopt from %s, nested in the call", last, home)
	}
	for _, r := range recs {
		if r.Verdict == "allowed" && r.Actor != owner.ID {
			t.Errorf("a take-over allowed to %s: %+v", r.Actor, r)
		}
	}
	var res struct{ Stdout string }
	via.ok("POST", path+"/exec", owner.Key, map[string]any{"command": "cat f"}, 200, &res)
	if res.Stdout != "kept\n" {
		t.Errorf("resumed: %q, want its file", res.Stdout)
	}

	// At an AIO route of the sandbox's URL, which checks the sandbox
	// before its tool runs, the owner's request takes it over by a
	// sandbox.adopt of its own, then runs.
	var out struct{ Output string }
	via.ok("POST", aioExec, owner.Key, map[string]any{"command": "cat f"}, 200, &out)
	if out.Output != "kept\n" || c.nodeOf(aio) == home {
		t.Errorf("AIO exec: %q, on %s; want its file, moved", out.Output, c.nodeOf(aio))
	}
	if recs := adoptRecords(t, via.node, c.admin, aio); len(recs) == 0 || recs[len(recs)-1].Actor != owner.ID || recs[len(recs)-1].Verdict != "allowed" {
		t.Errorf("AIO take-over's records: %+v, want the owner's allowed sandbox.adopt last", recs)
	}
}

// adoptRecords are the audit's sandbox.adopt records of sandbox id,
// oldest first.
func adoptRecords(t *testing.T, n node, admin, id string) []audit.Record {
	t.Helper()
	var page struct{ Records []audit.Record }
	n.ok("GET", "/v1/audit?action=sandbox.adopt&sandbox="+id, admin, nil, 200, &page)
	sort.Slice(page.Records, func(i, j int) bool { return page.Records[i].Seq < page.Records[j].Seq })
	return page.Records
}

// cluster is two nodes sharing the database and the snapshot directory
// (a shared SANDBOX_SNAPSHOT_DIR), and the store as a third party sees it.
type cluster2 struct {
	t     *testing.T
	a, b  stoppable
	st    *store.Postgres
	admin string
}

func twoNodes(t *testing.T) *cluster2 {
	daemontest.RequireSandboxes(t)
	url := pgtest.URL(t)
	admin := "shk_" + strings.Repeat("H", 43)
	shared := t.TempDir() // SANDBOX_SNAPSHOT_DIR, as a directory every node mounts
	cfgOf := func(name string) config.Config {
		return config.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), DisableRateLimit: true, WarmPool: 0,
			DatabaseURL: url, APIKey: admin, NodeName: name, ClusterSecret: strings.Repeat("h", 32),
			SnapshotDir: shared, MaxDisk: 256 << 20}
	}
	logA, logB := &logBuf{}, &logBuf{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("node a:\n%s\nnode b:\n%s", logA.String(), logB.String())
		}
	})
	c := &cluster2{t: t, a: startNode(t, cfgOf("node-a"), logA), b: startNode(t, cfgOf("node-b"), logB), admin: admin}
	var err error
	if c.st, err = store.OpenPostgres(context.Background(), url); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.st.Close() })
	testenv.Eventually(t, "two nodes registered", func() bool { ns, _ := c.st.Nodes(context.Background()); return len(ns) == 2 })
	return c
}

// nodeOf is the node the store says holds sandbox id.
func (c *cluster2) nodeOf(id string) string {
	c.t.Helper()
	n, err := c.st.SandboxNode(context.Background(), id)
	if err != nil {
		c.t.Fatal(err)
	}
	return n
}
