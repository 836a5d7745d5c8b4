package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sandhold/sandhold/internal/client"
)

// clientCmds are the client side: commands that talk to a running server
// with the key from `sandhold login` (or SANDHOLD_URL / SANDHOLD_KEY).
// Embedded in the command tree so they sit at the top level.
type clientCmds struct {
	Login    clientLoginCmd  `cmd:"" group:"Client (talk to a server)" help:"Store a server URL and key (key read from a prompt or --key-stdin, never from argv)."`
	Ls       clientLsCmd     `cmd:"" group:"Client (talk to a server)" help:"List sandboxes."`
	Create   clientCreateCmd `cmd:"" group:"Client (talk to a server)" help:"Create a sandbox and print its id."`
	Rm       clientRmCmd     `cmd:"" group:"Client (talk to a server)" help:"Delete sandboxes (their processes and workspaces)."`
	Exec     clientExecCmd   `cmd:"" group:"Client (talk to a server)" help:"Run a command in a sandbox, streaming its output; exits with its exit status. sandhold exec SB -- CMD ARGS…"`
	Shell    clientShellCmd  `cmd:"" group:"Client (talk to a server)" help:"Open an interactive terminal in a sandbox."`
	Cp       clientCpCmd     `cmd:"" group:"Client (talk to a server)" help:"Copy a file into (SB:PATH as DST) or out of (SB:PATH as SRC) a sandbox; resumable, checksummed."`
	Logs     clientLogsCmd   `cmd:"" group:"Client (talk to a server)" help:"Print a background command's output (exec -d); -f follows it to the end."`
	Template templateCmd     `cmd:"" group:"Client (talk to a server)" help:"Sandbox templates: build, pull, import, ls, inspect, rm."`
}

// connect loads the login (file, then SANDHOLD_* overrides) and returns a
// client for it.
func connect() (*client.Client, client.Config, error) {
	cfg, err := client.LoadConfig()
	if err != nil {
		return nil, cfg, &exitError{code: 2, err: err}
	}
	c, err := client.New(cfg)
	if err != nil {
		return nil, cfg, &exitError{code: 2, err: err}
	}
	c.UserAgent = "sandhold-cli/" + version
	return c, cfg, nil
}

// sandboxOf is the sandbox a command acts on: the one named, else the
// login's default.
func sandboxOf(named string, cfg client.Config) (string, error) {
	if named != "" {
		return named, nil
	}
	if cfg.Sandbox != "" {
		return cfg.Sandbox, nil
	}
	return "", &exitError{code: 2, err: errors.New("no sandbox named: give one (see `sandhold ls`), or set a default with `sandhold login URL --sandbox SB` or SANDHOLD_SANDBOX")}
}

// isTTY reports whether w is a terminal.
func isTTY(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && client.IsTerminal(f.Fd())
}

// readKey reads the key: one line from stdin with --key-stdin or when
// stdin is not a terminal, else from a prompt without echo.
func readKey(stdin *os.File, prompt io.Writer, fromStdin bool, url string) (string, error) {
	if !fromStdin && client.IsTerminal(stdin.Fd()) {
		b, err := client.ReadPassword(stdin.Fd(), func() { _, _ = fmt.Fprintf(prompt, "API key for %s: ", url) })
		_, _ = fmt.Fprintln(prompt)
		if err != nil {
			return "", fmt.Errorf("read the key: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	const maxKeyLine = 4096 // a key is 47 bytes
	line, err := bufio.NewReaderSize(io.LimitReader(stdin, maxKeyLine), maxKeyLine).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read the key from stdin: %w", err)
	}
	return strings.TrimSpace(line), nil
}

type clientLoginCmd struct {
	URL      string `arg:"" name:"url" help:"Server URL, e.g. http://127.0.0.1:8080."`
	KeyStdin bool   `name:"key-stdin" help:"Read the key from standard input (one line), e.g. from a password manager."`
	Sandbox  string `name:"sandbox" short:"s" help:"Default sandbox of commands that name none."`
}

func (l *clientLoginCmd) Run(ctx context.Context, e *env) error {
	u, err := client.ParseURL(l.URL)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	key := ""
	if !l.KeyStdin && os.Getenv(client.EnvKey) != "" && !client.IsTerminal(os.Stdin.Fd()) {
		key = os.Getenv(client.EnvKey)
	}
	if key == "" {
		if key, err = readKey(os.Stdin, e.stderr, l.KeyStdin, u.String()); err != nil {
			return err
		}
	}
	if key == "" {
		return &exitError{code: 2, err: errors.New("no key given: paste it at the prompt, or pipe it with --key-stdin")}
	}
	cfg := client.Config{URL: u.String(), Key: key, Sandbox: l.Sandbox}
	c, err := client.New(cfg)
	if err != nil {
		return err
	}
	// Check the key before keeping it.
	if _, err := c.List(ctx); err != nil {
		return err
	}
	if l.Sandbox != "" {
		if _, err := c.Get(ctx, l.Sandbox); err != nil {
			return err
		}
	}
	p, err := client.SaveConfig(cfg)
	if err != nil {
		return err
	}
	if u.Scheme == "http" && !client.IsLoopback(u) {
		_, _ = fmt.Fprintf(e.stderr, "warning: %s is plain http on a network: the key crosses it unencrypted; use https (a TLS reverse proxy)\n", u)
	}
	_, err = fmt.Fprintf(e.stdout, "logged in to %s (saved in %s)\n", u, p)
	return err
}
