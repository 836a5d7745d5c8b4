package daemon_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"

	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/daemon/daemontest"
	"github.com/sandhold/sandhold/internal/posture"
)

// The README's examples, run as written.
//
// Every curl command in the sh blocks of README.md and the docs/ pages
// (readmeFiles, in that order: the pages set up B, KEY, H and J, and later
// pages use sandboxes and ids earlier ones made) is parsed with a real
// shell parser (mvdan.cc/sh), its words expanded with the variables the
// pages set up and performed against a real server with default settings
// (rate limits on), in order. A JSON body must be valid
// JSON and be accepted: 2xx and "success": true, unless the README's next
// line shows the answer as `# {"success":false…`. The few things the
// README leaves to the reader (an id "from the answer") are filled in from
// earlier answers; each such placeholder, and each example that cannot
// succeed on a fresh server, is listed below against the README's exact
// text, and the test fails if that text is gone — so the README and the
// server cannot drift apart unnoticed.

// readmeFiles are the pages whose examples run, in the order they run;
// a docs page with a curl example that is not listed fails the test.
var readmeFiles = []string{"README.md", "docs/cli.md", "docs/api.md", "docs/aio.md", "docs/network.md", "docs/browser.md",
	"docs/policy.md", "docs/artifacts.md", "docs/mcp.md", "docs/cluster.md"}

// readmeExpect lists README lines (a substring of the curl command as
// written) whose answer on a fresh server is not a 2xx, with the status
// and why.
var readmeExpect = []struct {
	text   string
	status int
	why    string
}{
	{"/v1/approvals/<id>/approve", http.StatusNotFound, "a fresh server has no pending approval to approve"},
}

// readmeComputed are the README's shell variables computed by commands the
// test does not run; the test computes them from the artifact it uploads.
var readmeComputed = map[string]string{
	"N":   "$(stat -c %s $F)",
	"SUM": "$(sha256sum $F | cut -d' ' -f1)",
	// The client CLI's lines are not curl examples; cmd/sandhold's
	// client tests run those commands against a real server.
	"CID": "$(sandhold exec -d demo -- make -j2)",
}

// readmeData is the content of the README's data.bin.
var readmeData = bytes.Repeat([]byte("sandhold readme artifact\n"), 40)

type readmeRun struct {
	t *testing.T
	// file is the page being run (messages name it with the line).
	file   string
	env    map[string]string
	client *http.Client
	// Answers the README tells the reader to copy from.
	keyID, commandID string
}

func TestReadmeExamplesRunAsWritten(t *testing.T) {
	var blocks []shBlock
	var all strings.Builder
	listed := map[string]bool{}
	for _, name := range readmeFiles {
		src, err := os.ReadFile(filepath.Join("..", "..", name))
		if err != nil {
			t.Fatal(err)
		}
		listed[name] = true
		all.Write(src)
		for _, b := range shBlocks(string(src)) {
			b.file = name
			blocks = append(blocks, b)
		}
	}
	pages, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		name := "docs/" + filepath.Base(p)
		if listed[name] {
			continue
		}
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range shBlocks(string(src)) {
			if regexp.MustCompile(`(?m)^\s*curl `).MatchString(b.text) {
				t.Errorf("%s has curl examples but is not in readmeFiles: add it where its examples can run", name)
				break
			}
		}
	}
	readme := all.String()
	for _, e := range readmeExpect {
		if !strings.Contains(readme, e.text) {
			t.Errorf("readmeExpect lists %q, which the README no longer holds: update the table", e.text)
		}
	}
	for name, cmd := range readmeComputed {
		if !strings.Contains(readme, name+"="+cmd) {
			t.Errorf("readmeComputed lists %s=%s, which the README no longer holds: update the table", name, cmd)
		}
	}
	if len(blocks) == 0 {
		t.Fatal("no sh blocks found in README.md and docs/")
	}
	d := daemontest.Start(t, func(c *config.Config) {
		c.DisableRateLimit = false
		c.PreviewPorts, _ = config.ParsePorts(config.DefaultPreviewPorts)
	})
	sum := sha256.Sum256(readmeData)
	r := &readmeRun{t: t, client: &http.Client{Timeout: 2 * time.Minute}, env: map[string]string{
		"B":   "http://" + d.Addr(),
		"KEY": d.AdminKey(),
		"N":   strconv.Itoa(len(readmeData)),
		"SUM": hex.EncodeToString(sum[:]),
	}}
	ran := 0
	for _, b := range blocks {
		f, err := syntax.NewParser().Parse(strings.NewReader(b.text), b.file)
		if err != nil {
			t.Fatalf("%s: sh block at line %d does not parse: %v", b.file, b.line, err)
		}
		lines := strings.Split(b.text, "\n")
		r.file = b.file
		for _, st := range f.Stmts {
			ran += r.stmt(st, b.line, lines)
		}
	}
	if ran < 30 {
		t.Fatalf("ran %d curl examples; the README holds more (the parser lost some)", ran)
	}
	t.Logf("ran %d README curl examples", ran)
}

