// Command sandhold is the sandhold server and its operator CLI: serve the
// API, manage keys, verify the audit log, and report host isolation features.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/alecthomas/kong"

	"github.com/sandhold/sandhold/internal/config"
)

// Set by the linker: -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "dev"
	commit  = "unknown"
)

// cli is the command tree; one file per subcommand.
type cli struct {
	DataDir string `name:"data-dir" help:"Data directory (store, audit, keys). Default: $SANDBOX_DATA_DIR, else /var/lib/sandhold as root, else $XDG_DATA_HOME/sandhold." type:"path"`
	Config  string `name:"config" help:"YAML config file (flat keys as in SECURITY.md)." type:"path"`

	Serve   serveCmd   `cmd:"" help:"Run the API server."`
	Keys    keysCmd    `cmd:"" help:"Manage API keys in the local data dir."`
	Audit   auditCmd   `cmd:"" help:"Inspect and verify the audit log."`
	Doctor  doctorCmd  `cmd:"" help:"Show which kernel isolation features this host offers."`
	Version versionCmd `cmd:"" help:"Print the version."`
	MCP     mcpCmd     `cmd:"" name:"mcp" help:"MCP over stdio for local MCP clients, bridged to a running server (key from SANDBOX_API_KEY)."`

	clientCmds `embed:""` // login, ls, create, rm, exec, shell, cp, logs: client_*.go
}

// env is what every subcommand gets: its streams and the global flags.
type env struct {
	stdout, stderr io.Writer
	global         *cli
}

// loadConfig resolves the configuration (flags > env > file > defaults)
// and validates it, reporting every problem on one line.
func (e *env) loadConfig(flags map[string]string) (config.Config, error) {
	if flags == nil {
		flags = map[string]string{}
	}
	if e.global.DataDir != "" {
		flags["data_dir"] = e.global.DataDir
	}
	c, err := config.Load(config.LoadOptions{File: e.global.Config, Flags: flags})
	if err != nil {
		return config.Config{}, &exitError{code: 2, err: err}
	}
	c = c.WithDefaults()
	if err := c.Validate(); err != nil {
		return config.Config{}, &exitError{code: 2, err: fmt.Errorf("invalid configuration: %s", strings.ReplaceAll(err.Error(), "\n", "; "))}
	}
	return c, nil
}

// exitError carries a process exit code through run.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func main() {
	if isInit(os.Args) {
		os.Exit(runInit())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		var ce *commandExit
		if errors.As(err, &ce) {
			os.Exit(ce.code) // a remote command's status: it spoke for itself
		}
		fmt.Fprintf(os.Stderr, "sandhold: %v\n", err)
		var ee *exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		os.Exit(1)
	}
}

// run parses args and runs the chosen subcommand.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c cli
	helped := false
	parser, err := kong.New(&c,
		kong.Name("sandhold"),
		kong.Description("Secure multi-tenant sandbox server for AI agents."),
		kong.Writers(stdout, stderr),
		kong.Exit(func(int) { helped = true }), // --help returns instead of exiting the process
		kong.BindTo(ctx, (*context.Context)(nil)),
		kong.Bind(&env{stdout: stdout, stderr: stderr, global: &c}),
	)
	if err != nil {
		return err
	}
	kctx, err := parser.Parse(args)
	if helped {
		return nil // --help was printed
	}
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	return kctx.Run()
}
