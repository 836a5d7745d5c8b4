// Package skills keeps agent skills in a sandbox — AIO's /v1/skills: a
// skill is a directory holding SKILL.md (YAML front matter with its
// metadata, then Markdown instructions) and whatever files it needs.
//
// Skills live in the sandbox, in /workspace/.skills/<name>/, so they
// persist with the workspace, count against its quota, and are read by
// the code that uses them where it runs. Every step is done by the
// sandbox's init, inside the sandbox: a zip is extracted by the safe
// archive code (internal/archive: two passes, no path escapes, links,
// devices or bombs) into a staging directory, the skills found there
// (SKILL.md at the root or in a directory up to two levels down) are
// checked, and only then renamed into place — all or nothing. SKILL.md
// is read through the file API's resolver (sensitive-path policy,
// symlinks and hard links judged), so registering or reading a skill
// cannot return a .env or key file.
//
// What it does not stop: a skill's files are the agent's own; sandboxed
// code can change them (they are in its workspace). Dependency commands
// a skill declares are not run (dependency_commands is always empty):
// installing is the agent's call, through exec, where the command guard
// and policy see it.
package skills

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/archive"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox"
	"github.com/sandhold/sandhold/internal/workspace"
)

// Dir is where a sandbox's skills live.
const Dir = "/workspace/.skills"

// Caps, with their reasons.
const (
	// MaxZipBytes caps an uploaded zip (it is streamed into an unnamed
	// file in the sandbox's workspace, counted against its quota, while
	// the init extracts it).
	MaxZipBytes = 64 << 20
	// copyBuf is one read of an upload on its way into the sandbox.
	copyBuf = 256 << 10
	// maxExtractBytes caps what one registration writes (below the
	// workspace quota, which still applies).
	maxExtractBytes = 512 << 20
	// maxSkillFile caps SKILL.md (read whole into server memory).
	maxSkillFile = 1 << 20
	// maxSkills caps the skills of one sandbox that are listed, and the
	// skills one registration may add.
	maxSkills = 256
	// opTimeout bounds one registration's commands.
	opTimeout = 2 * time.Minute
	// findDepth is how deep below the archive's root SKILL.md is looked
	// for: root, skill/, or skills/skill/.
	findDepth = 3
)

// nameRE is a skill name: a directory name that is safe everywhere.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Resolver returns the sandbox a call names ("" = the caller's default).
type Resolver func(ctx context.Context, c auth.Caller, id string) (*sandbox.Sandbox, error)

// Service manages skills in sandboxes.
type Service struct {
	resolve Resolver
	pol     workspace.Policy
}

// New returns a service; a zero policy means the file API's default.
func New(resolve Resolver, pol workspace.Policy) *Service {
	if pol.Names == nil && pol.Dirs == nil && pol.Paths == nil {
		pol = workspace.DefaultPolicy()
	}
	return &Service{resolve: resolve, pol: pol}
}

// DependencyCommand is AIO's DependencyCommandResult.
type DependencyCommand struct {
	Command []string `json:"command"`
	Success bool     `json:"success"`
	Stdout  *string  `json:"stdout"`
	Stderr  *string  `json:"stderr"`
}

// Metadata is AIO's SkillMetadata.
type Metadata struct {
	Name     string         `json:"name" doc:"skill name"`
	Path     string         `json:"path" doc:"absolute path of the skill directory in the sandbox"`
	Metadata map[string]any `json:"metadata" doc:"metadata parsed from SKILL.md front matter"`
	// DependencyCommands is always empty: sandhold does not run a skill's
	// install commands on its own (see the package doc).
	DependencyCommands []DependencyCommand `json:"dependency_commands" doc:"always empty: sandhold runs no install commands on registration"`
}

// RegisterArgs is AIO's Body_register_skills: a zip (uploaded; base64 in
// JSON) or a path in the sandbox (a directory or a .zip), and an optional
// name for a single skill.
type RegisterArgs struct {
	dispatch.On
	Zip  []byte `json:"zip,omitempty" doc:"a zip of one or more skills (base64 in JSON; the HTTP route takes a multipart file)"`
	Path string `json:"path,omitempty" maxLength:"4096" doc:"a directory or a .zip in the sandbox holding one or more skills"`
	Name string `json:"name,omitempty" maxLength:"64" doc:"the name of the skill when exactly one is registered (default: its front matter's name, else its directory's)"`
	// Upload is the HTTP route's zip, streamed from the request: only
	// the tool's run reads it — after authentication, the rate limit and
	// the policy — straight into the sandbox's workspace (its quota).
	// Nothing of it is held in server memory.
	Upload io.Reader `json:"-"`
	// AfterUpload reads what the form sends after its file (a name, or a
	// path, which is refused with a file); nil: nothing.
	AfterUpload func() (name, path string, err error) `json:"-"`
}

