package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
)

type versionCmd struct {
	JSON bool `name:"json" help:"Print version, commit, Go version and the module list as JSON (what 'make verify-release' compares with the SBOM)."`
}

// versionInfo is the answer of `sandhold version --json`. The module list
// comes from the build information the Go linker embeds in every binary,
// so it names exactly the modules compiled in — the SBOM of a release is
// checked against it.
type versionInfo struct {
	Version   string       `json:"version"`
	Commit    string       `json:"commit"`
	GoVersion string       `json:"go_version"`
	Platform  string       `json:"platform"`
	Module    string       `json:"module"`
	Modules   []moduleInfo `json:"modules"`
}

type moduleInfo struct {
	Path    string      `json:"path"`
	Version string      `json:"version"`
	Sum     string      `json:"sum,omitempty"`
	Replace *moduleInfo `json:"replace,omitempty"`
}

// readVersionInfo reports this binary. Without build information (a
// binary built outside module mode) the module list is empty, never
// invented.
func readVersionInfo() versionInfo {
	v := versionInfo{
		Version:   version,
		Commit:    commit,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
		Modules:   []moduleInfo{},
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v.Module = bi.Main.Path
	for _, d := range bi.Deps {
		v.Modules = append(v.Modules, toModuleInfo(d))
	}
	return v
}

func toModuleInfo(m *debug.Module) moduleInfo {
	mi := moduleInfo{Path: m.Path, Version: m.Version, Sum: m.Sum}
	if m.Replace != nil {
		r := toModuleInfo(m.Replace)
		mi.Replace = &r
	}
	return mi
}

func (c versionCmd) Run(e *env) error {
	v := readVersionInfo()
	if c.JSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	_, err := fmt.Fprintf(e.stdout, "sandhold %s (commit %s, %s, %s)\n", v.Version, v.Commit, v.GoVersion, v.Platform)
	return err
}
