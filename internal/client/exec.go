package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// maxSSELine bounds one line of the exec event stream: the server sends
// at most 32 KiB of output per event, JSON-escaped (at most 6 bytes per
// byte), plus the envelope.
const maxSSELine = 256 << 10

// ExecRequest is POST /v1/sandboxes/{id}/exec.
type ExecRequest struct {
	Command    string            `json:"command,omitempty"`
	Argv       []string          `json:"argv,omitempty"`
	Cwd        string            `json:"cwd,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	Timeout    *float64          `json:"timeout,omitempty"`
	Stdin      string            `json:"stdin,omitempty"`
	Background bool              `json:"background,omitempty"`
}

// ExecResult is an execution's status (and, from Exec, its output).
type ExecResult struct {
	CommandID  string `json:"command_id"`
	Status     string `json:"status"`
	Reason     string `json:"reason,omitempty"`
	ExitCode   *int   `json:"exit_code"`
	Signal     int    `json:"signal,omitempty"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	Truncated  bool   `json:"truncated"`
	DurationMS int64  `json:"duration_ms"`
}

// Finished reports whether the execution has ended.
func (r ExecResult) Finished() bool {
	return r.Status != "" && r.Status != "running"
}

// ExitStatus is the exit status a shell would report: the command's
// code; 124 on a timeout (as timeout(1)); 152 (128+SIGXCPU) past its CPU
// time, however the server ended it; 128+signal when a signal ended it; 1
// for any other end without a code.
func (r ExecResult) ExitStatus() int {
	switch {
	case r.Status == "timed_out" || r.Reason == ReasonTimeout:
		return ExitTimeout
	case r.Reason == ReasonCPU:
		return ExitCPU
	case r.Signal > 0:
		return 128 + r.Signal
	case r.ExitCode != nil && *r.ExitCode >= 0:
		return *r.ExitCode
	}
	return 1
}

func execPath(sb string) string { return sandboxPath(sb) + "/exec" }

// Exec runs req in sandbox sb and streams its output to stdout and stderr
// as it comes (the server's SSE stream). It returns the final result; a
// cancelled ctx closes the stream, which kills the execution.
func (c *Client) Exec(ctx context.Context, sb string, req ExecRequest, stdout, stderr io.Writer) (ExecResult, error) {
	req.Background = false
	b, err := json.Marshal(req)
	if err != nil {
		return ExecResult{}, err
	}
	hr, err := c.newRequest(ctx, http.MethodPost, execPath(sb), nil, bytes.NewReader(b))
	if err != nil {
		return ExecResult{}, err
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "text/event-stream")
	res, err := c.do(hr, http.StatusOK)
	if err != nil {
		return ExecResult{}, notFound(err, "sandbox "+Escape(sb))
	}
	defer func() { _ = res.Body.Close() }()
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		// A server that answered JSON (no streaming on this path).
		var r ExecResult
		if err := decodeEnvelope(res.Body, &r); err != nil {
			return ExecResult{}, err
		}
		if _, err := io.WriteString(stdout, r.Stdout); err != nil {
			return r, err
		}
		_, err := io.WriteString(stderr, r.Stderr)
		return r, err
	}
	var final *ExecResult
	err = readSSE(res.Body, func(event string, data []byte) error {
		switch event {
		case "stdout", "stderr":
			var chunk struct {
				Data    string `json:"data"`
				Dropped int64  `json:"dropped"`
			}
			if err := json.Unmarshal(data, &chunk); err != nil {
				return fmt.Errorf("decode %s event: %w", event, err)
			}
			w := stdout
			if event == "stderr" {
				w = stderr
			}
			_, err := io.WriteString(w, chunk.Data)
			return err
		case "exit":
			var r ExecResult
			if err := json.Unmarshal(data, &r); err != nil {
				return fmt.Errorf("decode exit event: %w", err)
			}
			final = &r
			return errStopSSE
		case "error":
			var env envelope
			_ = json.Unmarshal(data, &env)
			return &Error{Status: http.StatusInternalServerError, Message: env.Message}
		}
		return nil // unknown events are for newer clients
	})
	if err != nil {
		if ctx.Err() != nil {
			return ExecResult{}, ctx.Err()
		}
		return ExecResult{}, err
	}
	if final == nil {
		return ExecResult{}, errors.New("the stream ended before the command's exit status arrived (server restarted or connection lost)")
	}
	return *final, nil
}