type shBlock struct {
	file string // the page
	line int    // the page's line of the block's first line
	text string
}

// shBlocks returns the ```sh blocks of a markdown text.
func shBlocks(md string) []shBlock {
	var out []shBlock
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```sh" {
			continue
		}
		start := i + 1
		j := start
		for j < len(lines) && strings.TrimSpace(lines[j]) != "```" {
			j++
		}
		out = append(out, shBlock{line: start + 1, text: strings.Join(lines[start:j], "\n")})
		i = j
	}
	return out
}

// stmt runs the curl commands of one statement and records its simple
// assignments; it returns how many curls ran.
func (r *readmeRun) stmt(st *syntax.Stmt, blockLine int, lines []string) int {
	t := r.t
	line := blockLine + int(st.Pos().Line()) - 1
	text := lines[st.Pos().Line()-1]
	// The README's comment right after the command shows the answer.
	next := ""
	if end := int(st.End().Line()); end < len(lines) {
		next = strings.TrimSpace(lines[end])
	}
	var curls []*syntax.CallExpr
	pipedFromTail := false
	syntax.Walk(st, func(n syntax.Node) bool {
		if c, ok := n.(*syntax.CallExpr); ok && len(c.Args) > 0 {
			switch c.Args[0].Lit() {
			case "curl":
				curls = append(curls, c)
			case "tail":
				pipedFromTail = true
			}
		}
		return true
	})
	if len(curls) == 0 {
		if call, ok := st.Cmd.(*syntax.CallExpr); ok && len(call.Args) == 0 {
			for _, a := range call.Assigns {
				r.assign(a, line)
			}
		}
		return 0
	}
	if len(st.Redirs) > 0 {
		// An unquoted <placeholder> is a redirection to a shell.
		t.Errorf("%s:%d: a shell reads this command as a redirection (quote the URL): %s", r.file, line, text)
		return 1
	}
	if len(curls) > 1 {
		t.Fatalf("%s:%d: %d curls in one statement; the test runs one", r.file, line, len(curls))
	}
	assignTo, header := "", ""
	if call, ok := st.Cmd.(*syntax.CallExpr); ok && len(call.Args) == 0 && len(call.Assigns) == 1 {
		assignTo = call.Assigns[0].Name.Value
		m := regexp.MustCompile(`s/\^([A-Za-z-]+): //p`).FindStringSubmatch(text + strings.Join(lines[st.Pos().Line():st.End().Line()], "\n"))
		if m == nil {
			t.Fatalf("%s:%d: %s=$(curl …) without a sed that picks a header", r.file, line, assignTo)
		}
		header = m[1]
	}
	resp := r.curl(curls[0], line, pipedFromTail)
	if assignTo != "" {
		v := resp.header.Get(header)
		if v == "" {
			t.Fatalf("%s:%d: answer %d has no %s header: %s", r.file, line, resp.status, header, resp.body)
		}
		r.env[assignTo] = v
	}
	r.judge(resp, line, text, next)
	return 1
}

