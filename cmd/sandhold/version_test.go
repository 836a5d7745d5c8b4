package main

import (
	"encoding/json"
	"runtime"
	"testing"
)

func TestVersionJSON(t *testing.T) {
	out, errOut, code := runCLI(t, "version", "--json")
	if code != 0 {
		t.Fatalf("version --json: code %d: %s", code, errOut)
	}
	var v versionInfo
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if v.Version != version || v.Commit != commit {
		t.Errorf("version %q commit %q, want %q %q", v.Version, v.Commit, version, commit)
	}
	if v.GoVersion != runtime.Version() || v.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("go %q platform %q", v.GoVersion, v.Platform)
	}
	// The test binary is built in module mode with the same requirements
	// as the server: kong (this package's own import) must be listed with
	// a version and a checksum.
	found := false
	for _, m := range v.Modules {
		if m.Path == "github.com/alecthomas/kong" {
			found = m.Version != "" && m.Sum != ""
		}
	}
	if !found {
		t.Errorf("module list lacks github.com/alecthomas/kong with version and sum: %+v", v.Modules)
	}
}
