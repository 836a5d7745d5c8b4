package workspace

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/fault"
)

// snippetLines is how many lines around an edit the editor shows.
const snippetLines = 4

// history is one sandbox's str_replace_editor undo stack, bounded by
// maxUndoPerSandbox entries and maxUndoBytesPerSandbox bytes.
type history struct {
	entries []undoEntry // oldest first
	bytes   int
}

type undoEntry struct {
	path    string // resolved path
	content string // the content before the edit
	existed bool
}

func (s *Service) pushUndo(sandbox string, e undoEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.undo[sandbox]
	if h == nil {
		if len(s.undo) >= maxUndoSandboxes {
			for k := range s.undo { // forget an arbitrary other sandbox's history
				delete(s.undo, k)
				break
			}
		}
		h = &history{}
		s.undo[sandbox] = h
	}
	if len(e.content) > maxUndoBytesPerSandbox {
		return // too large to keep: undo will say there is no history
	}
	h.entries = append(h.entries, e)
	h.bytes += len(e.content)
	for len(h.entries) > maxUndoPerSandbox || h.bytes > maxUndoBytesPerSandbox {
		h.bytes -= len(h.entries[0].content)
		h.entries = h.entries[1:]
	}
}

// popUndo removes and returns the newest entry for p.
func (s *Service) popUndo(sandbox, p string) (undoEntry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.undo[sandbox]
	if h == nil {
		return undoEntry{}, false
	}
	for i := len(h.entries) - 1; i >= 0; i-- {
		if h.entries[i].path == p {
			e := h.entries[i]
			h.entries = append(h.entries[:i], h.entries[i+1:]...)
			h.bytes -= len(e.content)
			return e, true
		}
	}
	return undoEntry{}, false
}

// Editor is AIO's str_replace_editor (Anthropic's text editor tool, as
// openhands_aci implements it): view, create, str_replace, insert,
// undo_edit.
func (s *Service) Editor(ctx context.Context, c auth.Caller, a EditorArgs) (EditorResult, error) {
	op := "str_replace_editor"
	f, err := s.sandboxOf(ctx, c, a.Sandbox)
	if err != nil {
		return EditorResult{}, fileErr(op, a.Path, err)
	}
	bad := func(msg string) error {
		return newErr(fault.Invalid, op, a.Path, TypeInvalidTarget, msg, false, "", nil)
	}
	t, err := s.locate(ctx, f, op, a.Path, false)
	if err != nil {
		return EditorResult{}, err
	}
	res := EditorResult{Path: t.given, PrevExist: t.exists}
	switch a.Command {
	case "view":
		if t.isDir() {
			return s.viewDir(ctx, f, op, t, res)
		}
		data, err := s.text(ctx, f, op, t)
		if err != nil {
			return res, err
		}
		lines := textLines(data)
		start, end := 1, len(lines)
		if len(a.ViewRange) > 0 {
			if len(a.ViewRange) != 2 {
				return res, bad("view_range must hold two integers")
			}
			start, end = a.ViewRange[0], a.ViewRange[1]
			if end == -1 {
				end = len(lines)
			}
			if start < 1 || start > max(len(lines), 1) || end < start-1 || end > len(lines) {
				return res, bad(fmt.Sprintf("invalid view_range %v: the file has %d lines", a.ViewRange, len(lines)))
			}
		}
		res.Output = "Here's the result of running `cat -n` on " + t.given + ":\n" + numbered(lines[start-1:end], start) + "\n"
		return res, nil
	case "create":
		if a.FileText == nil {
			return res, bad("parameter file_text is required for command create")
		}
		if t.exists {
			return res, newErr(fault.Conflict, op, t.given, TypeAlreadyExists,
				"file already exists; cannot overwrite files using command create", false, "", nil)
		}
		if err := s.writeFile(ctx, f, op, t, []byte(*a.FileText), true); err != nil {
			return res, err
		}
		s.pushUndo(f.ID(), undoEntry{path: t.resolved, existed: false})
		res.Output = "File created successfully at: " + t.given
		res.NewContent = a.FileText
		return res, nil
	case "str_replace":
		if a.OldStr == nil {
			return res, bad("parameter old_str is required for command str_replace")
		}
		old, err := s.text(ctx, f, op, t)
		if err != nil {
			return res, err
		}
		newStr := strOr(a.NewStr, "")
		n := strings.Count(old, *a.OldStr)
		if *a.OldStr == "" || n == 0 {
			return res, bad("no replacement was performed: old_str did not appear verbatim in " + t.given)
		}
		var out string
		var at int
		switch mode := strOr(a.ReplaceMode, ""); mode {
		case "":
			if n > 1 {
				return res, bad(fmt.Sprintf("no replacement was performed: old_str occurs %d times (lines %v); make it unique or set replace_mode",
					n, occurrenceLines(old, *a.OldStr)))
			}
			at = strings.Index(old, *a.OldStr)
			out = old[:at] + newStr + old[at+len(*a.OldStr):]
		case "ALL":
			at = strings.Index(old, *a.OldStr)
			out = strings.ReplaceAll(old, *a.OldStr, newStr)
		case "FIRST":
			at = strings.Index(old, *a.OldStr)
			out = old[:at] + newStr + old[at+len(*a.OldStr):]
		case "LAST":
			at = strings.LastIndex(old, *a.OldStr)
			out = old[:at] + newStr + old[at+len(*a.OldStr):]
		default:
			return res, bad("replace_mode must be ALL, FIRST or LAST")
		}
		if err := s.writeFile(ctx, f, op, t, []byte(out), false); err != nil {
			return res, err
		}
		s.pushUndo(f.ID(), undoEntry{path: t.resolved, content: old, existed: true})
		line := strings.Count(old[:at], "\n")
		res.Output = editedOutput(t.given, out, line, strings.Count(newStr, "\n"))
		res.OldContent, res.NewContent = &old, &out
		return res, nil
	case "insert":
		if a.InsertLine == nil || a.NewStr == nil {
			return res, bad("parameters insert_line and new_str are required for command insert")
		}
		old, err := s.text(ctx, f, op, t)
		if err != nil {
			return res, err
		}
		lines := textLines(old)
		at := *a.InsertLine
		if at < 0 || at > len(lines) {
			return res, bad(fmt.Sprintf("invalid insert_line %d: it must be between 0 and %d", at, len(lines)))
		}
		ins := strings.Split(*a.NewStr, "\n")
		merged := append(append(append([]string{}, lines[:at]...), ins...), lines[at:]...)
		out := strings.Join(merged, "\n")
		if old == "" || strings.HasSuffix(old, "\n") {
			out += "\n"
		}
		if err := s.writeFile(ctx, f, op, t, []byte(out), false); err != nil {
			return res, err
		}
		s.pushUndo(f.ID(), undoEntry{path: t.resolved, content: old, existed: true})
		res.Output = editedOutput(t.given, out, at, len(ins)-1)
		res.OldContent, res.NewContent = &old, &out
		return res, nil
	case "undo_edit":
		e, ok := s.popUndo(f.ID(), t.resolved)
		if !ok {
			return res, bad("no edit history found for " + t.given)
		}
		if !e.existed {
			// Undoing a create removes the file.
			if _, _, err := f.File(ctx, agent.OpRemove, agent.FileReq{Path: t.resolved, NoFollow: true}); err != nil {
				return res, fileErr(op, t.given, err)
			}
			res.Output = "Last edit to " + t.given + " undone successfully (the file was removed)."
			return res, nil
		}
		if err := s.writeFile(ctx, f, op, t, []byte(e.content), true); err != nil {
			return res, err
		}
		content := e.content
		res.NewContent = &content
		res.Output = "Last edit to " + t.given + " undone successfully. Here's the result of running `cat -n` on " + t.given + ":\n" +
			numbered(textLines(content), 1) + "\n"
		return res, nil
	}
	return res, bad("command must be view, create, str_replace, insert or undo_edit")
}

