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
	Login     clientLoginCmd     `cmd:"" group:"Client (talk to a server)" help:"Store a server URL and key (key read from a prompt or --key-stdin, never from argv)."`
	Ls        clientLsCmd        `cmd:"" group:"Client (talk to a server)" help:"List sandboxes."`
	Create    clientCreateCmd    `cmd:"" group:"Client (talk to a server)" help:"Create a sandbox and print its id."`
	Rm        clientRmCmd        `cmd:"" group:"Client (talk to a server)" help:"Delete sandboxes (their processes and workspaces)."`
	Exec      clientExecCmd      `cmd:"" group:"Client (talk to a server)" help:"Run a command in a sandbox, streaming its output; exits with its exit status. sandhold exec SB -- CMD ARGS…"`
	Shell     clientShellCmd     `cmd:"" group:"Client (talk to a server)" help:"Open an interactive terminal in a sandbox."`
	Cp        clientCpCmd        `cmd:"" group:"Client (talk to a server)" help:"Copy a file into (SB:PATH as DST) or out of (SB:PATH as SRC) a sandbox; resumable, checksummed."`
	Logs      clientLogsCmd      `cmd:"" group:"Client (talk to a server)" help:"Print a background command's output (exec -d); -f follows it to the end."`
	Template  templateCmd        `cmd:"" group:"Client (talk to a server)" help:"Sandbox templates: build, pull, import, ls, inspect, rm."`
	Snapshot  snapshotCmd        `cmd:"" group:"Client (talk to a server)" help:"Snapshots of sandboxes: create, ls, rm, export, import."`
	Fork      clientForkCmd      `cmd:"" group:"Client (talk to a server)" help:"Make sandboxes from a snapshot (sandhold fork SNAPSHOT -n 10); prints their ids."`
	Hibernate clientHibernateCmd `cmd:"" group:"Client (talk to a server)" help:"Snapshot a sandbox and free it; its next use (or resume) restores it."`
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

// sandboxOf is the id of the sandbox a command acts on: the one named
// (by name or id prefix, client.Resolve), else the login's default.
func sandboxOf(ctx context.Context, c *client.Client, named string, cfg client.Config) (string, error) {
	if named == "" {
		named = cfg.Sandbox
	}
	if named == "" {
		return "", &exitError{code: exitUsage, err: errors.New("no sandbox named: give its name or id (see `sandhold ls`), or set a default with `sandhold login URL --sandbox SB` or SANDHOLD_SANDBOX")}
	}
	return c.Resolve(ctx, named)
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
	// Check the key before keeping it, and say whose it is.
	who, err := c.WhoAmI(ctx)
	if err != nil {
		return err
	}
	sb := ""
	if l.Sandbox != "" {
		// Kept as given (a name is looked up at each use); it must name
		// one sandbox now.
		if sb, err = c.Resolve(ctx, l.Sandbox); err != nil {
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
	name := who.KeyName
	if name == "" {
		name = who.KeyID
	}
	_, err = fmt.Fprintf(e.stdout, "logged in to %s as %s (role %s, key %s); saved in %s\n", u,
		client.Escape(name), client.Escape(who.Role), client.Escape(who.KeyID), p)
	if err == nil && sb != "" {
		_, err = fmt.Fprintf(e.stdout, "default sandbox: %s (%s)\n", client.Escape(l.Sandbox), client.Escape(sb))
	}
	return err
}

// flagErr names the flag behind an input the server refused: the server
// names the field ("body.timeout", "query.limit"), the command knows which
// of its flags carried it (flags maps the field, without its place, to
// the flag).
func flagErr(err error, flags map[string]string) error {
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Field == "" {
		return err
	}
	field := ce.Field
	for _, place := range []string{"body.", "query.", "path.", "header."} {
		field = strings.TrimPrefix(field, place)
	}
	flag, ok := flags[field]
	if !ok {
		return err
	}
	return &exitError{code: exitUsage, err: fmt.Errorf("%s: %s", flag, client.Escape(strings.TrimSpace(ce.Message)))}
}
