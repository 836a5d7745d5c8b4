package proxytools

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/egress"
	"github.com/sandhold/sandhold/internal/fault"
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
	set := tools[byName[ToolUpstreamSet.Name()]]
	args := UpstreamArgs{On: dispatch.On{Sandbox: "sbx1"}, Server: "http://bob:" + pw + "@proxy.example.com:3128"}
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
	for name, want := range map[string]guard.Risk{ToolUpstreamGet.Name(): guard.Safe, ToolHealth.Name(): guard.Safe, ToolDiagnose.Name(): guard.Safe,
		ToolMappingsList.Name(): guard.Safe, ToolExcludesList.Name(): guard.Safe, ToolMappingAdd.Name(): guard.Medium, ToolExcludeAdd.Name(): guard.Medium,
		ToolMappingRemove.Name(): guard.Medium, ToolExcludeRemove.Name(): guard.Medium, ToolUpstreamRemove.Name(): guard.Medium} {
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

// TestInvalidFieldsNameTheBodyField: every refusal of a tool's arguments
// names the field as the dispatcher's decoder does (body.<field>), so a
// client sees the same field name from every tool, route and MCP.
func TestInvalidFieldsNameTheBodyField(t *testing.T) {
	tools := Tools(nil, nil)
	byName := map[string]dispatch.Tool{}
	for _, tl := range tools {
		byName[tl.Name] = tl
	}
	for _, tc := range []struct {
		name, tool string
		args       any
		field      string
	}{
		{"mapping remove without source", ToolMappingRemove.Name(), SourceArgs{}, "body.source"},
		{"diagnose without url", ToolDiagnose.Name(), DiagnoseArgs{}, "body.url"},
		{"exclude without pattern", ToolExcludeAdd.Name(), ExcludeArgs{}, "body.pattern"},
		{"exclude remove without pattern", ToolExcludeRemove.Name(), ExcludeArgs{}, "body.pattern"},
		{"mapping with a bad source", ToolMappingAdd.Name(), MappingArgs{Source: "ftp://x y", Target: "3000"}, "body.source"},
		{"mapping with a bad target", ToolMappingAdd.Name(), MappingArgs{Source: "myapp.example", Target: "not a port"}, "body.target"},
		{"upstream without a port", ToolUpstreamSet.Name(), UpstreamArgs{Server: "proxy.example"}, "body.server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := byName[tc.tool].Check(tc.args)
			if fault.KindOf(err) != fault.Invalid || fault.FieldOf(err) != tc.field {
				t.Fatalf("Check = %v (kind %q, field %q), want field %q", err, fault.KindOf(err), fault.FieldOf(err), tc.field)
			}
		})
	}
	// The proxy's own refusals (a diagnose URL, a pattern, a target
	// outside the allow list) get the same prefix.
	for _, f := range []string{"url", "pattern", "source", "target", "server"} {
		err := failure(&egress.InputError{Field: f, Err: errors.New("no")})
		if fault.FieldOf(err) != "body."+f || fault.KindOf(err) != fault.Invalid {
			t.Errorf("failure(%s) = %v, field %q", f, err, fault.FieldOf(err))
		}
	}
}