// errStopSSE ends readSSE without an error.
var errStopSSE = errors.New("stop")

// readSSE calls fn for each event of a text/event-stream body.
func readSSE(r io.Reader, fn func(event string, data []byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var event string
	var data []byte
	for {
		line, err := readLine(br)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		switch {
		case len(line) == 0:
			if event != "" || data != nil {
				if event == "" {
					event = "message"
				}
				if err := fn(event, data); err != nil {
					if errors.Is(err, errStopSSE) {
						return nil
					}
					return err
				}
			}
			event, data = "", nil
		case bytes.HasPrefix(line, []byte(":")):
		case bytes.HasPrefix(line, []byte("event:")):
			event = strings.TrimSpace(string(line[len("event:"):]))
		case bytes.HasPrefix(line, []byte("data:")):
			d := bytes.TrimPrefix(line[len("data:"):], []byte(" "))
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, d...)
			if len(data) > maxSSELine {
				return errors.New("an event of the exec stream is too large")
			}
		}
	}
}

// readLine reads one line without its ending, capped at maxSSELine.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		part, isPrefix, err := br.ReadLine()
		if err != nil {
			return nil, err
		}
		line = append(line, part...)
		if len(line) > maxSSELine {
			return nil, errors.New("a line of the exec stream is too long")
		}
		if !isPrefix {
			return line, nil
		}
	}
}

// Start runs req in the background and returns its command id at once.
func (c *Client) Start(ctx context.Context, sb string, req ExecRequest) (ExecResult, error) {
	req.Background = true
	var r ExecResult
	err := c.call(ctx, http.MethodPost, execPath(sb), nil, req, &r)
	return r, notFound(err, "sandbox "+Escape(sb))
}

// execChunk is GET /v1/sandboxes/{id}/exec/{command_id}.
type execChunk struct {
	ExecResult
	StdoutOffset int64 `json:"stdout_offset"`
	StderrOffset int64 `json:"stderr_offset"`
	Dropped      int64 `json:"dropped"`
}

// logsWait is the long-poll of a followed log: the server's maximum is
// 60 s; a shorter wait notices a closed terminal sooner.
const logsWait = 10

// Logs copies a (background) execution's output from the start, and with
// follow keeps copying until it ends. It returns the execution's status
// as last read. Output the server no longer keeps is reported on stderr.
func (c *Client) Logs(ctx context.Context, sb, commandID string, follow bool, stdout, stderr io.Writer) (ExecResult, error) {
	var outOff, errOff int64
	path := execPath(sb) + "/" + url.PathEscape(commandID)
	for {
		q := url.Values{"stdout_offset": {strconv.FormatInt(outOff, 10)}, "stderr_offset": {strconv.FormatInt(errOff, 10)}}
		if follow {
			q.Set("wait", strconv.Itoa(logsWait))
		}
		var ch execChunk
		if err := c.call(ctx, http.MethodGet, path, q, nil, &ch); err != nil {
			return ExecResult{}, notFound(err, "execution "+Escape(commandID)+" of sandbox "+Escape(sb))
		}
		if ch.Dropped > 0 {
			if _, err := fmt.Fprintf(stderr, "[sandhold: %d bytes of output were no longer kept by the server]\n", ch.Dropped); err != nil {
				return ch.ExecResult, err
			}
		}
		if _, err := io.WriteString(stdout, ch.Stdout); err != nil {
			return ch.ExecResult, err
		}
		if _, err := io.WriteString(stderr, ch.Stderr); err != nil {
			return ch.ExecResult, err
		}
		progressed := ch.StdoutOffset != outOff || ch.StderrOffset != errOff
		outOff, errOff = ch.StdoutOffset, ch.StderrOffset
		switch {
		case progressed:
			// More may be waiting: read again at once.
		case ch.Finished() || !follow:
			return ch.ExecResult, nil
		default:
			// The long poll came back empty (server wait elapsed); a
			// short pause keeps a misbehaving server from a busy loop.
			select {
			case <-ctx.Done():
				return ch.ExecResult, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// Kill ends an execution's whole process tree.
func (c *Client) Kill(ctx context.Context, sb, commandID string) error {
	err := c.call(ctx, http.MethodPost, execPath(sb)+"/"+url.PathEscape(commandID)+"/kill", nil, nil, nil)
	return notFound(err, "execution "+Escape(commandID)+" of sandbox "+Escape(sb))
}