// Validate checks the zip's size and the name: the rules of the fields
// themselves, which the dispatcher applies (AIO's 422).
func (a RegisterArgs) Validate() error {
	switch {
	case len(a.Zip) > MaxZipBytes:
		return fault.New(fault.TooLarge, fmt.Sprintf("the zip is larger than %d bytes", MaxZipBytes))
	case a.Name != "" && !nameRE.MatchString(a.Name):
		return fault.InvalidField("body.name", "a skill name is 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
	}
	return nil
}

// source checks the exclusive options, a zip or a path, as the tool runs:
// AIO's schema allows neither and both (its handler refuses them: 200,
// success false, which its SDKs read as the tool's failure), and a
// multipart form's path arrives only after its file (fillUpload).
func (a RegisterArgs) source() error {
	zip := len(a.Zip) > 0 || a.Upload != nil
	switch {
	case !zip && a.Path == "":
		return fault.InvalidField("body.file", "give a zip file or a path")
	case zip && a.Path != "":
		return fault.InvalidField("body.path", "give a zip file or a path, not both")
	}
	return nil
}

// RegisterResult is AIO's SkillRegistrationResult.
type RegisterResult struct {
	Count      int        `json:"count"`
	Registered []Metadata `json:"registered"`
	SandboxID  string     `json:"-"`
}

// NamesArgs filters the listing (AIO: names, comma-separated).
type NamesArgs struct {
	dispatch.On
	Names string `json:"names,omitempty" maxLength:"4096" doc:"comma-separated skill names; empty: all"`
}

// Collection is AIO's SkillMetadataCollection.
type Collection struct {
	Skills []Metadata `json:"skills"`
}

// NameArgs names one skill.
type NameArgs struct {
	dispatch.On
	Name string `json:"name" required:"true" maxLength:"64" doc:"the skill's name"`
}

// Validate checks the name's form (it becomes a path component).
func (a NameArgs) Validate() error {
	if !nameRE.MatchString(a.Name) {
		return fault.InvalidField("name", "a skill name is 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
	}
	return nil
}

// Content is AIO's SkillContentResult.
type Content struct {
	Name    string `json:"name"`
	Path    string `json:"path"`
	Content string `json:"content" doc:"SKILL.md without its front matter"`
}

// ClearArgs names the sandbox whose skills are all deleted.
type ClearArgs struct {
	dispatch.On
}

// Cleared is what clear answers (AIO: a dict).
type Cleared struct {
	Deleted []string `json:"deleted"`
	Count   int      `json:"count"`
}

// Register adds the skills of a zip or a sandbox path.
func (s *Service) Register(ctx context.Context, c auth.Caller, a RegisterArgs) (RegisterResult, error) {
	if err := a.source(); err != nil {
		return RegisterResult{}, err
	}
	sb, err := s.resolve(ctx, c, a.Sandbox)
	if err != nil {
		return RegisterResult{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if err := mkdirAll(ctx, sb, Dir); err != nil {
		return RegisterResult{}, err
	}
	staging := path.Join(Dir, ".staging-"+randHex(8))
	if _, _, err := sb.File(ctx, agent.OpMkdir, agent.FileReq{Path: staging, Mode: 0o755, NoFollow: true}); err != nil {
		return RegisterResult{}, workspace.FileErrorOf("register", staging, err)
	}
	defer removeQuiet(ctx, sb, staging)

	if err := s.fill(ctx, c, sb, staging, &a); err != nil {
		return RegisterResult{}, err
	}
	found, err := s.find(ctx, c, sb, staging)
	if err != nil {
		return RegisterResult{}, err
	}
	if len(found) == 0 {
		return RegisterResult{}, fault.InvalidField("body.file", "no SKILL.md found (at the root, or in a directory up to two levels down)")
	}
	if len(found) > maxSkills {
		return RegisterResult{}, fault.New(fault.TooLarge, fmt.Sprintf("more than %d skills in one registration", maxSkills))
	}
	if a.Name != "" && len(found) != 1 {
		return RegisterResult{}, fault.InvalidField("body.name", fmt.Sprintf("name applies to one skill; the source holds %d", len(found)))
	}
	type plan struct {
		dir  string
		meta Metadata
	}
	var plans []plan
	seen := map[string]bool{}
	for _, dir := range found {
		fm, _, err := s.readSkill(ctx, sb, path.Join(dir, "SKILL.md"))
		if err != nil {
			return RegisterResult{}, err
		}
		name := a.Name
		if name == "" {
			if n, ok := fm["name"].(string); ok && n != "" {
				name = n
			} else if dir != staging {
				name = path.Base(dir)
			}
		}
		if !nameRE.MatchString(name) {
			return RegisterResult{}, fault.InvalidField("body.name", fmt.Sprintf("skill name %q is not usable: give name, or a front matter name of 1-64 letters, digits, '.', '_' or '-'", printable(name)))
		}
		if seen[strings.ToLower(name)] {
			return RegisterResult{}, fault.New(fault.Conflict, fmt.Sprintf("two skills named %q in one registration", name))
		}
		seen[strings.ToLower(name)] = true
		plans = append(plans, plan{dir: dir, meta: Metadata{Name: name, Path: path.Join(Dir, name), Metadata: fm, DependencyCommands: []DependencyCommand{}}})
	}
	// Everything checked: move into place (an existing skill of the same
	// name is replaced).
	out := RegisterResult{SandboxID: sb.ID(), Registered: make([]Metadata, 0, len(plans))}
	for _, p := range plans {
		if err := removeAll(ctx, sb, p.meta.Path); err != nil {
			return out, err
		}
		if _, _, err := sb.File(ctx, agent.OpRename, agent.FileReq{Path: p.dir, Path2: p.meta.Path, NoFollow: true}); err != nil {
			return out, workspace.FileErrorOf("register", p.meta.Path, err)
		}
		out.Registered = append(out.Registered, p.meta)
	}
	out.Count = len(out.Registered)
	return out, nil
}

// fill puts the source's files into staging (an upload's fields after
// its file are read into a on the way).
func (s *Service) fill(ctx context.Context, c auth.Caller, sb *sandbox.Sandbox, staging string, a *RegisterArgs) error {
	switch {
	case a.Upload != nil:
		return s.fillUpload(ctx, sb, staging, a)
	case len(a.Zip) > 0:
		return s.fillZip(ctx, sb, staging, bytes.NewReader(a.Zip))
	}
	p := a.Path
	if !strings.HasPrefix(p, "/") {
		p = "/workspace/" + p
	}
	l, err := s.pol.Locate(ctx, sb, "register", p, false)
	if err != nil {
		return err
	}
	if !l.Exists {
		return fault.New(fault.NotFound, "register "+l.Given+": no such file or directory")
	}
	if strings.HasPrefix(l.Resolved+"/", Dir+"/") {
		return fault.InvalidField("body.path", "the path is inside the skills directory already")
	}
	if os.FileMode(l.Stat.Mode).IsDir() {
		// cp inside the sandbox, as the sandbox user; symlinks are copied
		// as symlinks (never followed), so they point where they did.
		e, err := sb.Exec(ctx, sandbox.ExecRequest{
			Argv:    []string{"/bin/cp", "-R", "--no-dereference", "--", l.Resolved + "/.", staging + "/"},
			Timeout: opTimeout, Actor: c.KeyID, OutputLimit: 4096,
		})
		if err != nil {
			return err
		}
		if r := e.Result(); r.Status != sandbox.StatusCompleted || r.ExitCode == nil || *r.ExitCode != 0 {
			return fault.New(fault.Invalid, "register "+l.Given+": copying the directory failed: "+firstLine(r.Stderr))
		}
		return nil
	}
	_, f, err := sb.File(ctx, agent.OpOpenRead, agent.FileReq{Path: l.Resolved, NoFollow: true})
	if err != nil {
		return workspace.FileErrorOf("register", l.Given, err)
	}
	defer func() { _ = f.Close() }()
	if _, err := workspace.CheckOpened("register", l, f); err != nil {
		return err
	}
	return s.extract(ctx, sb, staging, f)
}

// fillUpload streams the upload into the sandbox, then reads the form's
// fields after it and checks them as source and Validate do.
func (s *Service) fillUpload(ctx context.Context, sb *sandbox.Sandbox, staging string, a *RegisterArgs) error {
	if err := s.fillZip(ctx, sb, staging, a.Upload); err != nil {
		return err
	}
	if a.AfterUpload == nil {
		return nil
	}
	name, p, err := a.AfterUpload()
	if err != nil {
		return err
	}
	if name != "" {
		a.Name = name
	}
	a.Path = p
	if err := a.source(); err != nil {
		return err
	}
	return a.Validate() // the name, read only now
}

// fillZip copies a zip (at most MaxZipBytes) into an unnamed file in the
// sandbox's workspace — its quota, not the server's memory — and extracts
// it into staging.
func (s *Service) fillZip(ctx context.Context, sb *sandbox.Sandbox, staging string, zip io.Reader) error {
	flags, err := tmpfileFlags()
	if err != nil {
		return fault.Wrap(fault.Unsupported, err, "uploaded zips need Linux")
	}
	_, f, err := sb.File(ctx, agent.OpOpen, agent.FileReq{Path: Dir, Flags: flags, Mode: 0o600})
	if err != nil {
		return workspace.FileErrorOf("register", "(zip)", err)
	}
	defer func() { _ = f.Close() }()
	if err := copyZip(ctx, f, zip); err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fault.Wrap(fault.Internal, err, "internal error")
	}
	return s.extract(ctx, sb, staging, f)
}

// copyZip copies at most MaxZipBytes of r to w; more is refused.
func copyZip(ctx context.Context, w io.Writer, r io.Reader) error {
	buf := make([]byte, copyBuf)
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		k, rerr := io.ReadFull(r, buf)
		if k > 0 {
			if n += int64(k); n > MaxZipBytes {
				return fault.New(fault.TooLarge, fmt.Sprintf("the zip is larger than %d bytes", MaxZipBytes))
			}
			if _, err := w.Write(buf[:k]); err != nil {
				if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
					return fault.Wrap(fault.TooLarge, err, "the zip does not fit in what is left of the workspace quota")
				}
				return fault.Wrap(fault.Internal, err, "internal error")
			}
		}
		switch {
		case errors.Is(rerr, io.EOF), errors.Is(rerr, io.ErrUnexpectedEOF):
			return nil
		case rerr != nil:
			return fault.Wrap(fault.Invalid, rerr, "the zip upload ended early")
		}
	}
}

func (s *Service) extract(ctx context.Context, sb *sandbox.Sandbox, dest string, src *os.File) error {
	lim := archive.DefaultLimits()
	lim.MaxTotalBytes = maxExtractBytes
	if q := sb.DiskLimit(); q > 0 && q < lim.MaxTotalBytes {
		lim.MaxTotalBytes = q
	}
	_, err := sb.Extract(ctx, dest, archive.FormatZip, lim, s.pol.Deny(), src)
	if err != nil {
		var ae *archive.Error
		if errors.As(err, &ae) {
			return ae.Fault("the zip is refused: ")
		}
		return workspace.FileErrorOf("register", "(zip)", err)
	}
	return nil
}

// find lists the directories below root (root included) that hold a
// SKILL.md, at most findDepth levels down, skipping nested ones (a skill's
// own examples/ may hold SKILL.md files of its own).
func (s *Service) find(ctx context.Context, c auth.Caller, sb *sandbox.Sandbox, root string) ([]string, error) {
	e, err := sb.Exec(ctx, sandbox.ExecRequest{
		Argv:    []string{"/usr/bin/find", root, "-maxdepth", fmt.Sprint(findDepth), "-type", "f", "-name", "SKILL.md", "-print0"},
		Timeout: opTimeout, Actor: c.KeyID, OutputLimit: 1 << 20,
	})
	if err != nil {
		return nil, err
	}
	r := e.Result()
	if r.Status != sandbox.StatusCompleted || r.ExitCode == nil || *r.ExitCode != 0 || r.Truncated {
		return nil, fault.New(fault.Invalid, "could not look for SKILL.md files: "+firstLine(r.Stderr))
	}
	var dirs []string
	for _, f := range strings.Split(r.Stdout, "\x00") {
		if f != "" {
			dirs = append(dirs, path.Dir(f))
		}
	}
	sort.Slice(dirs, func(i, j int) bool {
		return len(dirs[i]) < len(dirs[j]) || (len(dirs[i]) == len(dirs[j]) && dirs[i] < dirs[j])
	})
	var out []string
outer:
	for _, d := range dirs {
		for _, o := range out {
			if o == root || strings.HasPrefix(d+"/", o+"/") {
				continue outer
			}
		}
		out = append(out, d)
	}
	return out, nil
}

// readSkill reads a SKILL.md and splits it into front matter and body.
func (s *Service) readSkill(ctx context.Context, sb *sandbox.Sandbox, p string) (map[string]any, string, error) {
	l, err := s.pol.Locate(ctx, sb, "read", p, false)
	if err != nil {
		return nil, "", err
	}
	if !l.Exists {
		return nil, "", fault.New(fault.NotFound, "skill file "+l.Given+" not found")
	}
	_, f, err := sb.File(ctx, agent.OpOpenRead, agent.FileReq{Path: l.Resolved, NoFollow: true})
	if err != nil {
		return nil, "", workspace.FileErrorOf("read", l.Given, err)
	}
	defer func() { _ = f.Close() }()
	if _, err := workspace.CheckOpened("read", l, f); err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSkillFile+1))
	if err != nil {
		return nil, "", workspace.FileErrorOf("read", l.Given, err)
	}
	if len(b) > maxSkillFile {
		return nil, "", fault.New(fault.TooLarge, fmt.Sprintf("%s is larger than %d bytes", l.Given, maxSkillFile))
	}
	fm, body, err := splitFrontMatter(b)
	if err != nil {
		return nil, "", fault.New(fault.Invalid, l.Given+": "+err.Error())
	}
	return fm, body, nil
}