// assign records VAR=literal; SB=sb… (an id the reader copies) is set from
// answers instead, and computed values must be known to readmeComputed.
func (r *readmeRun) assign(a *syntax.Assign, line int) {
	name := a.Name.Value
	if a.Value == nil {
		return
	}
	if _, ok := readmeComputed[name]; ok {
		return
	}
	switch name {
	case "SB":
		return // set from the create answer, as the README says
	case "B", "KEY":
		return // the test's server and its admin key
	}
	v, err := expand.Literal(r.expandCfg(), a.Value)
	if err != nil {
		r.t.Fatalf("%s:%d: cannot evaluate %s=…: %v (add it to readmeComputed?)", r.file, line, name, err)
	}
	r.env[name] = v
}

func (r *readmeRun) expandCfg() *expand.Config {
	var kv []string
	for k, v := range r.env {
		kv = append(kv, k+"="+v)
	}
	return &expand.Config{Env: expand.ListEnviron(kv...), NoUnset: true}
}

type readmeResp struct {
	method, url string
	status      int
	header      http.Header
	body        []byte
}

// curl performs one curl command line the way curl would.
func (r *readmeRun) curl(c *syntax.CallExpr, line int, pipedFromTail bool) readmeResp {
	t := r.t
	var args []string
	for _, w := range c.Args[1:] {
		s, err := expand.Literal(r.expandCfg(), w)
		if err != nil {
			t.Fatalf("%s:%d: cannot expand a curl word: %v", r.file, line, err)
		}
		args = append(args, s)
	}
	method, url := "", ""
	var body []byte
	hasBody := false
	headers := http.Header{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		needArg := func() string {
			if i+1 >= len(args) {
				t.Fatalf("%s:%d: %s without its argument", r.file, line, a)
			}
			i++
			return args[i]
		}
		switch {
		case a == "-X":
			method = needArg()
		case a == "-H":
			k, v, ok := strings.Cut(needArg(), ":")
			if !ok {
				t.Fatalf("%s:%d: malformed header %q", r.file, line, args[i])
			}
			headers.Add(strings.TrimSpace(k), strings.TrimSpace(v))
		case a == "-d":
			body, hasBody = []byte(needArg()), true
			if method == "" {
				method = http.MethodPost
			}
		case a == "-T":
			if needArg() != "-" || !pipedFromTail {
				t.Fatalf("%s:%d: -T other than stdin from `tail -c +$((OFF+1)) $F`", r.file, line)
			}
			off, err := strconv.Atoi(r.env["OFF"])
			if err != nil || off > len(readmeData) {
				t.Fatalf("%s:%d: OFF=%q", r.file, line, r.env["OFF"])
			}
			body, hasBody = readmeData[off:], true
			if method == "" {
				method = http.MethodPut
			}
		case strings.HasPrefix(a, "-") && len(a) > 1:
			// Flags without arguments: s (silent), N (no buffering), i
			// (headers in the output), I (HEAD).
			for _, f := range a[1:] {
				switch f {
				case 's', 'N', 'i':
				case 'I':
					method = http.MethodHead
				default:
					t.Fatalf("%s:%d: curl flag -%c the test does not know", r.file, line, f)
				}
			}
		default:
			if url != "" {
				t.Fatalf("%s:%d: two URLs (%q, %q)", r.file, line, url, a)
			}
			url = a
		}
	}
	if method == "" {
		method = http.MethodGet
	}
	url = r.fill(url, line)
	if hasBody && headers.Get("Content-Type") == "application/json" && !json.Valid(body) {
		t.Fatalf("%s:%d: the -d body is not valid JSON: %s", r.file, line, body)
	}
	if hasBody && headers.Get("Content-Type") == "" {
		headers.Set("Content-Type", "application/x-www-form-urlencoded") // curl's default for -d
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var rd io.Reader
	if hasBody {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatalf("%s:%d: %v", r.file, line, err)
	}
	req.Header = headers
	resp, err := r.client.Do(req)
	if err != nil {
		t.Fatalf("%s:%d: %s %s: %v", r.file, line, method, url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return readmeResp{method: method, url: url, status: resp.StatusCode, header: resp.Header, body: b}
}

// fill replaces what the README leaves to the reader with earlier answers.
func (r *readmeRun) fill(url string, line int) string {
	for ph, val := range map[string]string{"key_…": r.keyID, "<command_id>": r.commandID} {
		if strings.Contains(url, ph) {
			if val == "" {
				r.t.Fatalf("%s:%d: %s before any answer gave one", r.file, line, ph)
			}
			url = strings.ReplaceAll(url, ph, val)
		}
	}
	if strings.Contains(url, "<id>") {
		url = strings.ReplaceAll(url, "<id>", "apr_none")
	}
	if strings.Contains(url, "…") || strings.Contains(url, "<") {
		r.t.Fatalf("%s:%d: URL %q holds a placeholder the test cannot fill", r.file, line, url)
	}
	return url
}

// judge checks one answer and learns the ids the README says to copy.
func (r *readmeRun) judge(resp readmeResp, line int, text, next string) {
	t := r.t
	for _, e := range readmeExpect {
		if strings.Contains(text, e.text) {
			if resp.status != e.status {
				t.Errorf("%s:%d: %s %s = %d, want %d (%s): %s", r.file, line, resp.method, resp.url, resp.status, e.status, e.why, resp.body)
			}
			return
		}
	}
	wantSuccess := !strings.HasPrefix(next, `# {"success":false`)
	var env struct {
		Success *bool           `json:"success"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	isEnvelope := strings.HasPrefix(resp.header.Get("Content-Type"), "application/json") &&
		json.Unmarshal(resp.body, &env) == nil && env.Success != nil
	switch {
	case !wantSuccess:
		if resp.status < 400 || (isEnvelope && *env.Success) {
			t.Errorf("%s:%d: %s %s = %d, the README shows a failure: %s", r.file, line, resp.method, resp.url, resp.status, resp.body)
		}
		return
	case resp.status < 200 || resp.status > 299:
		t.Errorf("%s:%d: %s %s = %d: %.300s", r.file, line, resp.method, resp.url, resp.status, resp.body)
		return
	case isEnvelope && !*env.Success:
		t.Errorf("%s:%d: %s %s answered success:false: %.300s", r.file, line, resp.method, resp.url, resp.body)
		return
	}
	if !isEnvelope {
		return
	}
	var data struct {
		ID        string         `json:"id"`
		CommandID string         `json:"command_id"`
		Host      posture.Report `json:"host"`
	}
	_ = json.Unmarshal(env.Data, &data)
	path := strings.TrimPrefix(resp.url, r.env["B"])
	switch {
	case resp.method == http.MethodPost && path == "/v1/keys":
		r.keyID = data.ID
	case resp.method == http.MethodPost && path == "/v1/sandboxes":
		r.env["SB"] = data.ID // "SB=sb…   # the id from the answer"
	case data.CommandID != "":
		r.commandID = data.CommandID
	case path == "/v1/sandbox/security":
		// The cgroup namespace as a real command saw it (issue 10.2).
		found := false
		for _, c := range data.Host.Checks {
			if c.Name == posture.CgroupNSCommand {
				found = true
				if !c.OK {
					t.Errorf("%s:%d: %s: %s", r.file, line, c.Name, c.Detail)
				}
			}
		}
		if !found {
			t.Errorf("%s:%d: the security report has no %q row", r.file, line, posture.CgroupNSCommand)
		}
	}
}
