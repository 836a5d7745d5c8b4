package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"connectrpc.com/connect"

	"github.com/sandhold/sandhold/internal/e2b"
	"github.com/sandhold/sandhold/internal/e2b/envdpb/processpb"
	"github.com/sandhold/sandhold/internal/e2b/envdpb/processpb/processpbconnect"
)

// e2bSandbox is a sandbox made through E2B's control plane, with the
// client of its envd process service (what the SDK's commands.run calls).
type e2bSandbox struct {
	id   string
	proc processpbconnect.ProcessClient
}

// e2bCreate makes a "base" sandbox the way E2B's SDK does (POST
// /e2b/sandboxes) and returns it with a client that calls its envd as the
// SDK does: E2B_SANDBOX_URL, the sandbox and port in headers, the envd
// access token.
func (s *server) e2bCreate() (*e2bSandbox, error) {
	body, _ := json.Marshal(map[string]any{"templateID": "base"})
	req, err := http.NewRequest("POST", s.base+e2b.Prefix+"/sandboxes", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-API-Key", s.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.c.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		return nil, fmt.Errorf("E2B create: %d %.300s", resp.StatusCode, raw)
	}
	var sb struct {
		SandboxID       string `json:"sandboxID"`
		EnvdAccessToken string `json:"envdAccessToken"`
	}
	if err := json.Unmarshal(raw, &sb); err != nil || sb.SandboxID == "" {
		return nil, fmt.Errorf("E2B create answered %.300s", raw)
	}
	c := &http.Client{Transport: headerTransport{base: s.c.Transport, set: map[string]string{
		"E2b-Sandbox-Id": sb.SandboxID, "E2b-Sandbox-Port": strconv.Itoa(e2b.EnvdPort), "X-Access-Token": sb.EnvdAccessToken,
	}}}
	return &e2bSandbox{id: sb.SandboxID, proc: processpbconnect.NewProcessClient(c, s.base+e2b.SandboxPrefix)}, nil
}

// headerTransport sets headers on every request.
type headerTransport struct {
	base http.RoundTripper
	set  map[string]string
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.set {
		r.Header.Set(k, v)
	}
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r)
}

// run is commands.run(argv) as the SDK does it: envd's Process/Start,
// its events read until the end event.
func (sb *e2bSandbox) run(ctx context.Context, argv ...string) error {
	st, err := sb.proc.Start(ctx, connect.NewRequest(&processpb.StartRequest{Process: &processpb.ProcessConfig{Cmd: argv[0], Args: argv[1:]}}))
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }()
	for st.Receive() {
		if end := st.Msg().GetEvent().GetEnd(); end != nil {
			if end.GetExitCode() != 0 {
				return fmt.Errorf("E2B commands.run %v: exit %d (%s)", argv, end.GetExitCode(), end.GetError())
			}
			return nil
		}
	}
	if err := st.Err(); err != nil {
		return err
	}
	return fmt.Errorf("E2B commands.run %v: the stream ended without an end event", argv)
}

// e2bRunVsExec alternates, n times, one native exec of /bin/true and one
// E2B commands.run of /bin/true, on one sandbox made through E2B's API.
func e2bRunVsExec(ctx context.Context, srv *server, n int) (native, run figure, err error) {
	sb, err := srv.e2bCreate()
	if err != nil {
		return figure{}, figure{}, err
	}
	defer func() { _ = srv.delete(sb.id) }()
	for range 10 {
		if err := sb.run(ctx, "/bin/true"); err != nil {
			return figure{}, figure{}, err
		}
	}
	var ln, lr latency
	for range n {
		x, err := sample(1, func() error { return srv.exec(sb.id) })
		if err != nil {
			return figure{}, figure{}, fmt.Errorf("exec: %w", err)
		}
		y, err := sample(1, func() error { return sb.run(ctx, "/bin/true") })
		if err != nil {
			return figure{}, figure{}, err
		}
		ln, lr = append(ln, x...), append(lr, y...)
	}
	return fig(ln), fig(lr), nil
}
