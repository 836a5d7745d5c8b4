package e2b_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/daemon"
	"github.com/sandhold/sandhold/internal/daemon/daemontest"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// contentDomain is the content origin of the test server: getHost(port)
// names {port}-{id}.sandbox.test (the script connects to the server with
// that Host; no DNS is needed).
const contentDomain = "sandbox.test"

// sdkDir finds test/e2b-ts from the module root.
func sdkDir(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for range 32 { // the module root is a few levels up; 32 bounds the walk
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "test", "e2b-ts")
		}
		dir = filepath.Dir(dir)
	}
	t.Fatal("no go.mod above the working directory")
	return ""
}

// requireSDK skips unless node and the npm packages are installed.
func requireSDK(t *testing.T) (node, dir string) {
	t.Helper()
	daemontest.RequireSandboxes(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	dir = sdkDir(t)
	for _, p := range []string{"node_modules/e2b", "node_modules/@e2b/code-interpreter"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Skipf("%s is not installed: run `make deps` (npm ci in test/e2b-ts)", p)
		}
	}
	return node, dir
}

// result is what the script prints for one case.
type result struct {
	Case   string          `json:"case"`
	OK     bool            `json:"ok"`
	Detail json.RawMessage `json:"detail"`
	Error  string          `json:"error"`
}

// sdkRun runs the script's cases with key's E2B environment and returns
// their results by name; a case that did not print one fails the test.
func sdkRun(t *testing.T, node, dir string, d *daemon.Daemon, key string, extra []string, cases ...string) map[string]result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"sdk.mjs"}, cases...)...)
	cmd.Dir = dir
	base := "http://" + d.Addr()
	cmd.Env = append(os.Environ(),
		"E2B_API_URL="+base+"/e2b", "E2B_SANDBOX_URL="+base+"/e2b/sandbox", "E2B_API_KEY="+key,
		"E2B_TEST_CONTENT_DOMAIN="+contentDomain+":"+portOf(d.Addr()))
	cmd.Env = append(cmd.Env, extra...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	out := map[string]result{}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r result
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.Case != "" {
			out[r.Case] = r
		}
	}
	for _, c := range cases {
		if _, ok := out[c]; !ok {
			t.Fatalf("case %s printed no result (node: %v)\nstdout: %s\nstderr: %s", c, err, stdout.String(), stderr.String())
		}
	}
	return out
}

func portOf(addr string) string {
	_, p, _ := strings.Cut(addr, ":")
	return p
}

// check fails t unless the case passed.
func check(t *testing.T, r result) {
	t.Helper()
	if !r.OK {
		t.Fatalf("%s: %s", r.Case, r.Error)
	}
	t.Logf("%s: %s", r.Case, r.Detail)
}

// TestOfficialSDKs drives the unmodified npm packages e2b and
// @e2b/code-interpreter (test/e2b-ts, pinned by its lock file) against a
// real server: E2B's quick start and code-interpreter examples as
// written, then every public SDK method sandhold serves (docs/e2b.md has
// the table naming each case). Each subtest is one case of sdk.mjs.
func TestOfficialSDKs(t *testing.T) {
	node, dir := requireSDK(t)
	d := daemontest.Start(t, func(c *config.Config) {
		c.ContentDomain = contentDomain
		c.PreviewPorts = []uint16{8005}
		c.EnableSudo = true
	})
	admin := daemontest.NewClient(t, d)
	a := admin.NewKey("e2b-agent", "agent")
	b := admin.NewKey("e2b-other", "agent")
	cases := []string{"docs.quickstart", "docs.streaming", "ci.streams_while_running", "docs.charts", "ci.results_and_errors",
		"ci.contexts", "sandbox.lifecycle", "sandbox.autopause", "sandbox.list", "sandbox.unsupported", "snapshots", "sandbox.network", "commands.run",
		"commands.background", "pty", "files", "files.watch", "files.urls", "gethost", "git", "tenant"}
	res := sdkRun(t, node, dir, d, a.Key, []string{"E2B_OTHER_KEY=" + b.Key}, cases...)
	for _, c := range cases {
		t.Run(c, func(t *testing.T) { check(t, res[c]) })
	}
	// Every call was a dispatched tool of the key: the audit has them.
	for _, action := range []string{"sandbox.create", "e2b.process_start", "shell.input", "e2b.process_input", "file.upload",
		"file.download", "e2b.fs_list", "code.execute", "code.session.create", "e2b.connect", "e2b.set_timeout", "file.watch_create",
		"sandbox.hibernate", "sandbox.pause", "snapshot.create", "snapshot.list", "snapshot.fork", "snapshot.delete"} {
		r := admin.Do("GET", "/v1/audit?action="+action+"&actor="+a.ID, nil)
		if r.Status != http.StatusOK || !strings.Contains(string(r.Raw), `"action":"`+action+`"`) {
			t.Errorf("no audit record of %s by the E2B key: %d %.300s", action, r.Status, r.Raw)
		}
	}
}

