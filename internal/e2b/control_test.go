package e2b

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox"
)

// TestSpecRefusesWhatItCannotHonour: E2B options sandhold does not serve
// are refused with a message, never silently dropped.
func TestSpecRefusesWhatItCannotHonour(t *testing.T) {
	s := New(Deps{})
	yes, no := true, false
	c := auth.Caller{KeyID: "k", Role: auth.RoleAgent}
	for _, tc := range []struct {
		name string
		body newSandbox
		want string // "" for accepted
	}{
		{"defaults", newSandbox{}, ""},
		{"E2B's stock template is host", newSandbox{TemplateID: "code-interpreter-v1"}, ""},
		{"internet access off", newSandbox{AllowInternetAccess: &no}, ""},
		{"internet access on", newSandbox{AllowInternetAccess: &yes}, "allowOut"},
		{"pause at the timeout", newSandbox{AutoPause: &yes}, ""},
		{"pause at the timeout, memory kept", newSandbox{AutoPause: &yes, AutoPauseMemory: &yes}, "keepMemory: false"},
		{"pause at the timeout, files only", newSandbox{AutoPause: &yes, AutoPauseMemory: &no}, ""},
		{"a snapshot as the template", newSandbox{TemplateID: "sn0123456789abcdef"}, ""},
		{"an MCP gateway", newSandbox{MCP: []byte(`{"x":{}}`)}, "MCP"},
		{"volumes", newSandbox{VolumeMounts: []byte(`[{"name":"v","path":"/v"}]`)}, "not supported"},
		{"a deny list", newSandbox{Network: &networkConfig{DenyOut: []string{"10.0.0.0/8"}}}, "denyOut"},
		{"an allow list", newSandbox{Network: &networkConfig{AllowOut: []string{"example.com"}}}, ""},
		{"a negative timeout", newSandbox{Timeout: ptr(int64(-1))}, "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := s.spec(c, tc.body)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(fault.Public(err), tc.want)):
				t.Fatalf("got %v, want a refusal naming %q", err, tc.want)
			}
			if err == nil && tc.body.TemplateID == "code-interpreter-v1" && spec.Template != "host" {
				t.Fatalf("template %q", spec.Template)
			}
			if err == nil && (tc.body.AutoPause != nil) != (spec.OnExpire == sandbox.ExpireHibernate) {
				t.Fatalf("on_expire %q", spec.OnExpire)
			}
			if err == nil && tc.body.TemplateID == "sn0123456789abcdef" && (spec.Snapshot != tc.body.TemplateID || spec.Template != "") {
				t.Fatalf("snapshot %q template %q", spec.Snapshot, spec.Template)
			}
			if err == nil && tc.body.Network != nil && (spec.Network.Mode != sandbox.NetworkProxy || spec.Network.Allow[0] != "example.com") {
				t.Fatalf("network %+v", spec.Network)
			}
		})
	}
	spec, _ := s.spec(c, newSandbox{Timeout: ptr(int64(10 * 24 * 3600))})
	if spec.TTL != maxTimeout {
		t.Fatalf("a timeout over a day: ttl %v", spec.TTL)
	}
}

func ptr[T any](v T) *T { return &v }

func TestMetadataFilter(t *testing.T) {
	// The SDK sends URLSearchParams of URL-encoded keys and values.
	got, err := metadataFilter("team%3Dx=a%26b&n=1")
	if err != nil || got["team=x"] != "a&b" || got["n"] != "1" || len(got) != 2 {
		t.Fatalf("%v %v", got, err)
	}
	if !matchLabels(map[string]string{"team=x": "a&b", "n": "1", "o": "2"}, got) || matchLabels(map[string]string{"n": "1"}, got) {
		t.Fatal("matchLabels")
	}
}

func TestEndEvent(t *testing.T) {
	for _, tc := range []struct {
		ex               agent.Exit
		reason           string
		code             int32
		exited, hasError bool
		status           string
	}{
		{agent.Exit{Code: 0}, "", 0, true, false, "exit status 0"},
		{agent.Exit{Code: 3}, "", 3, true, true, "exit status 3"},
		{agent.Exit{Code: -1, Signal: 9}, "timeout", -1, false, true, "signal: killed (timeout)"},
	} {
		e := endEvent(tc.ex, tc.reason)
		if e.ExitCode != tc.code || e.Exited != tc.exited || (e.Error != nil) != tc.hasError || e.Status != tc.status {
			t.Errorf("%+v: %+v", tc.ex, e)
		}
	}
}

// TestLineWriterSendsLines: output pieces become one message per line,
// whatever they were written in; the rest goes at the end.
func TestLineWriterSendsLines(t *testing.T) {
	rec := httptest.NewRecorder()
	l := &lineWriter{w: rec}
	l.output("stdout", []byte("fir"))
	l.output("stderr", []byte("e1\n"))
	l.output("stdout", []byte("st\nsecond\nthi"))
	l.output("stdout", []byte("rd"))
	l.flushOutput()
	want := `{"text":"e1\n","type":"stderr"}` + "\n" + `{"text":"first\n","type":"stdout"}` + "\n" +
		`{"text":"second\n","type":"stdout"}` + "\n" + `{"text":"third","type":"stdout"}` + "\n"
	if rec.Body.String() != want || rec.Code != http.StatusOK {
		t.Fatalf("%d\n%s\nwant\n%s", rec.Code, rec.Body, want)
	}
}
