package workspace_test

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/config"
)

// TestFileRoutes drives every JSON file route through the real server, on
// the default sandbox (/v1/file/...) and on a named one
// (/sandboxes/{id}/v1/file/...), and validates every response against
// AIO's OpenAPI schemas.
func TestFileRoutes(t *testing.T) {
	s := start(t, nil)
	id := s.newSandbox()
	for _, prefix := range []string{"", "/sandboxes/" + id} {
		t.Run("prefix="+prefix, func(t *testing.T) {
			s.t = t
			call := func(route string, body any) reply {
				t.Helper()
				return s.do("POST", prefix+"/v1/file/"+route, body, "/v1/file/"+route)
			}
			ok := func(r reply) {
				t.Helper()
				if r.status != http.StatusOK || !r.env.Success {
					t.Fatalf("status %d: %s", r.status, r.raw)
				}
			}
			data := func(r reply, v any) {
				t.Helper()
				ok(r)
				if err := json.Unmarshal(r.env.Data, v); err != nil {
					t.Fatal(err)
				}
			}

			// write: text with newlines, then append, then base64.
			var wr struct {
				File         string `json:"file"`
				BytesWritten int    `json:"bytes_written"`
			}
			data(call("write", map[string]any{"file": "/workspace/p/a.txt", "content": "one\ntwo", "trailing_newline": true}), &wr)
			if wr.BytesWritten != 8 || wr.File != "/workspace/p/a.txt" {
				t.Fatalf("write = %+v", wr)
			}
			ok(call("write", map[string]any{"file": "/workspace/p/a.txt", "content": "three", "append": true, "leading_newline": false}))
			ok(call("write", map[string]any{"file": "/workspace/p/bin.dat", "content": base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 255}), "encoding": "base64"}))

			var rd struct {
				Content string `json:"content"`
			}
			data(call("read", map[string]any{"file": "/workspace/p/a.txt"}), &rd)
			if rd.Content != "one\ntwo\nthree" {
				t.Fatalf("read = %q", rd.Content)
			}
			data(call("read", map[string]any{"file": "/workspace/p/a.txt", "start_line": 1, "end_line": 2}), &rd)
			if rd.Content != "two\n" {
				t.Fatalf("read lines [1,2) = %q", rd.Content)
			}
			// Binary content is not text: decode_error.
			if r := call("read", map[string]any{"file": "/workspace/p/bin.dat"}); r.status != http.StatusOK || r.env.Success || r.fileError(t).ErrorType != "decode_error" {
				t.Fatalf("binary read: %d %s", r.status, r.raw)
			}
			if r := call("read", map[string]any{"file": "/workspace/p/none.txt"}); r.status != http.StatusOK || r.env.Success || r.fileError(t).ErrorType != "not_found" {
				t.Fatalf("missing read: %d %s", r.status, r.raw)
			}

			var rep struct {
				ReplacedCount int `json:"replaced_count"`
			}
			data(call("replace", map[string]any{"file": "/workspace/p/a.txt", "old_str": "t", "new_str": "T"}), &rep)
			if rep.ReplacedCount != 2 {
				t.Fatalf("replaced %d, want 2", rep.ReplacedCount)
			}
			var se struct {
				Matches     []string `json:"matches"`
				LineNumbers []int    `json:"line_numbers"`
			}
			data(call("search", map[string]any{"file": "/workspace/p/a.txt", "regex": "^T"}), &se)
			if len(se.Matches) != 2 || se.LineNumbers[0] != 1 || se.LineNumbers[1] != 2 {
				t.Fatalf("search = %+v", se)
			}

			ok(call("write", map[string]any{"file": "/workspace/p/src/main.go", "content": "package main\n// TODO: x\nfunc main() {}\n"}))
			ok(call("write", map[string]any{"file": "/workspace/p/src/util.py", "content": "# todo later\nx = 1\n"}))
			ok(call("write", map[string]any{"file": "/workspace/p/.hidden/secret.go", "content": "// TODO hidden\n"}))

			var fr struct {
				Files []string `json:"files"`
			}
			data(call("find", map[string]any{"path": "/workspace/p", "glob": "*.go"}), &fr)
			if strings.Join(fr.Files, ",") != "/workspace/p/.hidden/secret.go,/workspace/p/src/main.go" {
				t.Fatalf("find = %v", fr.Files)
			}

			var gr struct {
				Matches []struct {
					File          string   `json:"file"`
					LineNumber    int      `json:"line_number"`
					LineContent   string   `json:"line_content"`
					ContextBefore []string `json:"context_before"`
				} `json:"matches"`
				MatchCount int  `json:"match_count"`
				Truncated  bool `json:"truncated"`
			}
			data(call("grep", map[string]any{"path": "/workspace/p", "pattern": "todo", "case_insensitive": true, "context_before": 1}), &gr)
			if gr.MatchCount != 2 || gr.Matches[0].File != "/workspace/p/src/main.go" || gr.Matches[0].LineNumber != 2 ||
				gr.Matches[0].ContextBefore[0] != "package main" {
				t.Fatalf("grep = %+v", gr)
			}
			data(call("grep", map[string]any{"path": "/workspace/p", "pattern": "TODO", "include": []string{"*.py"}}), &gr)
			if gr.MatchCount != 0 {
				t.Fatalf("grep include *.py, case-sensitive = %+v", gr)
			}
			data(call("grep", map[string]any{"path": "/workspace/p", "pattern": "o", "max_results": 1}), &gr)
			if len(gr.Matches) != 1 || !gr.Truncated {
				t.Fatalf("grep max_results 1 = %+v", gr)
			}
			data(call("grep", map[string]any{"path": "/workspace/p", "pattern": "main", "type": "go"}), &gr)
			if gr.MatchCount != 2 {
				t.Fatalf("grep type go = %+v", gr)
			}

			var gl struct {
				Files []struct {
					Path string `json:"path"`
					Size *int64 `json:"size"`
				} `json:"files"`
				TotalCount int `json:"total_count"`
			}
			data(call("glob", map[string]any{"path": "/workspace/p", "pattern": "**/*.go"}), &gl)
			if gl.TotalCount != 1 || gl.Files[0].Path != "/workspace/p/src/main.go" || gl.Files[0].Size == nil {
				t.Fatalf("glob (hidden excluded) = %+v", gl)
			}
			data(call("glob", map[string]any{"path": "/workspace/p", "pattern": "**/*", "include_hidden": true, "sort_by": "size", "sort_desc": true}), &gl)
			if gl.TotalCount != 5 || gl.Files[0].Path != "/workspace/p/src/main.go" {
				t.Fatalf("glob by size = %+v", gl)
			}

			var ls struct {
				Files []struct {
					Name        string  `json:"name"`
					IsDirectory bool    `json:"is_directory"`
					Permissions *string `json:"permissions"`
				} `json:"files"`
				TotalCount, DirectoryCount, FileCount int
			}
			data(call("list", map[string]any{"path": "/workspace/p", "include_permissions": true}), &ls)
			names := []string{}
			for _, f := range ls.Files {
				names = append(names, f.Name)
			}
			if strings.Join(names, ",") != ".hidden,a.txt,bin.dat,src" || ls.Files[1].Permissions == nil {
				t.Fatalf("list = %v %+v", names, ls)
			}
			data(call("list", map[string]any{"path": "/workspace/p", "recursive": true, "show_hidden": false, "file_types": []string{".go"}}), &ls)
			if len(ls.Files) != 1 || ls.Files[0].Name != "main.go" {
				t.Fatalf("list recursive .go = %+v", ls)
			}

			// str_replace_editor: create, view, str_replace, insert, undo.
			type ed struct {
				Output    string  `json:"output"`
				PrevExist bool    `json:"prev_exist"`
				New       *string `json:"new_content"`
			}
			var e ed
			data(call("str_replace_editor", map[string]any{"command": "create", "path": "/workspace/p/e.py", "file_text": "a = 1\nb = 2\n"}), &e)
			if e.PrevExist {
				t.Fatal("create: prev_exist")
			}
			if r := call("str_replace_editor", map[string]any{"command": "create", "path": "/workspace/p/e.py", "file_text": "x"}); r.status != http.StatusOK || r.env.Success || r.fileError(t).ErrorType != "already_exists" {
				t.Fatalf("create over a file: %d %s", r.status, r.raw)
			}
			data(call("str_replace_editor", map[string]any{"command": "str_replace", "path": "/workspace/p/e.py", "old_str": "b = 2", "new_str": "b = 3"}), &e)
			if *e.New != "a = 1\nb = 3\n" || !strings.Contains(e.Output, "has been edited") {
				t.Fatalf("str_replace = %+v", e)
			}
			data(call("str_replace_editor", map[string]any{"command": "insert", "path": "/workspace/p/e.py", "insert_line": 1, "new_str": "c = 4"}), &e)
			if *e.New != "a = 1\nc = 4\nb = 3\n" {
				t.Fatalf("insert = %q", *e.New)
			}
			data(call("str_replace_editor", map[string]any{"command": "view", "path": "/workspace/p/e.py", "view_range": []int{2, 2}}), &e)
			if !strings.HasSuffix(e.Output, "     2\tc = 4\n") {
				t.Fatalf("view = %q", e.Output)
			}
			data(call("str_replace_editor", map[string]any{"command": "undo_edit", "path": "/workspace/p/e.py"}), &e)
			data(call("read", map[string]any{"file": "/workspace/p/e.py"}), &rd)
			if rd.Content != "a = 1\nb = 3\n" {
				t.Fatalf("after undo: %q", rd.Content)
			}
			if r := call("str_replace_editor", map[string]any{"command": "str_replace", "path": "/workspace/p/e.py", "old_str": "nope", "new_str": "x"}); r.status != http.StatusOK || r.env.Success {
				t.Fatalf("str_replace of a missing string: %d %s", r.status, r.raw)
			}
			data(call("str_replace_editor", map[string]any{"command": "view", "path": "/workspace/p"}), &e)
			if !strings.Contains(e.Output, "/workspace/p/src/main.go") || strings.Contains(e.Output, ".hidden") {
				t.Fatalf("view dir = %q", e.Output)
			}
		})
	}
	s.t = t

	// The routes are in the server's OpenAPI document.
	req, _ := http.NewRequest("GET", s.base+"/openapi.json", nil)
	req.Header.Set("Authorization", "Bearer "+s.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	for _, want := range []string{`"/v1/file/grep"`, `"/sandboxes/{id}/v1/file/str_replace_editor"`, `"/v1/file/watch/{watcher_id}/events"`} {
		if !strings.Contains(string(doc), want) {
			t.Fatalf("openapi.json (%d) lacks %s", resp.StatusCode, want)
		}
	}

	// Audit: one record per call, bytes written, never contents.
	recs, err := s.d.Audit().Query(t.Context(), audit.Filter{Action: "file.write"})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) < 10 {
		t.Fatalf("%d file.write records", len(recs))
	}
	for _, r := range recs {
		b, _ := json.Marshal(r)
		if strings.Contains(string(b), "TODO") || strings.Contains(string(b), "one\\ntwo") {
			t.Fatalf("audit record carries file contents: %s", b)
		}
		if r.Verdict == "allowed" && r.Detail["bytes_written"] == nil {
			t.Fatalf("audit record without bytes_written: %s", b)
		}
	}
}

