package cluster_test

import (
	"context"
	"strings"
	"testing"

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
	a, b := startNode(t, cfgOf("node-a"), logA), startNode(t, cfgOf("node-b"), logB)
	st, err := store.OpenPostgres(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	testenv.Eventually(t, "two nodes registered", func() bool { ns, _ := st.Nodes(context.Background()); return len(ns) == 2 })

	var key struct{ ID, Key string }
	b.ok("POST", "/v1/keys", admin, map[string]string{"name": "agent-h", "role": "agent"}, 201, &key)
	nodeOf := func(id string) string {
		n, err := st.SandboxNode(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
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
	// The move is audited (system, from the dead node).
	_, audited := b.raw("GET", "/v1/audit?action=sandbox.adopt&sandbox="+hib.ID, admin, nil, nil)
	if !strings.Contains(audited, `"from":"`+home+`"`) {
		t.Errorf("no sandbox.adopt record naming %s: %.1000s", home, audited)
	}
	// The sandbox that was not hibernated stays lost: its workspace was
	// on the node that went away.
	code, body := b.raw("GET", "/v1/sandboxes/"+plain.ID, key.Key, nil, nil)
	if code != 503 || !strings.Contains(body, `"lost"`) {
		t.Errorf("a running sandbox of the dead node: %d %s, want 503 lost", code, body)
	}
	if n := nodeOf(plain.ID); n != home {
		t.Errorf("a sandbox that was not hibernated moved to %s", n)
	}
}
