package cluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sandhold/sandhold/internal/cluster"
	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/daemon"
	"github.com/sandhold/sandhold/internal/daemon/daemontest"
	"github.com/sandhold/sandhold/internal/store"
	"github.com/sandhold/sandhold/internal/store/pgtest"
	"github.com/sandhold/sandhold/internal/testenv"
)

// stoppable is a daemon the test can stop and start again on the same data
// dir (daemontest.Start ties the daemon's life to the test's).
type stoppable struct {
	node
	stop func()
}

// startNode starts a daemon in this process; its log (debug level) and
// stderr go to logs.
func startNode(t *testing.T, cfg config.Config, logs io.Writer) stoppable {
	t.Helper()
	d, err := daemon.New(cfg, daemon.WithLogger(daemon.NewLogger(logs, "debug")), daemon.WithStderr(logs))
	if err != nil {
		t.Fatalf("start %s: %v", cfg.NodeName, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	select {
	case <-d.Ready():
	case err := <-done:
		cancel()
		t.Fatalf("run %s: %v", cfg.NodeName, err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Logf("node stopped: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stoppable{node: node{t: t, d: d, base: "http://" + d.Addr()}, stop: stop}
}

func (n node) raw(method, path, key string, body io.Reader, hdr map[string]string) (int, string) {
	n.t.Helper()
	req, err := http.NewRequest(method, n.base+path, body)
	if err != nil {
		n.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		n.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = res.Body.Close() }()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// Three nodes on loopback share one PostgreSQL; node a is the only address
// the client uses.
func TestThreeNodesBehindOneAddress(t *testing.T) {
	daemontest.RequireSandboxes(t)
	url := pgtest.URL(t)
	admin := "shk_" + strings.Repeat("B", 43)
	secret := strings.Repeat("s", 32)
	cfgOf := func(name string) config.Config {
		return config.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), DisableRateLimit: true, WarmPool: 0,
			DatabaseURL: url, APIKey: admin, NodeName: name, ClusterSecret: secret,
			// Small workspaces: the disk budget is a share of the free space
			// at start, which other work on a shared host moves.
			MaxDisk: 256 << 20}
	}
	cfgC := cfgOf("node-c")
	// Every node's log, at debug level, is searched for secrets at the end.
	logA, logB, logC := &logBuf{}, &logBuf{}, filepath.Join(t.TempDir(), "node-c.log")
	// A failure says what the nodes logged as errors (a 500's cause).
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		cLog, _ := os.ReadFile(logC)
		for name, log := range map[string]string{"a": logA.String(), "b": logB.String(), "c": string(cLog)} {
			for line := range strings.Lines(log) {
				if strings.Contains(line, `"level":"ERROR"`) {
					t.Logf("node %s: %s", name, strings.TrimSpace(line))
				}
			}
		}
	})
	// c runs in a process of its own: it is killed with SIGKILL below.
	a, b, c := startNode(t, cfgOf("node-a"), logA), startNode(t, cfgOf("node-b"), logB), startChildNode(t, cfgC, logC)
	st, err := store.OpenPostgres(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	testenv.Eventually(t, "three nodes registered", func() bool { ns, _ := st.Nodes(context.Background()); return len(ns) == 3 })

	var key struct{ ID, Key string }
	a.ok("POST", "/v1/keys", admin, map[string]string{"name": "agent-1", "role": "agent"}, 201, &key)

	// Creates through a: least loaded first, ties by name.
	where := map[string]string{}
	for range 3 {
		var sb struct{ ID string }
		a.ok("POST", "/v1/sandboxes", key.Key, map[string]any{}, 201, &sb)
		n, err := st.SandboxNode(context.Background(), sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		where[n] = sb.ID
	}
	if len(where) != 3 {
		t.Fatalf("three creates through a landed on %v, want one per node", where)
	}
	onB, onC := where["node-b"], where["node-c"]
	// The list through any node holds the key's sandboxes on every node.
	for _, n := range []node{a.node, b.node, c.node} {
		var list []struct{ ID, Node string }
		n.ok("GET", "/v1/sandboxes", key.Key, nil, 200, &list)
		got := map[string]string{}
		for _, s := range list {
			got[s.Node] = s.ID
		}
		if len(list) != 3 || got["node-a"] != where["node-a"] || got["node-b"] != onB || got["node-c"] != onC {
			t.Fatalf("list through %s = %+v, want %v", n.base, list, where)
		}
	}
	for name, id := range where {
		var info struct{ Node string }
		a.ok("GET", "/v1/sandboxes/"+id, key.Key, nil, 200, &info)
		if info.Node != name {
			t.Fatalf("sandbox %s says node %q, runs on %s", id, info.Node, name)
		}
	}

	// exec, streamed exec, upload and download through a.
	var res struct {
		Stdout string `json:"stdout"`
	}
	a.ok("POST", "/v1/sandboxes/"+onB+"/exec", key.Key, map[string]any{"command": "hostname; echo via-a"}, 200, &res)
	if !strings.Contains(res.Stdout, "via-a") {
		t.Fatalf("exec on b through a: %+v", res)
	}
	code, body := a.raw("POST", "/v1/sandboxes/"+onC+"/exec", key.Key, strings.NewReader(`{"command":"for i in 1 2 3; do echo line$i; done"}`),
		map[string]string{"Accept": "text/event-stream", "Content-Type": "application/json"})
	if code != 200 || !strings.Contains(body, "line3") || !strings.Contains(body, "event:") {
		t.Fatalf("streamed exec on c through a: %d %s", code, body)
	}
	payload := bytes.Repeat([]byte("0123456789"), 100_000) // 1 MB
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	_ = mw.WriteField("path", "/workspace/big.bin")
	fw, _ := mw.CreateFormFile("file", "big.bin")
	_, _ = fw.Write(payload)
	_ = mw.Close()
	code, body = a.raw("POST", "/sandboxes/"+onC+"/v1/file/upload", key.Key, &mp, map[string]string{"Content-Type": mw.FormDataContentType()})
	if code != 200 {
		t.Fatalf("upload to c through a: %d %s", code, body)
	}
	code, body = a.raw("GET", "/sandboxes/"+onC+"/v1/file/download?path=/workspace/big.bin", key.Key, nil, nil)
	if code != 200 || body != string(payload) {
		t.Fatalf("download from c through a: %d, %d bytes", code, len(body))
	}

	// A terminal (WebSocket) on c's sandbox through a: the upgrade and
	// both directions pass the forwarder.
	wsTerminal(t, a.node, onC, key.Key)

	// The browser's relays through a, for a sandbox on b; c revokes.
	var browserKey string
	t.Run("DevTools and VNC through a node that does not run the sandbox", func(t *testing.T) {
		browserKey = browserRelaysThroughAnotherNode(t, a.node, c.node, "node-b", admin, st)
	})

	// An approval asked through a for c's sandbox, decided through b.
	approvalAcrossNodes(t, a.node, b.node, []node{a.node, b.node, c.node}, onC, key.Key, admin)

	// Figures: exec round trip through a forwarding node vs direct, and
	// creates per second through all three nodes.
	rtt := func(n node, sb string) time.Duration {
		const runs = 20
		t0 := time.Now()
		for range runs {
			n.ok("POST", "/v1/sandboxes/"+sb+"/exec", key.Key, map[string]any{"command": "true"}, 200, nil)
		}
		return time.Since(t0) / runs
	}
	direct, forwarded := rtt(b.node, onB), rtt(a.node, onB)
	t.Logf("exec round trip: direct %v, through a forwarding node %v (ratio %.2f)", direct, forwarded, float64(forwarded)/float64(direct))
	t0 := time.Now()
	var wg sync.WaitGroup
	const creates = 9
	for i := range creates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := []node{a.node, b.node, c.node}[i%3]
			var sb struct{ ID string }
			n.ok("POST", "/v1/sandboxes", admin, map[string]any{}, 201, &sb)
			n.ok("DELETE", "/v1/sandboxes/"+sb.ID, admin, nil, 200, nil)
		}()
	}
	wg.Wait()
	t.Logf("create+delete through 3 nodes: %d in %v (%.1f/s)", creates, time.Since(t0), creates/time.Since(t0).Seconds())

	// A revocation on c is refused through a. A key of its own: revoking
	// a key also stops its sandboxes, and the HALT below needs them.
	var doomed struct{ ID, Key string }
	a.ok("POST", "/v1/keys", admin, map[string]string{"name": "agent-2", "role": "agent"}, 201, &doomed)
	a.ok("GET", "/v1/sandboxes", doomed.Key, nil, 200, nil)
	c.ok("DELETE", "/v1/keys/"+doomed.ID, admin, nil, 200, nil)
	if st, _ := a.do("GET", "/v1/sandboxes", doomed.Key, nil); st != http.StatusUnauthorized {
		t.Fatalf("revoked key through a = %d", st)
	}

	// HALT on b freezes the sandboxes of every node.
	t0 = time.Now()
	b.ok("POST", "/v1/control/halt", admin, map[string]any{"reason": "incident"}, 200, nil)
	for name, id := range where {
		testenv.Eventually(t, "HALT reaches "+name, func() bool {
			var info struct{ State string }
			a.ok("GET", "/v1/sandboxes/"+id, admin, nil, 200, &info)
			return info.State == "paused"
		})
		d := time.Since(t0)
		t.Logf("HALT on b: sandbox on %s frozen after %v", name, d)
	}
	a.ok("POST", "/v1/control/unhalt", admin, nil, 200, nil)

	// c is killed (SIGKILL: no drain, no goodbye): its sandbox is reported
	// lost while a and b serve.
	if code, _ := c.raw("GET", "/readyz", "", nil, nil); code != 200 {
		t.Fatalf("c not ready: %d", code)
	}
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-c.exited
	t0 = time.Now()
	// At once: c's sandbox is never silently missing from the list: c is
	// named as not answering until it counts as dead, then its sandbox is
	// listed as lost.
	if items, unanswered := listThrough(t, a.node, key.Key); items[onC] == "" && !slices.Contains(unanswered, "node-c") {
		t.Fatalf("right after c died, the list through a neither has c's sandbox nor names c: %v %v", items, unanswered)
	}
	testenv.Eventually(t, "c's sandbox lost", func() bool {
		code, body := a.raw("GET", "/v1/sandboxes/"+onC, admin, nil, nil)
		return code == 503 && strings.Contains(body, "sandbox lost")
	})
	d := time.Since(t0)
	t.Logf("node c killed: its sandbox reported lost after %v (dead after %v without a heartbeat)", d, cluster.DeadAfter)
	for _, n := range []node{a.node, b.node} {
		items, unanswered := listThrough(t, n, key.Key)
		if items[onC] != "lost@node-c" || items[onB] == "" || items[where["node-a"]] == "" || len(items) != 3 || len(unanswered) != 0 {
			t.Fatalf("list through %s after c died = %v (unanswered %v), want c's sandbox lost and the others", n.base, items, unanswered)
		}
	}
	testenv.Eventually(t, "b serves after the unhalt", func() bool {
		code, _ := a.raw("GET", "/v1/sandboxes/"+onB, admin, nil, nil)
		return code == 200
	})
	a.ok("POST", "/v1/sandboxes/"+onB+"/exec", admin, map[string]any{"command": "echo still"}, 200, nil)
	b.ok("POST", "/v1/sandboxes/"+where["node-a"]+"/exec", admin, map[string]any{"command": "echo still"}, 200, nil)
	// The audit of the killed node's work is intact: one chain, verified.
	var ver struct {
		OK bool `json:"ok"`
	}
	a.ok("GET", "/v1/audit/verify", admin, nil, 200, &ver)
	if !ver.OK {
		t.Fatal("audit chain broken after a node was killed")
	}

	// c comes back on its data dir: its sandbox manager reaps what the
	// killed run left (cgroups and their processes; TestKill9UnderLoad in
	// internal/daemon proves that part) and serves the sandbox again from
	// its record, workspace intact.
	c = startChildNode(t, cfgC, logC)
	testenv.Eventually(t, "c back", func() bool {
		code, _ := a.raw("GET", "/v1/sandboxes/"+onC, admin, nil, nil)
		return code == 200
	})
	a.ok("POST", "/v1/sandboxes/"+onC+"/exec", admin, map[string]any{"command": "cat /workspace/big.bin | wc -c"}, 200, &res)
	if strings.TrimSpace(res.Stdout) != fmt.Sprint(len(payload)) {
		t.Fatalf("c's workspace after restart: %q", res.Stdout)
	}

	// SIGTERM drains: c reports itself draining before it exits.
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-c.exited
	ns, err := st.Nodes(context.Background())
	if err != nil || len(ns) != 3 || ns[2].Name != "node-c" || !ns[2].Draining {
		t.Fatalf("after SIGTERM c is not marked draining: %+v %v", ns, err)
	}

	// No node logged a client's key, a ticket or the cluster secret, at
	// debug level: neither the node a request came in through, nor the node
	// it was forwarded to, nor the node that revoked a key.
	cLog, err := os.ReadFile(logC)
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{"admin key": admin, "agent key": key.Key, "revoked key": doomed.Key, "cluster secret": secret}
	if browserKey != "" {
		secrets["browser key"] = browserKey
	}
	for name, log := range map[string]string{"a": logA.String(), "b": logB.String(), "c": string(cLog)} {
		if len(log) == 0 {
			t.Fatalf("node %s logged nothing: the search below would prove nothing", name)
		}
		for what, s := range secrets {
			if strings.Contains(log, s) {
				t.Errorf("node %s's log holds the %s", name, what)
			}
		}
	}
}

// listThrough lists key's sandboxes through n: id → "state@node", and the
// nodes named as not answering.
func listThrough(t *testing.T, n node, key string) (map[string]string, []string) {
	t.Helper()
	req, err := http.NewRequest("GET", n.base+"/v1/sandboxes", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	var env struct {
		Data []struct{ ID, State, Node string }
	}
	if err := json.NewDecoder(res.Body).Decode(&env); err != nil || res.StatusCode != 200 {
		t.Fatalf("list through %s: %d %v", n.base, res.StatusCode, err)
	}
	items := map[string]string{}
	for _, s := range env.Data {
		items[s.ID] = s.State + "@" + s.Node
	}
	return items, res.Header.Values(cluster.HeaderUnanswered)
}

// wsTerminal opens the AIO terminal WebSocket of sandbox id through n,
// types a command and waits for its output.
func wsTerminal(t *testing.T, n node, id, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h := http.Header{}
	h.Set("Authorization", "Bearer "+key)
	conn, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(n.base, "http")+"/sandboxes/"+id+"/v1/shell/ws", &websocket.DialOptions{HTTPHeader: h})
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		t.Fatalf("terminal through %s: %v", n.base, err)
	}
	defer func() { _ = conn.CloseNow() }()
	in, _ := json.Marshal(map[string]any{"type": "input", "data": "echo ws-$((6*7))\n"})
	if err := conn.Write(ctx, websocket.MessageText, in); err != nil {
		t.Fatal(err)
	}
	var seen strings.Builder
	for !strings.Contains(seen.String(), "ws-42") {
		_, b, err := conn.Read(ctx)
		if err != nil {
			t.Fatalf("terminal read (seen %q): %v", seen.String(), err)
		}
		var m struct {
			Type string
			Data json.RawMessage
		}
		if json.Unmarshal(b, &m) == nil && m.Type == "output" {
			var s string
			_ = json.Unmarshal(m.Data, &s)
			seen.WriteString(s)
		}
	}
}