// splitFrontMatter parses a leading "---" YAML block. A file without one
// has empty metadata and is all body.
func splitFrontMatter(b []byte) (map[string]any, string, error) {
	b = bytes.TrimPrefix(b, []byte("\ufeff"))
	text := strings.ReplaceAll(string(b), "\r\n", "\n")
	if !strings.HasPrefix(text, "---\n") {
		return map[string]any{}, text, nil
	}
	rest := text[4:]
	end := strings.Index(rest, "\n---\n")
	var head, body string
	switch {
	case end >= 0:
		head, body = rest[:end], rest[end+5:]
	case strings.HasSuffix(rest, "\n---"):
		head = strings.TrimSuffix(rest, "\n---")
	default:
		return nil, "", errors.New("the front matter is not closed by a --- line")
	}
	var raw any
	if err := yaml.Unmarshal([]byte(head), &raw); err != nil {
		return nil, "", fmt.Errorf("the front matter is not valid YAML: %s", firstLine(err.Error()))
	}
	if raw == nil {
		return map[string]any{}, body, nil
	}
	m, ok := jsonable(raw, 0).(map[string]any)
	if !ok {
		return nil, "", errors.New("the front matter is not a mapping")
	}
	return m, strings.TrimLeft(body, "\n"), nil
}

// maxDepth bounds jsonable's recursion on hostile YAML.
const maxDepth = 32

