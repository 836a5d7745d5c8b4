package main

import (
	"fmt"
)

// aioShellResult is what AIO's shell/exec answers (the fields read here).
type aioShellResult struct {
	SessionID string `json:"session_id"`
	Status    string `json:"status"`
	ExitCode  *int   `json:"exit_code"`
}

// aioShellExec runs command through AIO's POST /sandboxes/{id}/v1/shell/exec
// in shell session session ("" opens one) and returns the session.
func (s *server) aioShellExec(id, session, command string) (string, error) {
	body := map[string]any{"command": command}
	if session != "" {
		body["id"] = session
	}
	var r aioShellResult
	if err := s.call("POST", "/sandboxes/"+id+"/v1/shell/exec", body, &r); err != nil {
		return "", err
	}
	if r.ExitCode == nil || *r.ExitCode != 0 || r.SessionID == "" {
		return "", fmt.Errorf("aio shell/exec %q: status %s", command, r.Status)
	}
	return r.SessionID, nil
}

// aioShellVsExec alternates, n times, one native exec of /bin/true and one
// `/bin/true` typed into an AIO shell session opened once before (AIO's
// shell/exec with the session's id: the command goes through the running
// bash, its end read from the terminal), on the same sandbox.
func aioShellVsExec(srv *server, id string, n int) (native, shell figure, err error) {
	session, err := srv.aioShellExec(id, "", "/bin/true")
	if err != nil {
		return figure{}, figure{}, err
	}
	for range 10 {
		if _, err := srv.aioShellExec(id, session, "/bin/true"); err != nil {
			return figure{}, figure{}, err
		}
	}
	var ln, ls latency
	for range n {
		x, err := sample(1, func() error { return srv.exec(id) })
		if err != nil {
			return figure{}, figure{}, fmt.Errorf("exec: %w", err)
		}
		y, err := sample(1, func() error { _, err := srv.aioShellExec(id, session, "/bin/true"); return err })
		if err != nil {
			return figure{}, figure{}, err
		}
		ln, ls = append(ln, x...), append(ls, y...)
	}
	return fig(ln), fig(ls), nil
}
