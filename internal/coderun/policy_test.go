package coderun

import (
	"encoding/json"
	"testing"

	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/policy"
)

// TestPolicyListsSeeCode: issue 38 row 6. With commands.deny ["curl"] and
// paths.deny ["*.pem","/etc/**"], code.execute of bash `curl -V` and
// nodejs.execute of execSync('curl -V') ran: the code tools gave the
// policy the guard's risk but not the command names and paths it saw. The
// calls go through the real tools' Decode and Assess (jupyter's route is
// code.execute).
func TestPolicyListsSeeCode(t *testing.T) {
	g := guard.New(guard.Config{})
	tools := map[string]dispatch.Tool{}
	for _, tl := range append(Tools(nil, g), NodeTools(nil, g)...) {
		tools[tl.Name] = tl
	}
	r := policy.Default().Roles["agent"]
	r.Commands = policy.Lists{Deny: []string{"curl"}}
	r.Paths = policy.Lists{Deny: []string{"*.pem", "/etc/**"}}
	cases := []struct {
		name, tool, args string
		want             dispatch.Decision
	}{
		{"bash curl", ToolExecute.Name(), `{"language":"bash","code":"curl -V"}`, dispatch.Deny},
		{"bash reads a pem", ToolExecute.Name(), `{"language":"bash","code":"cat key.pem"}`, dispatch.Deny},
		{"bash in /etc", ToolExecute.Name(), `{"language":"bash","code":"cat hostname","cwd":"/etc"}`, dispatch.Deny},
		{"python subprocess curl", ToolExecute.Name(), `{"language":"python","code":"import subprocess\nsubprocess.run(['curl','-V'])"}`, dispatch.Deny},
		{"python os.system cat pem", ToolExecute.Name(), `{"language":"python","code":"import os\nos.system('cat key.pem')"}`, dispatch.Deny},
		{"nodejs execSync curl", ToolNodeExecute.Name(), `{"code":"require('child_process').execSync('curl -V')"}`, dispatch.Deny},
		{"python in /etc", ToolExecute.Name(), `{"language":"python","code":"print(1)","cwd":"/etc"}`, dispatch.Deny},
		{"bash plain", ToolExecute.Name(), `{"language":"bash","code":"ls -la"}`, dispatch.Allow},
		{"python plain", ToolExecute.Name(), `{"language":"python","code":"print(1)"}`, dispatch.Allow},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tl, ok := tools[tc.tool]
			if !ok {
				t.Fatalf("no tool %s", tc.tool)
			}
			args, err := tl.Decode(json.RawMessage(tc.args))
			if err != nil {
				t.Fatal(err)
			}
			a := tl.AssessArgs(args)
			if got, why := policy.Evaluate(r, tc.tool, a); got != tc.want {
				t.Fatalf("decision %v (%s), want %v; names %q paths %q", got, why, tc.want, a.Names, a.Paths)
			}
		})
	}
}
