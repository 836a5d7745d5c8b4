package shell

import (
	"fmt"
	"math"
	"strings"
	"syscall"
	"time"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sessions"
)

// The argument types below are both the JSON bodies of AIO's routes (field
// names as AIO spells them) and the typed arguments of the dispatcher's
// tools; Sandbox names the sandbox ("" = the caller's default one).
// Validate holds each field's rule (the dispatcher runs it for every
// caller); its errors are Invalid faults naming the field.

// ShellExecArgs is POST /v1/shell/exec.
type ShellExecArgs struct {
	dispatch.On
	ID               *string  `json:"id,omitempty"`
	ExecDir          *string  `json:"exec_dir,omitempty"`
	Command          string   `json:"command"`
	AsyncMode        bool     `json:"async_mode,omitempty"`
	Timeout          *float64 `json:"timeout,omitempty"`
	Strict           *bool    `json:"strict,omitempty"`
	NoChangeTimeout  *int     `json:"no_change_timeout,omitempty"`
	HardTimeout      *float64 `json:"hard_timeout,omitempty"`
	PreserveSymlinks *bool    `json:"preserve_symlinks,omitempty"`
	Truncate         *bool    `json:"truncate,omitempty"`
}

// ShellSessionArgs names a session (view, kill, delete).
type ShellSessionArgs struct {
	dispatch.On
	ID string `json:"id"`
}

// ShellWaitArgs is POST /v1/shell/wait.
type ShellWaitArgs struct {
	dispatch.On
	ID             string `json:"id"`
	Seconds        *int   `json:"seconds,omitempty"`
	MaxWaitSeconds *int   `json:"max_wait_seconds,omitempty"`
}

// ShellWriteArgs is POST /v1/shell/write.
type ShellWriteArgs struct {
	dispatch.On
	ID         string `json:"id"`
	Input      string `json:"input"`
	PressEnter bool   `json:"press_enter"`
}

// ShellCreateArgs is POST /v1/shell/sessions/create.
type ShellCreateArgs struct {
	dispatch.On
	ID               string  `json:"id,omitempty"`
	ExecDir          *string `json:"exec_dir,omitempty"`
	NoChangeTimeout  *int    `json:"no_change_timeout,omitempty"`
	PreserveSymlinks *bool   `json:"preserve_symlinks,omitempty"`
	// Terminal makes an interactive session (readline, a prompt) for a
	// live terminal (GET /v1/shell/terminal-url).
	Terminal bool `json:"-"`
}

// ShellUpdateArgs is POST /v1/shell/sessions/update.
type ShellUpdateArgs struct {
	dispatch.On
	ID              string `json:"id"`
	NoChangeTimeout *int   `json:"no_change_timeout,omitempty"`
}

// ListArgs lists sessions: of Sandbox, or (All) of every sandbox the
// caller may see.
type ListArgs struct {
	dispatch.On
	All bool `json:"all,omitempty"`
}

// TerminalArgs opens a live terminal (WS /v1/shell/ws).
type TerminalArgs struct {
	dispatch.On
	SessionID string `json:"session_id,omitempty"`
	Rows      int    `json:"rows,omitempty"`
	Cols      int    `json:"cols,omitempty"`
}

// BashExecArgs is POST /v1/bash/exec.
type BashExecArgs struct {
	dispatch.On
	SessionID       *string           `json:"session_id,omitempty"`
	Command         string            `json:"command"`
	ExecDir         *string           `json:"exec_dir,omitempty"`
	Env             map[string]string `json:"env,omitempty"`
	AsyncMode       bool              `json:"async_mode,omitempty"`
	Timeout         *float64          `json:"timeout,omitempty"`
	HardTimeout     *float64          `json:"hard_timeout,omitempty"`
	MaxOutputLength *int              `json:"max_output_length,omitempty"`
}

// BashOutputArgs is POST /v1/bash/output.
type BashOutputArgs struct {
	dispatch.On
	SessionID    string   `json:"session_id"`
	CommandID    *string  `json:"command_id,omitempty"`
	Offset       int64    `json:"offset,omitempty"`
	StderrOffset int64    `json:"stderr_offset,omitempty"`
	Wait         bool     `json:"wait,omitempty"`
	WaitTimeout  *float64 `json:"wait_timeout,omitempty"`
}

// BashWriteArgs is POST /v1/bash/write.
type BashWriteArgs struct {
	dispatch.On
	SessionID string  `json:"session_id"`
	CommandID *string `json:"command_id,omitempty"`
	Input     string  `json:"input"`
}

// BashKillArgs is POST /v1/bash/kill.
type BashKillArgs struct {
	dispatch.On
	SessionID string  `json:"session_id"`
	CommandID *string `json:"command_id,omitempty"`
	Signal    string  `json:"signal,omitempty"`
}

