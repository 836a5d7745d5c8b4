package workspace

import (
	"context"
	"encoding/base64"
	"io/fs"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/fault"
)

// Read reads a text file, optionally lines [start_line, end_line)
// (0-based, Python slice semantics: negative counts from the end).
func (s *Service) Read(ctx context.Context, c auth.Caller, a ReadArgs) (ReadResult, error) {
	const op = "read"
	f, err := s.sandboxOf(ctx, c, a.Sandbox)
	if err != nil {
		return ReadResult{}, fileErr(op, a.File, err)
	}
	t, err := s.locate(ctx, f, op, a.File, boolOr(a.Sudo, false))
	if err != nil {
		return ReadResult{}, err
	}
	data, _, err := s.readFile(ctx, f, op, t)
	if err != nil {
		return ReadResult{}, err
	}
	if !utf8.Valid(data) {
		return ReadResult{}, newErr(fault.Invalid, op, t.given, TypeDecode,
			"the file is not UTF-8 text; use the download route for binary files", false, "", nil)
	}
	content := string(data)
	if a.StartLine != nil || a.EndLine != nil {
		lines := splitKeep(content)
		lo, hi := pySlice(len(lines), a.StartLine, a.EndLine)
		content = strings.Join(lines[lo:hi], "")
	}
	return ReadResult{Content: content, File: t.given}, nil
}

