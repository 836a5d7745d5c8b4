package shell

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// A command's answer: AIO's ShellCommandResult, its console entry, and
// the output as the answer gives it (terminal line ends as newlines,
// invalid UTF-8 replaced, truncated in the middle).

// Result is a command's outcome (AIO's ShellCommandResult).
type Result struct {
	SessionID string          `json:"session_id"`
	Command   string          `json:"command"`
	Status    string          `json:"status"`
	Output    *string         `json:"output"`
	Console   []ConsoleRecord `json:"console"`
	ExitCode  *int            `json:"exit_code"`

	// running is the live command, for a caller that streams
	// (dispatch.WithStreaming); never part of the JSON answer.
	running *Running
}

// Running is the command still running, when the caller asked shell.exec
// to stream (dispatch.WithStreaming); nil otherwise.
func (r Result) Running() *Running { return r.running }

// ConsoleRecord is AIO's console entry.
type ConsoleRecord struct {
	PS1     string `json:"ps1"`
	Command string `json:"command"`
	Output  string `json:"output"`
}

// result reports c with the given status (which may be a response-only
// status like no_change_timeout).
func (s *Session) result(c *command, status string, truncate bool) Result {
	text, _ := c.out.Text()
	text = cleanOutput(text)
	if truncate {
		text = truncateMiddle(text, MaxOutputChars)
	}
	s.mu.Lock()
	cwd := s.cwd
	var exit *int
	if c.exit != nil {
		v := *c.exit
		exit = &v
	}
	s.mu.Unlock()
	return Result{
		SessionID: s.ID, Command: c.text, Status: status, Output: &text, ExitCode: exit,
		Console: []ConsoleRecord{{PS1: "sandbox@sandbox:" + cwd + " $", Command: c.text, Output: text}},
	}
}

// cleanOutput turns terminal line ends into newlines and drops invalid
// UTF-8.
func cleanOutput(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.ToValidUTF8(s, "\uFFFD")
}

// truncateMiddle keeps the first and last max/2 characters of s.
func truncateMiddle(s string, max int) string {
	if max <= 0 || utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	head, tail := max/2, max-max/2
	return fmt.Sprintf("%s\n... [%d characters truncated] ...\n%s", string(r[:head]), len(r)-head-tail, string(r[len(r)-tail:]))
}