// BashCreateArgs is POST /v1/bash/sessions/create.
type BashCreateArgs struct {
	dispatch.On
	SessionID    *string `json:"session_id,omitempty"`
	ExecDir      *string `json:"exec_dir,omitempty"`
	SnapshotPath *string `json:"snapshot_path,omitempty"`
}

// BashSessionArgs names a bash session (close).
type BashSessionArgs struct {
	dispatch.On
	SessionID string `json:"session_id"`
}

// InfoArgs names the sandbox of GET /v1/sandbox (and Language that of
// GET /v1/sandbox/packages/{python,nodejs}).
type InfoArgs struct {
	dispatch.On
	Language string `json:"language,omitempty"`
}

// Checker is implemented by every argument type (dispatch.Validator).
type Checker interface{ Validate() error }

// seconds checks an optional number of seconds in (0, max].
func seconds(field string, v *float64, max time.Duration) (time.Duration, error) {
	if v == nil {
		return 0, nil
	}
	if math.IsNaN(*v) || math.IsInf(*v, 0) || *v <= 0 || *v > max.Seconds() {
		return 0, fault.InvalidField(field, fmt.Sprintf("%s must be a number of seconds in (0, %d]", field, int(max.Seconds())))
	}
	return time.Duration(*v * float64(time.Second)), nil
}

// intSeconds checks an optional whole number of seconds in [1, max].
func intSeconds(field string, v *int, max time.Duration) (time.Duration, error) {
	if v == nil {
		return 0, nil
	}
	if *v < 1 || *v > int(max.Seconds()) {
		return 0, fault.InvalidField(field, fmt.Sprintf("%s must be a whole number of seconds in [1, %d]", field, int(max.Seconds())))
	}
	return time.Duration(*v) * time.Second, nil
}

// secondsOf is a validated optional number of seconds (0 when absent).
func secondsOf(v *float64) time.Duration {
	d, _ := seconds("", v, MaxWait)
	return d
}

// wholeSeconds is a validated optional whole number of seconds (0 when
// absent).
func wholeSeconds(v *int) time.Duration {
	d, _ := intSeconds("", v, MaxWait)
	return d
}

func (a ShellExecArgs) timeout() time.Duration     { return secondsOf(a.Timeout) }
func (a ShellExecArgs) hardTimeout() time.Duration { return secondsOf(a.HardTimeout) }
func (a ShellExecArgs) noChange() time.Duration    { return wholeSeconds(a.NoChangeTimeout) }

func checkCommand(cmd string) error {
	switch {
	case strings.TrimSpace(cmd) == "":
		return fault.InvalidField("command", "command is required")
	case len(cmd) > maxCommandBytes:
		return fault.InvalidField("command", fmt.Sprintf("command longer than %d bytes", maxCommandBytes))
	case strings.IndexByte(cmd, 0) >= 0:
		return fault.InvalidField("command", "command holds a NUL byte")
	}
	return nil
}

func checkDir(field string, dir *string) error {
	if dir == nil || *dir == "" {
		return nil
	}
	if agent.CheckPath(*dir) != nil {
		return fault.InvalidField(field, field+" must be an absolute, clean path")
	}
	return nil
}

func checkID(field, id string, required bool) error {
	if id == "" {
		if required {
			return fault.InvalidField(field, field+" is required")
		}
		return nil
	}
	return sessions.CheckID(field, id)
}

// Validate implements dispatch.Validator.
func (a ShellExecArgs) Validate() error {
	if err := checkCommand(a.Command); err != nil {
		return err
	}
	if a.ID != nil {
		if err := checkID("id", *a.ID, false); err != nil {
			return err
		}
	}
	if err := checkDir("exec_dir", a.ExecDir); err != nil {
		return err
	}
	if _, err := seconds("timeout", a.Timeout, MaxWait); err != nil {
		return err
	}
	if _, err := seconds("hard_timeout", a.HardTimeout, MaxWait); err != nil {
		return err
	}
	_, err := intSeconds("no_change_timeout", a.NoChangeTimeout, MaxWait)
	return err
}

// Validate implements dispatch.Validator.
func (a ShellSessionArgs) Validate() error { return checkID("id", a.ID, true) }

// Validate implements dispatch.Validator.
func (a ShellWaitArgs) Validate() error {
	if err := checkID("id", a.ID, true); err != nil {
		return err
	}
	if _, err := intSeconds("seconds", a.Seconds, MaxWait); err != nil {
		return err
	}
	_, err := intSeconds("max_wait_seconds", a.MaxWaitSeconds, MaxWait)
	return err
}