// TestSDKApprovalsAndHalt: a call the policy sends to an operator answers
// the SDK's server-side refusal naming the approval, and runs once
// approved; while the server is halted every E2B call is refused.
func TestSDKApprovalsAndHalt(t *testing.T) {
	node, dir := requireSDK(t)
	d := daemontest.Start(t, nil)
	admin := daemontest.NewClient(t, d)
	a := admin.NewKey("e2b-agent", "agent")

	res := sdkRun(t, node, dir, d, a.Key, nil, "approval.wait")
	check(t, res["approval.wait"])
	var wait struct {
		Sandbox, Approval string
	}
	if err := json.Unmarshal(res["approval.wait"].Detail, &wait); err != nil {
		t.Fatal(err)
	}
	admin.JSON("POST", "/v1/approvals/"+wait.Approval+"/approve", map[string]any{}, http.StatusOK, nil)
	check(t, sdkRun(t, node, dir, d, a.Key, []string{"E2B_TEST_SANDBOX=" + wait.Sandbox}, "approval.run")["approval.run"])

	prep := sdkRun(t, node, dir, d, a.Key, nil, "halt.prepare")["halt.prepare"]
	check(t, prep)
	var sb struct{ Sandbox, Token string }
	if err := json.Unmarshal(prep.Detail, &sb); err != nil {
		t.Fatal(err)
	}
	admin.JSON("POST", "/v1/control/halt", map[string]any{"reason": "e2b test"}, http.StatusOK, nil)
	check(t, sdkRun(t, node, dir, d, a.Key, []string{"E2B_TEST_SANDBOX=" + sb.Sandbox, "E2B_TEST_TOKEN=" + sb.Token}, "halt.refused")["halt.refused"])
	admin.JSON("POST", "/v1/control/unhalt", map[string]any{}, http.StatusOK, nil)
	r := admin.Do("GET", "/v1/audit?action=e2b.process_start&actor="+a.ID, nil)
	if !strings.Contains(string(r.Raw), `"reason":"halted"`) && !strings.Contains(string(r.Raw), `halted`) {
		t.Errorf("no refused e2b.process_start record while halted: %.1000s", r.Raw)
	}
}

// TestSDKRateLimits: a key's own limit (command=2/m) refuses its third
// command with the SDK's RateLimitError.
func TestSDKRateLimits(t *testing.T) {
	node, dir := requireSDK(t)
	rules, err := ratelimit.ParseRules("command=600/m,manage=600/m,read=600/m,file=600/m,code=600/m")
	if err != nil {
		t.Fatal(err)
	}
	d := daemontest.Start(t, func(c *config.Config) { c.DisableRateLimit, c.RateLimits = false, rules })
	admin := daemontest.NewClient(t, d)
	var k daemontest.Key
	admin.JSON("POST", "/v1/keys", map[string]any{"name": "limited", "role": "agent", "rate_limits": "command=2/m"}, http.StatusCreated, &k)
	check(t, sdkRun(t, node, dir, d, k.Key, nil, "ratelimit")["ratelimit"])
}
