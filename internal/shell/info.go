package shell

import (
	"bufio"
	"context"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox"
)

// infoTTL is how long a sandbox's gathered environment is reused: it
// changes only when someone installs something.
const infoTTL = 5 * time.Minute

// infoScript prints what GET /v1/sandbox reports, one key=value per line,
// gathered inside the sandbox. It runs nothing of the caller's.
const infoScript = `
echo "os=$(uname -s)"
if [ -r /etc/os-release ]; then . /etc/os-release; echo "os_version=${PRETTY_NAME:-$VERSION_ID}"; else echo "os_version=$(uname -r)"; fi
echo "kernel=$(uname -r)"
echo "arch=$(uname -m)"
echo "user=$(id -un 2>/dev/null || id -u)"
echo "home=$HOME"
echo "tz=$(cat /etc/timezone 2>/dev/null || date +%Z)"
for b in python3 python $(cd /usr/bin 2>/dev/null && ls python3.* 2>/dev/null | grep -E '^python3\.[0-9]+$'); do
  p=$(command -v "$b") && echo "python=$b|$p|$("$p" --version 2>&1 | head -n1)"
done
for b in node nodejs; do
  p=$(command -v "$b") && echo "node=$b|$p|$("$p" --version 2>&1 | head -n1)"
done
for t in pip3 pip uv jupyter npm npx yarn pnpm; do p=$(command -v "$t") && echo "rt=$t|$p"; done
for t in bash sh grep rg find fd sed awk vim vi nano less git curl wget tar zip unzip gzip xz jq sqlite3 make gcc cc go ps top htop; do
  command -v "$t" >/dev/null 2>&1 && echo "util=$t"
done
cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | sed 's/^/net=/'
`

// utilCategory groups the tools the script looks for (AIO's ToolCategory).
var utilCategory = map[string]string{
	"bash": "shell", "sh": "shell",
	"grep": "search", "rg": "search", "find": "search", "fd": "search",
	"sed": "text", "awk": "text", "vim": "editor", "vi": "editor", "nano": "editor", "less": "text",
	"git": "vcs", "curl": "network", "wget": "network",
	"tar": "archive", "zip": "archive", "unzip": "archive", "gzip": "archive", "xz": "archive",
	"jq": "data", "sqlite3": "data", "make": "build", "gcc": "build", "cc": "build", "go": "build",
	"ps": "process", "top": "process", "htop": "process",
}

// SandboxInfo is AIO's SandboxResponse body without the envelope.
type SandboxInfo struct {
	HomeDir   string `json:"home_dir"`
	Workspace string `json:"workspace"`
	Version   string `json:"version"`
	Detail    Detail `json:"detail"`

	at time.Time
}

// Detail is AIO's SandboxDetail.
type Detail struct {
	System  SystemEnv      `json:"system"`
	Runtime RuntimeEnv     `json:"runtime"`
	Utils   []ToolCategory `json:"utils"`
}

// SystemEnv is AIO's SystemEnv.
type SystemEnv struct {
	OS            string   `json:"os"`
	OSVersion     string   `json:"os_version"`
	Arch          string   `json:"arch"`
	User          string   `json:"user"`
	HomeDir       string   `json:"home_dir"`
	Workspace     string   `json:"workspace"`
	Timezone      string   `json:"timezone"`
	OccupiedPorts []string `json:"occupied_ports"`
}

// RuntimeEnv is AIO's RuntimeEnv.
type RuntimeEnv struct {
	Python []ToolSpec `json:"python"`
	NodeJS []ToolSpec `json:"nodejs"`
}

// ToolSpec is AIO's ToolSpec.
type ToolSpec struct {
	Ver   *string  `json:"ver"`
	Bin   *string  `json:"bin"`
	Alias []string `json:"alias"`
}

// ToolCategory is AIO's ToolCategory.
type ToolCategory struct {
	Category string          `json:"category"`
	Tools    []AvailableTool `json:"tools"`
}

// AvailableTool is AIO's AvailableTool.
type AvailableTool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

// Info gathers (or reuses) sb's environment.
func (s *Service) Info(ctx context.Context, sb *sandbox.Sandbox, version string) (SandboxInfo, error) {
	s.mu.Lock()
	in, ok := s.info[sb.ID()]
	s.mu.Unlock()
	if ok && time.Since(in.at) < infoTTL {
		return in, nil
	}
	e, err := sb.Exec(ctx, sandbox.ExecRequest{Command: infoScript, Timeout: 20 * time.Second, OutputLimit: 256 << 10, Actor: "system"})
	if err != nil {
		return SandboxInfo{}, err
	}
	out, _ := e.Stdout.Text()
	in = parseInfo(out)
	in.Version = version
	in.at = time.Now()
	s.mu.Lock()
	s.info[sb.ID()] = in
	s.mu.Unlock()
	return in, nil
}