// Validate implements dispatch.Validator.
func (a ShellWriteArgs) Validate() error {
	if err := checkID("id", a.ID, true); err != nil {
		return err
	}
	if len(a.Input) > MaxInputBytes {
		return fault.InvalidField("input", fmt.Sprintf("input longer than %d bytes", MaxInputBytes))
	}
	return nil
}

// Validate implements dispatch.Validator.
func (a ShellCreateArgs) Validate() error {
	if err := checkID("id", a.ID, false); err != nil {
		return err
	}
	if err := checkDir("exec_dir", a.ExecDir); err != nil {
		return err
	}
	_, err := intSeconds("no_change_timeout", a.NoChangeTimeout, MaxWait)
	return err
}

// Validate implements dispatch.Validator.
func (a ShellUpdateArgs) Validate() error {
	if err := checkID("id", a.ID, true); err != nil {
		return err
	}
	_, err := intSeconds("no_change_timeout", a.NoChangeTimeout, MaxWait)
	return err
}

// Validate implements dispatch.Validator.
func (a ListArgs) Validate() error { return nil }

// Validate implements dispatch.Validator.
func (a TerminalArgs) Validate() error {
	if err := checkID("session_id", a.SessionID, false); err != nil {
		return err
	}
	if a.Rows < 0 || a.Cols < 0 || a.Rows > maxDimension || a.Cols > maxDimension {
		return fault.InvalidField("rows", "rows and cols must be between 1 and 1000")
	}
	return nil
}

// Validate implements dispatch.Validator.
func (a BashExecArgs) Validate() error {
	if err := checkCommand(a.Command); err != nil {
		return err
	}
	if a.SessionID != nil {
		if err := checkID("session_id", *a.SessionID, false); err != nil {
			return err
		}
	}
	if err := checkDir("exec_dir", a.ExecDir); err != nil {
		return err
	}
	if _, err := seconds("timeout", a.Timeout, MaxWait); err != nil {
		return err
	}
	if _, err := seconds("hard_timeout", a.HardTimeout, MaxWait); err != nil {
		return err
	}
	if a.MaxOutputLength != nil && (*a.MaxOutputLength < 0 || *a.MaxOutputLength > BashKeep) {
		return fault.InvalidField("max_output_length", fmt.Sprintf("max_output_length must be between 0 and %d", BashKeep))
	}
	return nil
}

// Validate implements dispatch.Validator.
func (a BashOutputArgs) Validate() error {
	if err := checkID("session_id", a.SessionID, true); err != nil {
		return err
	}
	if a.Offset < 0 || a.StderrOffset < 0 {
		return fault.InvalidField("offset", "offsets must not be negative")
	}
	_, err := seconds("wait_timeout", a.WaitTimeout, MaxWait)
	return err
}

// Validate implements dispatch.Validator.
func (a BashWriteArgs) Validate() error {
	if err := checkID("session_id", a.SessionID, true); err != nil {
		return err
	}
	if len(a.Input) > MaxStdinWrite {
		return fault.InvalidField("input", fmt.Sprintf("input longer than %d bytes", MaxStdinWrite))
	}
	return nil
}

// signals are the signals /v1/bash/kill sends.
var signals = map[string]syscall.Signal{
	"": syscall.SIGTERM, "SIGTERM": syscall.SIGTERM, "TERM": syscall.SIGTERM,
	"SIGKILL": syscall.SIGKILL, "KILL": syscall.SIGKILL,
	"SIGINT": syscall.SIGINT, "INT": syscall.SIGINT,
	"SIGHUP": syscall.SIGHUP, "HUP": syscall.SIGHUP,
	"SIGQUIT": syscall.SIGQUIT, "QUIT": syscall.SIGQUIT,
}

// Validate implements dispatch.Validator.
func (a BashKillArgs) Validate() error {
	if err := checkID("session_id", a.SessionID, true); err != nil {
		return err
	}
	if _, ok := signals[strings.ToUpper(a.Signal)]; !ok {
		return fault.InvalidField("signal", "signal must be SIGTERM, SIGKILL, SIGINT, SIGHUP or SIGQUIT")
	}
	return nil
}

// Validate implements dispatch.Validator.
func (a BashCreateArgs) Validate() error {
	if a.SessionID != nil {
		if err := checkID("session_id", *a.SessionID, false); err != nil {
			return err
		}
	}
	if a.SnapshotPath != nil && *a.SnapshotPath != "" {
		return fault.InvalidField("snapshot_path", "snapshot_path is not supported")
	}
	return checkDir("exec_dir", a.ExecDir)
}

// Validate implements dispatch.Validator.
func (a BashSessionArgs) Validate() error { return checkID("session_id", a.SessionID, true) }

// Validate implements dispatch.Validator.
func (a InfoArgs) Validate() error { return nil }

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