// jsonable turns decoded YAML into values encoding/json can write
// (string keys, finite numbers, times as RFC 3339).
func jsonable(v any, depth int) any {
	if depth > maxDepth {
		return nil
	}
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonable(e, depth+1)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(k)] = jsonable(e, depth+1)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonable(e, depth+1)
		}
		return out
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Sprint(x)
		}
		return x
	case time.Time:
		return x.UTC().Format(time.RFC3339)
	}
	return v
}

// List returns the metadata of the sandbox's skills (those named, when
// names is given), by name.
func (s *Service) List(ctx context.Context, c auth.Caller, a NamesArgs) (Collection, error) {
	sb, err := s.resolve(ctx, c, a.Sandbox)
	if err != nil {
		return Collection{}, err
	}
	want := map[string]bool{}
	for _, n := range strings.Split(a.Names, ",") {
		if n = strings.TrimSpace(n); n != "" {
			want[n] = true
		}
	}
	names, err := s.names(ctx, sb)
	if err != nil {
		return Collection{}, err
	}
	out := Collection{Skills: []Metadata{}}
	for _, n := range names {
		if len(want) > 0 && !want[n] {
			continue
		}
		fm, _, err := s.readSkill(ctx, sb, path.Join(Dir, n, "SKILL.md"))
		if err != nil {
			if fault.KindOf(err) == fault.NotFound {
				continue // a directory that is not (or no longer) a skill
			}
			return Collection{}, err
		}
		out.Skills = append(out.Skills, Metadata{Name: n, Path: path.Join(Dir, n), Metadata: fm, DependencyCommands: []DependencyCommand{}})
	}
	return out, nil
}