// splitKeep splits after each '\n', keeping it.
func splitKeep(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// pySlice clamps [start:end] the way Python slices do.
func pySlice(n int, start, end *int) (int, int) {
	norm := func(p *int, def int) int {
		if p == nil {
			return def
		}
		v := *p
		if v < 0 {
			v += n
		}
		return min(max(v, 0), n)
	}
	lo, hi := norm(start, 0), norm(end, n)
	if hi < lo {
		hi = lo
	}
	return lo, hi
}

// decodeContent turns a write's content into bytes.
func decodeContent(op, p string, a WriteArgs) ([]byte, error) {
	switch enc := strOr(a.Encoding, "utf-8"); enc {
	case "utf-8", "utf8", "raw":
		text := a.Content
		if boolOr(a.LeadingNewline, false) {
			text = "\n" + text
		}
		if boolOr(a.TrailingNewline, false) {
			text += "\n"
		}
		return []byte(text), nil
	case "base64":
		b, err := base64.StdEncoding.DecodeString(a.Content)
		if err != nil {
			b, err = base64.RawStdEncoding.DecodeString(a.Content)
		}
		if err != nil {
			return nil, newErr(fault.Invalid, op, p, TypeDecode, "content is not valid base64", false, "", nil)
		}
		return b, nil
	default:
		return nil, newErr(fault.Invalid, op, p, TypeDecode, "encoding must be utf-8, base64 or raw", false, "", nil)
	}
}

// Write writes (or appends to) a file atomically, creating missing parent
// directories.
func (s *Service) Write(ctx context.Context, c auth.Caller, a WriteArgs) (WriteResult, error) {
	const op = "write"
	data, err := decodeContent(op, a.File, a)
	if err != nil {
		return WriteResult{}, err
	}
	if int64(len(data)) > s.cfg.MaxFileSize {
		return WriteResult{}, s.tooLarge(op, a.File)
	}
	f, err := s.sandboxOf(ctx, c, a.Sandbox)
	if err != nil {
		return WriteResult{}, fileErr(op, a.File, err)
	}
	t, err := s.locate(ctx, f, op, a.File, boolOr(a.Sudo, false))
	if err != nil {
		return WriteResult{}, err
	}
	full := data
	if boolOr(a.Append, false) && t.exists {
		old, _, err := s.readFile(ctx, f, op, t)
		if err != nil {
			return WriteResult{}, err
		}
		full = append(old, data...)
	}
	if err := s.writeFile(ctx, f, op, t, full, true); err != nil {
		return WriteResult{}, err
	}
	n := len(data)
	return WriteResult{File: t.given, BytesWritten: &n}, nil
}

// Replace replaces every occurrence of old_str.
func (s *Service) Replace(ctx context.Context, c auth.Caller, a ReplaceArgs) (ReplaceResult, error) {
	const op = "replace"
	if a.OldStr == "" {
		return ReplaceResult{}, newErr(fault.Invalid, op, a.File, TypeInvalidTarget, "old_str must not be empty", false, "", nil)
	}
	f, err := s.sandboxOf(ctx, c, a.Sandbox)
	if err != nil {
		return ReplaceResult{}, fileErr(op, a.File, err)
	}
	t, err := s.locate(ctx, f, op, a.File, boolOr(a.Sudo, false))
	if err != nil {
		return ReplaceResult{}, err
	}
	data, _, err := s.readFile(ctx, f, op, t)
	if err != nil {
		return ReplaceResult{}, err
	}
	n := strings.Count(string(data), a.OldStr)
	if n > 0 {
		out := strings.ReplaceAll(string(data), a.OldStr, a.NewStr)
		if err := s.writeFile(ctx, f, op, t, []byte(out), false); err != nil {
			return ReplaceResult{}, err
		}
	}
	return ReplaceResult{File: t.given, ReplacedCount: n}, nil
}

// maxRegexLen bounds a client regular expression (Go's regexp is linear
// in the input; the cap bounds the compiled program).
const maxRegexLen = agent.MaxPatternLen

func compileRegex(op, p, expr string) (*regexp.Regexp, error) {
	if expr == "" || len(expr) > maxRegexLen {
		return nil, newErr(fault.Invalid, op, p, TypeInvalidTarget, "regex is empty or too long", false, "", nil)
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, newErr(fault.Invalid, op, p, TypeInvalidTarget, "invalid regular expression: "+err.Error(), false, "", nil)
	}
	return re, nil
}

// Search returns the lines of one file that match a regular expression,
// with their 0-based line numbers (as read's start_line counts).
func (s *Service) Search(ctx context.Context, c auth.Caller, a SearchArgs) (SearchResult, error) {
	const op = "search"
	re, err := compileRegex(op, a.File, a.Regex)
	if err != nil {
		return SearchResult{}, err
	}
	f, err := s.sandboxOf(ctx, c, a.Sandbox)
	if err != nil {
		return SearchResult{}, fileErr(op, a.File, err)
	}
	t, err := s.locate(ctx, f, op, a.File, boolOr(a.Sudo, false))
	if err != nil {
		return SearchResult{}, err
	}
	data, _, err := s.readFile(ctx, f, op, t)
	if err != nil {
		return SearchResult{}, err
	}
	res := SearchResult{File: t.given, Matches: []string{}, LineNumbers: []int{}}
	for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if re.MatchString(line) {
			res.Matches = append(res.Matches, strings.ToValidUTF8(line, "\uFFFD"))
			res.LineNumbers = append(res.LineNumbers, i)
		}
	}
	return res, nil
}

// walkDir locates a directory and walks it in the sandbox.
func (s *Service) walkDir(ctx context.Context, f FS, op, p string, w agent.WalkReq) (target, *agent.WalkResp, error) {
	t, err := s.locate(ctx, f, op, p, false)
	if err != nil {
		return t, nil, err
	}
	if !t.exists {
		return t, nil, newErr(fault.NotFound, op, t.given, TypeNotFound, "no such file or directory", false, "", nil)
	}
	if !t.isDir() {
		return t, nil, newErr(fault.Invalid, op, t.given, TypeInvalidTarget, "not a directory", false, "", nil)
	}
	if err := agent.CheckPatterns(w.Names, w.Exclude, w.Extensions, []string{w.Pattern}); err != nil {
		return t, nil, newErr(fault.Invalid, op, t.given, TypeInvalidTarget, err.Error(), false, "", nil)
	}
	w.Deny = s.cfg.Policy.deny()
	resp, _, err := f.File(ctx, agent.OpWalk, agent.FileReq{Path: t.resolved, NoFollow: true, Walk: &w})
	if err != nil {
		return t, nil, fileErr(op, t.given, err)
	}
	return t, resp.Walk, nil
}

// entryPath is the path of a walk entry as the client named the root.
func entryPath(t target, rel string) string { return path.Join(t.given, rel) }

