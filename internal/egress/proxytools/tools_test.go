package proxytools

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/guard"
)

// TestUpstreamPasswordNotInAuditOrAnswers: what the dispatcher writes to
// the audit record and shows an approver (Describe) and what the tools
// answer never carry the upstream's password; the tiers are as declared.
func TestUpstreamPasswordNotInAuditOrAnswers(t *testing.T) {
	const pw = "hunter2-Xq9"
	tools := Tools(nil, nil)
	byName := map[string]int{}
	for i, tl := range tools {
		byName[tl.Name] = i
	}
	set := tools[byName[ToolUpstreamSet]]
	args := UpstreamArgs{Sandbox: "sbx1", Server: "http://bob:" + pw + "@proxy.example.com:3128"}
	if err := set.Check(args); err != nil {
		t.Fatal(err)
	}
	tg := set.Describe(args)
	raw, _ := json.Marshal(tg)
	if strings.Contains(string(raw), pw) || !strings.Contains(tg.Target, "proxy.example.com:3128") {
		t.Fatalf("audit target %s", raw)
	}
	if a := set.AssessArgs(args); a.Risk != guard.Dangerous {
		t.Fatalf("setting an upstream is rated %v", a.Risk)
	}
	for name, want := range map[string]guard.Risk{ToolUpstreamGet: guard.Safe, ToolHealth: guard.Safe, ToolDiagnose: guard.Safe,
		ToolMappingsList: guard.Safe, ToolExcludesList: guard.Safe, ToolMappingAdd: guard.Medium, ToolExcludeAdd: guard.Medium,
		ToolMappingRemove: guard.Medium, ToolExcludeRemove: guard.Medium, ToolUpstreamRemove: guard.Medium} {
		if got := tools[byName[name]].Risk; got != want {
			t.Errorf("%s is %v, want %v", name, got, want)
		}
	}
	u, err := UpstreamArgs{Server: args.Server}.parsed()
	if err != nil {
		t.Fatal(err)
	}
	in := infoOf(u)
	if in.Password == nil || *in.Password != "********" || in.Username == nil || *in.Username != "bob" || strings.Contains(in.Addr, pw) {
		t.Fatalf("answer %+v", in)
	}
	// A malformed upstream is refused before the call, naming the field.
	if err := set.Check(UpstreamArgs{Server: "no-port.example.com"}); err == nil || !strings.Contains(err.Error(), "port") {
		t.Fatalf("Check: %v", err)
	}
}
