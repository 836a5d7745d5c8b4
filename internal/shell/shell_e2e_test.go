package shell_test

import "testing"

func TestShellSessionKeepsState(t *testing.T) {
	s := startServer(t, nil)
	d := ok(t, s.do("POST", "/v1/shell/exec", map[string]any{"command": "mkdir -p /tmp/w && cd /tmp/w && export DEMO_FLAG=hello"}))
	sid, _ := d["session_id"].(string)
	if sid == "" || d["status"] != "completed" || d["exit_code"] != float64(0) {
		t.Fatalf("first exec: %v", d)
	}
	d = ok(t, s.do("POST", "/v1/shell/exec", map[string]any{"id": sid, "command": "pwd; echo \"$DEMO_FLAG\"; false"}))
	if d["output"] != "/tmp/w\nhello\n" || d["exit_code"] != float64(1) {
		t.Fatalf("second exec: %#v", d)
	}
}