// Find returns the files below path whose name matches glob (a pattern
// with '/' matches the relative path, "**" spanning directories).
func (s *Service) Find(ctx context.Context, c auth.Caller, a FindArgs) (FindResult, error) {
	const op = "find"
	if a.Glob == "" {
		return FindResult{}, newErr(fault.Invalid, op, a.Path, TypeInvalidTarget, "glob must not be empty", false, "", nil)
	}
	f, err := s.sandboxOf(ctx, c, a.Sandbox)
	if err != nil {
		return FindResult{}, fileErr(op, a.Path, err)
	}
	w := agent.WalkReq{Hidden: true, FilesOnly: true, Limit: s.cfg.MaxFilesPerRequest}
	if strings.Contains(a.Glob, "/") {
		w.Pattern = a.Glob
	} else {
		w.Names = []string{a.Glob}
	}
	t, resp, err := s.walkDir(ctx, f, op, a.Path, w)
	if err != nil {
		return FindResult{}, err
	}
	res := FindResult{Path: t.given, Files: []string{}, Truncated: resp.Truncated}
	for _, e := range resp.Entries {
		res.Files = append(res.Files, entryPath(t, e.Name))
	}
	return res, nil
}

// rgTypes maps ripgrep type aliases to globs (the common ones; an unknown
// alias is refused rather than ignored).
var rgTypes = map[string][]string{
	"py":     {"*.py", "*.pyi"},
	"python": {"*.py", "*.pyi"},
	"js":     {"*.js", "*.mjs", "*.cjs", "*.jsx"},
	"ts":     {"*.ts", "*.tsx", "*.mts", "*.cts"},
	"go":     {"*.go"},
	"rust":   {"*.rs"},
	"java":   {"*.java"},
	"c":      {"*.c", "*.h"},
	"cpp":    {"*.cpp", "*.cc", "*.cxx", "*.hpp", "*.hh", "*.hxx", "*.h"},
	"md":     {"*.md", "*.markdown"},
	"json":   {"*.json"},
	"yaml":   {"*.yaml", "*.yml"},
	"toml":   {"*.toml"},
	"sh":     {"*.sh", "*.bash", "*.zsh"},
	"html":   {"*.html", "*.htm"},
	"css":    {"*.css", "*.scss"},
	"rb":     {"*.rb"},
	"ruby":   {"*.rb"},
	"php":    {"*.php"},
	"txt":    {"*.txt"},
	"sql":    {"*.sql"},
	"xml":    {"*.xml"},
}