// names lists the skill directories (staging directories left out).
func (s *Service) names(ctx context.Context, sb *sandbox.Sandbox) ([]string, error) {
	resp, _, err := sb.File(ctx, agent.OpReadDir, agent.FileReq{Path: Dir, NoFollow: true, Limit: maxSkills + 64})
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, workspace.FileErrorOf("list", Dir, err)
	}
	var out []string
	for _, e := range resp.Entries {
		if os.FileMode(e.Mode).IsDir() && nameRE.MatchString(e.Name) && len(out) < maxSkills {
			out = append(out, e.Name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Content returns a skill's SKILL.md without its front matter.
func (s *Service) Content(ctx context.Context, c auth.Caller, a NameArgs) (Content, error) {
	if err := a.Validate(); err != nil {
		return Content{}, err
	}
	sb, err := s.resolve(ctx, c, a.Sandbox)
	if err != nil {
		return Content{}, err
	}
	_, body, err := s.readSkill(ctx, sb, path.Join(Dir, a.Name, "SKILL.md"))
	if err != nil {
		if fault.KindOf(err) == fault.NotFound {
			return Content{}, fault.New(fault.NotFound, "no skill named "+a.Name)
		}
		return Content{}, err
	}
	return Content{Name: a.Name, Path: path.Join(Dir, a.Name), Content: body}, nil
}

// Delete removes one skill and answers its metadata.
func (s *Service) Delete(ctx context.Context, c auth.Caller, a NameArgs) (Metadata, error) {
	if err := a.Validate(); err != nil {
		return Metadata{}, err
	}
	sb, err := s.resolve(ctx, c, a.Sandbox)
	if err != nil {
		return Metadata{}, err
	}
	dir := path.Join(Dir, a.Name)
	fm, _, err := s.readSkill(ctx, sb, path.Join(dir, "SKILL.md"))
	if err != nil {
		if fault.KindOf(err) == fault.NotFound {
			return Metadata{}, fault.New(fault.NotFound, "no skill named "+a.Name)
		}
		return Metadata{}, err
	}
	if err := removeAll(ctx, sb, dir); err != nil {
		return Metadata{}, err
	}
	return Metadata{Name: a.Name, Path: dir, Metadata: fm, DependencyCommands: []DependencyCommand{}}, nil
}

// Clear removes every skill of the sandbox.
func (s *Service) Clear(ctx context.Context, c auth.Caller, a ClearArgs) (Cleared, error) {
	sb, err := s.resolve(ctx, c, a.Sandbox)
	if err != nil {
		return Cleared{}, err
	}
	names, err := s.names(ctx, sb)
	if err != nil {
		return Cleared{}, err
	}
	out := Cleared{Deleted: []string{}}
	for _, n := range names {
		if err := removeAll(ctx, sb, path.Join(Dir, n)); err != nil {
			return out, err
		}
		out.Deleted = append(out.Deleted, n)
	}
	out.Count = len(out.Deleted)
	return out, nil
}

func mkdirAll(ctx context.Context, sb *sandbox.Sandbox, p string) error {
	if _, _, err := sb.File(ctx, agent.OpMkdir, agent.FileReq{Path: p, Mode: 0o755, Recursive: true, NoFollow: true}); err != nil {
		return workspace.FileErrorOf("mkdir", p, err)
	}
	return nil
}

// removeAll deletes p and what is below it (never following a symlink);
// a missing p is not an error.
func removeAll(ctx context.Context, sb *sandbox.Sandbox, p string) error {
	_, _, err := sb.File(ctx, agent.OpRemove, agent.FileReq{Path: p, Recursive: true, NoFollow: true})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return workspace.FileErrorOf("delete", p, err)
	}
	return nil
}

// removeQuiet removes the staging directory even when ctx has ended.
func removeQuiet(ctx context.Context, sb *sandbox.Sandbox, p string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_ = removeAll(ctx, sb, p)
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return strings.ToValidUTF8(s, "?")
}

func printable(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return strings.ToValidUTF8(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s), "?")
}