// text reads a located file as UTF-8 text.
func (s *Service) text(ctx context.Context, f FS, op string, t target) (string, error) {
	data, _, err := s.readFile(ctx, f, op, t)
	if err != nil {
		return "", err
	}
	if !utf8.Valid(data) {
		return "", newErr(fault.Invalid, op, t.given, TypeDecode, "the file is not UTF-8 text", false, "", nil)
	}
	return string(data), nil
}

func (s *Service) viewDir(ctx context.Context, f FS, op string, t target, res EditorResult) (EditorResult, error) {
	w := agent.WalkReq{MaxDepth: 2, Limit: s.cfg.MaxFilesPerRequest, Deny: s.cfg.Policy.deny()}
	resp, _, err := f.File(ctx, agent.OpWalk, agent.FileReq{Path: t.resolved, NoFollow: true, Walk: &w})
	if err != nil {
		return res, fileErr(op, t.given, err)
	}
	var b strings.Builder
	b.WriteString("Here's the files and directories up to 2 levels deep in " + t.given + ", excluding hidden items:\n")
	b.WriteString(t.given + "/\n")
	for _, e := range resp.Walk.Entries {
		b.WriteString(path.Join(t.given, e.Name))
		if fs.FileMode(e.Mode).IsDir() {
			b.WriteString("/")
		}
		b.WriteString("\n")
	}
	if resp.Walk.Truncated {
		b.WriteString("… (truncated at SANDBOX_MAX_FILES_PER_REQUEST entries)\n")
	}
	res.Output = b.String()
	return res, nil
}

// textLines splits text into lines; a final newline ends the last line
// rather than starting an empty one.
func textLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// numbered renders lines as cat -n does, starting at first.
func numbered(lines []string, first int) string {
	var b strings.Builder
	for i, l := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%6d\t%s", first+i, l)
	}
	return b.String()
}

// editedOutput is the editor's answer after an edit: a numbered snippet
// around the changed lines (0-based line, extra added lines).
func editedOutput(p, content string, line, extra int) string {
	lines := strings.Split(content, "\n")
	start := max(0, line-snippetLines)
	end := min(len(lines), line+extra+snippetLines+1)
	return "The file " + p + " has been edited. Here's the result of running `cat -n` on a snippet of " + p + ":\n" +
		numbered(lines[start:end], start+1) + "\nReview the changes and make sure they are as expected. Edit the file again if necessary."
}

func occurrenceLines(s, sub string) []string {
	var out []string
	off := 0
	for len(out) < 20 {
		i := strings.Index(s[off:], sub)
		if i < 0 {
			break
		}
		out = append(out, strconv.Itoa(strings.Count(s[:off+i], "\n")+1))
		off += i + max(len(sub), 1)
	}
	return out
}