// maxInfoLines caps the lines parsed (the sandbox writes them).
const maxInfoLines = 20_000

func parseInfo(out string) SandboxInfo {
	in := SandboxInfo{Workspace: "/workspace"}
	sys := &in.Detail.System
	sys.Workspace = "/workspace"
	sys.OccupiedPorts = []string{}
	in.Detail.Runtime.Python = []ToolSpec{}
	in.Detail.Runtime.NodeJS = []ToolSpec{}
	in.Detail.Utils = []ToolCategory{}
	byVer := map[string]int{} // version → index in python/nodejs lists
	cats := map[string][]AvailableTool{}
	ports := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	for n := 0; sc.Scan() && n < maxInfoLines; n++ {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		switch k {
		case "os":
			sys.OS = strings.ToLower(v)
		case "os_version":
			sys.OSVersion = v
		case "arch":
			sys.Arch = v
		case "user":
			sys.User = v
		case "home":
			sys.HomeDir, in.HomeDir = v, v
		case "tz":
			sys.Timezone = v
		case "python", "node":
			parts := strings.SplitN(v, "|", 3)
			if len(parts) != 3 {
				continue
			}
			ver := strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(parts[2]), "Python "), "v")
			list := &in.Detail.Runtime.Python
			if k == "node" {
				list = &in.Detail.Runtime.NodeJS
			}
			key := k + ver
			if i, ok := byVer[key]; ok {
				(*list)[i].Alias = append((*list)[i].Alias, parts[0])
				continue
			}
			bin := parts[1]
			byVer[key] = len(*list)
			*list = append(*list, ToolSpec{Ver: &ver, Bin: &bin, Alias: []string{parts[0]}})
		case "rt":
			name, _, _ := strings.Cut(v, "|")
			cats["runtime"] = append(cats["runtime"], AvailableTool{Name: name})
		case "util":
			c := utilCategory[v]
			if c == "" {
				c = "other"
			}
			cats[c] = append(cats[c], AvailableTool{Name: v})
		case "net":
			// /proc/net/tcp: "sl local_address rem_address st …"; state
			// 0A is LISTEN; the port is the hex after the colon.
			f := strings.Fields(v)
			if len(f) < 4 || f[3] != "0A" {
				continue
			}
			_, hexPort, ok := strings.Cut(f[1], ":")
			if !ok {
				continue
			}
			if p, err := strconv.ParseUint(hexPort, 16, 16); err == nil {
				ports[strconv.FormatUint(p, 10)] = true
			}
		}
	}
	for p := range ports {
		sys.OccupiedPorts = append(sys.OccupiedPorts, p)
	}
	sort.Strings(sys.OccupiedPorts)
	names := make([]string, 0, len(cats))
	for c := range cats {
		names = append(names, c)
	}
	sort.Strings(names)
	for _, c := range names {
		in.Detail.Utils = append(in.Detail.Utils, ToolCategory{Category: c, Tools: cats[c]})
	}
	if in.HomeDir == "" {
		in.HomeDir, sys.HomeDir = "/workspace", "/workspace"
	}
	return in
}

// packageScripts list installed packages as JSON (AIO's
// /v1/sandbox/packages/{python,nodejs}); they print [] when the runtime or
// its package manager is missing.
var packageScripts = map[string]string{
	"python": `p=$(command -v python3 || command -v python) && "$p" -m pip list --format=json --disable-pip-version-check 2>/dev/null || echo '[]'`,
	"nodejs": `command -v npm >/dev/null && npm ls -g --depth=0 --json 2>/dev/null || echo '{}'`,
}

// maxPackagesOutput caps the package list kept.
const maxPackagesOutput = 4 << 20

// Packages lists the packages installed in sb for lang ("python" or
// "nodejs"), as the package manager reports them: its JSON, checked to be
// JSON and passed on as it is (AIO answers what pip or npm said).
func (s *Service) Packages(ctx context.Context, sb *sandbox.Sandbox, lang string) (json.RawMessage, error) {
	script, ok := packageScripts[lang]
	if !ok {
		return nil, fault.InvalidField("language", "language must be python or nodejs")
	}
	e, err := sb.Exec(ctx, sandbox.ExecRequest{Command: script, Timeout: 60 * time.Second, OutputLimit: maxPackagesOutput, Actor: "system"})
	if err != nil {
		return nil, err
	}
	out, truncated := e.Stdout.Text()
	if truncated || !json.Valid([]byte(out)) {
		return nil, fault.New(fault.Unavailable, "the package manager's answer could not be read")
	}
	return json.RawMessage(out), nil
}