// TestWatch covers create, poll, SSE events, wait and stop.
func TestWatch(t *testing.T) {
	s := start(t, nil)
	id := s.newSandbox()
	p := "/sandboxes/" + id + "/v1/file/"
	s.sh(id, "mkdir -p /workspace/w")
	r := s.do("POST", p+"watch", map[string]any{"path": "/workspace/w", "debounce": 50}, "/v1/file/watch")
	var info struct {
		WatcherID string `json:"watcher_id"`
	}
	if r.status != 200 || json.Unmarshal(r.env.Data, &info) != nil || info.WatcherID == "" {
		t.Fatalf("create watch: %d %s", r.status, r.raw)
	}
	// SSE: subscribe before the change.
	req, _ := http.NewRequestWithContext(t.Context(), "GET", s.base+p+"watch/"+info.WatcherID+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+s.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %v %v", err, resp)
	}
	defer func() { _ = resp.Body.Close() }()

	s.sh(id, "echo hi > /workspace/w/new.txt")
	r = s.do("POST", p+"watch/"+info.WatcherID+"/poll", map[string]any{"cursor": 0, "timeout": 10}, "/v1/file/watch/{watcher_id}/poll")
	var poll struct {
		Events []struct {
			Seq  int64  `json:"seq"`
			Type string `json:"type"`
			Path string `json:"path"`
		} `json:"events"`
		Cursor int64 `json:"cursor"`
	}
	if err := json.Unmarshal(r.env.Data, &poll); err != nil || len(poll.Events) != 1 || poll.Events[0].Type != "create" ||
		poll.Events[0].Path != "/workspace/w/new.txt" || poll.Cursor != poll.Events[0].Seq {
		t.Fatalf("poll: %s", r.raw)
	}
	// AIO's SSE shape: watch_started, then file_change with the id
	// {watcher_id}:{seq} and AIO's field names, times in epoch seconds.
	sc := bufio.NewScanner(resp.Body)
	var got []string
	for sc.Scan() && len(got) < 6 {
		if l := sc.Text(); strings.HasPrefix(l, "id: ") || strings.HasPrefix(l, "event: ") || strings.HasPrefix(l, "data: ") {
			got = append(got, l)
		}
	}
	if len(got) < 6 || got[0] != "id: "+info.WatcherID+":0" || got[1] != "event: watch_started" || !strings.Contains(got[2], info.WatcherID) ||
		got[3] != fmt.Sprintf("id: %s:%d", info.WatcherID, poll.Events[0].Seq) || got[4] != "event: file_change" {
		t.Fatalf("sse = %v", got)
	}
	var ev struct {
		Type         string   `json:"type"`
		Path         string   `json:"path"`
		RelativePath string   `json:"relative_path"`
		IsDir        *bool    `json:"is_dir"`
		Size         *int64   `json:"size"`
		Mtime        *float64 `json:"mtime"`
		Timestamp    *float64 `json:"timestamp"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(got[5], "data: ")), &ev); err != nil || ev.Type != "create" ||
		ev.Path != "/workspace/w/new.txt" || ev.RelativePath != "new.txt" || ev.IsDir == nil || *ev.IsDir ||
		ev.Size == nil || *ev.Size != 3 || ev.Mtime == nil || *ev.Mtime < 1e9 || ev.Timestamp == nil || *ev.Timestamp < *ev.Mtime-60 {
		t.Fatalf("file_change data = %s (%v)", got[5], err)
	}

	// wait: a write to the file that exists.
	done := make(chan reply, 1)
	go func() {
		done <- s.do("POST", p+"watch/wait", map[string]any{"path": "/workspace/w/new.txt", "timeout": 20, "event_types": []string{"write"}}, "/v1/file/watch/wait")
	}()
	// Append until the wait answers: its baseline may be taken after the
	// first append on a loaded machine.
	var wr reply
	for got := false; !got; {
		s.sh(id, "echo more >> /workspace/w/new.txt")
		select {
		case wr = <-done:
			got = true
		case <-time.After(300 * time.Millisecond):
		}
	}
	var wait struct {
		Matched bool `json:"matched"`
		Event   struct {
			Type string `json:"type"`
		} `json:"event"`
	}
	if json.Unmarshal(wr.env.Data, &wait) != nil || !wait.Matched || wait.Event.Type != "write" {
		t.Fatalf("wait: %s", wr.raw)
	}

	r = s.do("GET", p+"watch", nil, "/v1/file/watch")
	if !strings.Contains(string(r.raw), info.WatcherID) {
		t.Fatalf("list: %s", r.raw)
	}
	r = s.do("DELETE", p+"watch/"+info.WatcherID, nil, "/v1/file/watch/{watcher_id}")
	if r.status != 200 {
		t.Fatalf("stop: %d %s", r.status, r.raw)
	}
	r = s.do("POST", p+"watch/"+info.WatcherID+"/poll", map[string]any{}, "/v1/file/watch/{watcher_id}/poll")
	if r.status != http.StatusOK || r.env.Success || r.fileError(t).ErrorType != "not_found" {
		t.Fatalf("poll after stop: %d %s", r.status, r.raw)
	}
	// The cap: at most 8 watches per sandbox.
	for i := range 9 {
		r = s.do("POST", p+"watch", map[string]any{"path": "/workspace/w"}, "/v1/file/watch")
		if r.status != 200 || (i < 8) != r.env.Success {
			t.Fatalf("watch %d: %d %s", i, r.status, r.raw)
		}
	}
}

// TestCaps: SANDBOX_MAX_FILE_SIZE refuses larger JSON reads and writes
// as tool-level failures (200, success false) with a FileOperationError; SANDBOX_MAX_FILES_PER_REQUEST cuts
// multi-file results and says truncated.
func TestCaps(t *testing.T) {
	s := start(t, func(c *config.Config) { c.MaxFileSize = 1024; c.MaxFilesPerRequest = 5 })
	id := s.newSandbox()
	p := "/sandboxes/" + id + "/v1/file/"
	s.sh(id, "mkdir -p /workspace/c && head -c 2000 /dev/zero | tr '\\0' x > /workspace/c/big && for i in 1 2 3 4 5 6 7 8 9 10; do echo $i > /workspace/c/f$i; done")
	r := s.do("POST", p+"write", map[string]any{"file": "/workspace/c/w", "content": strings.Repeat("y", 1025)}, "/v1/file/write")
	if r.status != http.StatusOK || r.env.Success || r.fileError(t).ErrorType != "invalid_target" {
		t.Fatalf("write over the cap: %d %s", r.status, r.raw)
	}
	r = s.do("POST", p+"read", map[string]any{"file": "/workspace/c/big"}, "/v1/file/read")
	if r.status != http.StatusOK || r.env.Success || r.fileError(t).ErrorType != "invalid_target" {
		t.Fatalf("read over the cap: %d %s", r.status, r.raw)
	}
	r = s.do("POST", p+"write", map[string]any{"file": "/workspace/c/f1", "content": strings.Repeat("y", 1023), "append": true}, "/v1/file/write")
	if r.status != http.StatusOK || r.env.Success || r.fileError(t).ErrorType != "invalid_target" {
		t.Fatalf("append past the cap: %d %s", r.status, r.raw)
	}
	for _, c := range []struct{ route, body string }{
		{"list", `{"path":"/workspace/c"}`},
		{"find", `{"path":"/workspace/c","glob":"f*"}`},
		{"glob", `{"path":"/workspace/c","pattern":"*"}`},
		{"grep", `{"path":"/workspace/c","pattern":"[0-9]"}`},
	} {
		var body any
		_ = json.Unmarshal([]byte(c.body), &body)
		r := s.do("POST", p+c.route, body, "/v1/file/"+c.route)
		var res struct {
			Files     []json.RawMessage `json:"files"`
			Matches   []json.RawMessage `json:"matches"`
			Truncated bool              `json:"truncated"`
		}
		if r.status != 200 || json.Unmarshal(r.env.Data, &res) != nil || len(res.Files)+len(res.Matches) != 5 || !res.Truncated {
			t.Fatalf("%s: %d %s", c.route, r.status, r.raw)
		}
	}
}

// TestInvalidBodies: bodies AIO (FastAPI) would refuse get its 422 shape.
func TestInvalidBodies(t *testing.T) {
	s := start(t, nil)
	for _, c := range []struct {
		route, body, loc, typ string
	}{
		{"read", `{}`, "file", "missing"},
		{"write", `{"file":"/workspace/x"}`, "content", "missing"},
		{"read", `{"file":null}`, "file", "missing"},
		{"read", `{"file":"/workspace/x","start_line":"one"}`, "start_line", "int_type"},
		{"grep", `{"path":"/workspace","pattern":"x","include":"*.go"}`, "include", "list_type"},
		{"list", `[]`, "", "model_attributes_type"},
		{"str_replace_editor", `{"path":"/workspace"}`, "command", "missing"},
	} {
		req, _ := http.NewRequest("POST", s.base+"/v1/file/"+c.route, strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer "+s.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Detail []struct {
				Loc  []any  `json:"loc"`
				Type string `json:"type"`
			} `json:"detail"`
		}
		err = json.NewDecoder(resp.Body).Decode(&v)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnprocessableEntity || err != nil || len(v.Detail) == 0 || v.Detail[0].Type != c.typ ||
			(c.loc != "" && (len(v.Detail[0].Loc) != 2 || v.Detail[0].Loc[1] != c.loc)) {
			t.Errorf("%s %s: %d %+v", c.route, c.body, resp.StatusCode, v)
		}
	}
}