// parseSize reads ripgrep's size syntax: 1M, 500K, 2G, 1024.
func parseSize(v string) (int64, bool) {
	v = strings.TrimSpace(v)
	mult := int64(1)
	if v != "" {
		switch v[len(v)-1] {
		case 'K', 'k':
			mult, v = 1<<10, v[:len(v)-1]
		case 'M', 'm':
			mult, v = 1<<20, v[:len(v)-1]
		case 'G', 'g':
			mult, v = 1<<30, v[:len(v)-1]
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > 1<<40/mult {
		return 0, false
	}
	return n * mult, true
}

// Grep searches the files below path (or path itself) in the sandbox.
func (s *Service) Grep(ctx context.Context, c auth.Caller, a GrepArgs) (GrepResult, error) {
	const op = "grep"
	if a.Pattern == "" || len(a.Pattern) > maxRegexLen {
		return GrepResult{}, newErr(fault.Invalid, op, a.Path, TypeInvalidTarget, "pattern is empty or too long", false, "", nil)
	}
	g := agent.GrepReq{
		Pattern: a.Pattern, Fixed: boolOr(a.FixedStrings, false), CaseInsensitive: boolOr(a.CaseInsensitive, false),
		Multiline: boolOr(a.Multiline, false), Include: a.Include, Exclude: a.Exclude,
		Before: intOr(a.ContextBefore, 0), After: intOr(a.ContextAfter, 0),
		MaxResults: intOr(a.MaxResults, 500), Offset: intOr(a.Offset, 0), Recursive: boolOr(a.Recursive, true),
		MaxFiles: s.cfg.MaxFilesPerRequest,
		Deny:     s.cfg.Policy.deny(),
	}
	bad := func(msg string) error {
		return newErr(fault.Invalid, op, a.Path, TypeInvalidTarget, msg, false, "", nil)
	}
	switch {
	case g.Before < 0 || g.Before > agent.MaxGrepContext || g.After < 0 || g.After > agent.MaxGrepContext:
		return GrepResult{}, bad("context_before and context_after must be between 0 and 20")
	case g.MaxResults < 1 || g.MaxResults > 10000:
		return GrepResult{}, bad("max_results must be between 1 and 10000")
	case g.Offset < 0:
		return GrepResult{}, bad("offset must not be negative")
	}
	if _, err := regexp.Compile(a.Pattern); err != nil && !g.Fixed {
		return GrepResult{}, bad("invalid regular expression: " + err.Error())
	}
	size, ok := parseSize(strOr(a.MaxFileSize, "1M"))
	if !ok {
		return GrepResult{}, bad("max_file_size must be a size like 1M or 500K")
	}
	g.MaxFileSize = size
	if a.Type != nil && *a.Type != "" {
		globs, ok := rgTypes[*a.Type]
		if !ok {
			return GrepResult{}, bad("unknown file type " + strconv.Quote(*a.Type))
		}
		g.Include = append(append([]string(nil), g.Include...), globs...)
	}
	if err := agent.CheckPatterns(g.Include, g.Exclude); err != nil {
		return GrepResult{}, bad(err.Error())
	}
	f, err := s.sandboxOf(ctx, c, a.Sandbox)
	if err != nil {
		return GrepResult{}, fileErr(op, a.Path, err)
	}
	t, err := s.locate(ctx, f, op, a.Path, false)
	if err != nil {
		return GrepResult{}, err
	}
	if !t.exists {
		return GrepResult{}, newErr(fault.NotFound, op, t.given, TypeNotFound, "no such file or directory", false, "", nil)
	}
	resp, _, err := f.File(ctx, agent.OpGrep, agent.FileReq{Path: t.resolved, NoFollow: true, Grep: &g})
	if err != nil {
		return GrepResult{}, fileErr(op, t.given, err)
	}
	gr := resp.Grep
	res := GrepResult{Path: t.given, Pattern: a.Pattern, Matches: []GrepMatch{}, MatchCount: gr.MatchCount,
		FilesSearched: &gr.FilesSearched, FilesMatched: &gr.FilesMatched, Truncated: gr.Truncated}
	for _, m := range gr.Matches {
		file := m.File
		if t.isDir() {
			// Name the file below the root the client gave.
			if rel, ok := strings.CutPrefix(m.File, t.resolved+"/"); ok {
				file = path.Join(t.given, rel)
			}
		} else {
			file = t.given
		}
		res.Matches = append(res.Matches, GrepMatch{File: file, LineNumber: m.Line, LineContent: m.Text,
			ContextBefore: nonNil(m.Before), ContextAfter: nonNil(m.After)})
	}
	return res, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// isoTime formats a modification time as AIO does (ISO 8601).
func isoTime(ns int64) *string {
	s := time.Unix(0, ns).UTC().Format("2006-01-02T15:04:05.000000Z07:00")
	return &s
}

// Glob matches a pattern ("**", "*", "?", "[…]") below path.
func (s *Service) Glob(ctx context.Context, c auth.Caller, a GlobArgs) (GlobResult, error) {
	const op = "glob"
	if a.Pattern == "" {
		return GlobResult{}, newErr(fault.Invalid, op, a.Path, TypeInvalidTarget, "pattern must not be empty", false, "", nil)
	}
	maxRes := intOr(a.MaxResults, 5000)
	if maxRes < 1 || maxRes > 50000 {
		return GlobResult{}, newErr(fault.Invalid, op, a.Path, TypeInvalidTarget, "max_results must be between 1 and 50000", false, "", nil)
	}
	sortBy := strOr(a.SortBy, "path")
	switch sortBy {
	case "path", "name", "size", "modified":
	default:
		return GlobResult{}, newErr(fault.Invalid, op, a.Path, TypeInvalidTarget, "sort_by must be path, name, size or modified", false, "", nil)
	}
	f, err := s.sandboxOf(ctx, c, a.Sandbox)
	if err != nil {
		return GlobResult{}, fileErr(op, a.Path, err)
	}
	w := agent.WalkReq{Pattern: a.Pattern, Exclude: a.Exclude, Hidden: boolOr(a.IncludeHidden, false),
		FilesOnly: boolOr(a.FilesOnly, true), Sort: sortBy, Desc: boolOr(a.SortDesc, false),
		Limit: min(maxRes, s.cfg.MaxFilesPerRequest)}
	t, resp, err := s.walkDir(ctx, f, op, a.Path, w)
	if err != nil {
		return GlobResult{}, err
	}
	meta := boolOr(a.IncludeMetadata, true)
	res := GlobResult{Path: t.given, Pattern: a.Pattern, Files: []GlobFileInfo{}, TotalCount: resp.Total,
		Truncated: resp.Truncated}
	for _, e := range resp.Entries {
		gi := GlobFileInfo{Path: entryPath(t, e.Name), Name: path.Base(e.Name), IsDirectory: fs.FileMode(e.Mode).IsDir()}
		if meta {
			size := e.Size
			gi.Size, gi.ModifiedTime = &size, isoTime(e.ModTime)
		}
		res.Files = append(res.Files, gi)
	}
	return res, nil
}

// List lists a directory, optionally recursively.
func (s *Service) List(ctx context.Context, c auth.Caller, a ListArgs) (ListResult, error) {
	const op = "list"
	sortBy := strOr(a.SortBy, "name")
	switch sortBy {
	case "name", "size", "modified", "type":
	default:
		return ListResult{}, newErr(fault.Invalid, op, a.Path, TypeInvalidTarget, "sort_by must be name, size, modified or type", false, "", nil)
	}
	f, err := s.sandboxOf(ctx, c, a.Sandbox)
	if err != nil {
		return ListResult{}, fileErr(op, a.Path, err)
	}
	depth := 1
	if boolOr(a.Recursive, false) {
		depth = intOr(a.MaxDepth, 0) // 0: the walk's own cap
		if depth < 0 {
			return ListResult{}, newErr(fault.Invalid, op, a.Path, TypeInvalidTarget, "max_depth must not be negative", false, "", nil)
		}
	}
	exts := make([]string, 0, len(a.FileTypes))
	for _, e := range a.FileTypes {
		if e != "" && !strings.HasPrefix(e, ".") {
			e = "." + e
		}
		exts = append(exts, e)
	}
	w := agent.WalkReq{MaxDepth: depth, Hidden: boolOr(a.ShowHidden, true), Extensions: exts,
		Sort: sortBy, Desc: boolOr(a.SortDesc, false), Limit: s.cfg.MaxFilesPerRequest}
	if len(exts) == 0 {
		w.Extensions = nil
	}
	t, resp, err := s.walkDir(ctx, f, op, a.Path, w)
	if err != nil {
		return ListResult{}, err
	}
	withSize, withPerm := boolOr(a.IncludeSize, true), boolOr(a.IncludePermissions, false)
	res := ListResult{Path: t.given, Files: []FileInfo{}, Truncated: resp.Truncated}
	for _, e := range resp.Entries {
		mode := fs.FileMode(e.Mode)
		fi := FileInfo{Name: path.Base(e.Name), Path: entryPath(t, e.Name), IsDirectory: mode.IsDir(), ModifiedTime: isoTime(e.ModTime)}
		if withSize && !mode.IsDir() {
			size := e.Size
			fi.Size = &size
		}
		if withPerm {
			perm := strconv.FormatUint(uint64(mode.Perm()), 8)
			fi.Permissions = &perm
		}
		if ext := path.Ext(fi.Name); ext != "" && !mode.IsDir() && ext != fi.Name {
			fi.Extension = &ext
		}
		if mode.IsDir() {
			res.DirectoryCount++
		} else {
			res.FileCount++
		}
		res.Files = append(res.Files, fi)
	}
	res.TotalCount = len(res.Files)
	return res, nil
}
