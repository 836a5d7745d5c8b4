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

	"github.com/sandhold/sandhold/internal/client"
	"github.com/sandhold/sandhold/internal/config"
)

// Set by the linker: -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "dev"
	commit  = "unknown"
)

// cli is the command tree; one file per subcommand. The server's flags
// (--data-dir, --config) belong to the commands that read the server's
// data dir, so the client commands' help shows none of them.
type cli struct {
	clientCmds `embed:""` // login, ls, create, rm, exec, shell, cp, logs: client_*.go
	MCP        mcpCmd     `cmd:"" name:"mcp" group:"Client (talk to a server)" help:"MCP over stdio for local MCP clients, bridged to the server you are logged in to."`

	Serve   serveCmd   `cmd:"" group:"Server" help:"Run the API server."`
	Keys    keysCmd    `cmd:"" group:"Server" help:"Manage API keys: on the server you are logged in to, or in a local data dir."`
	Audit   auditCmd   `cmd:"" group:"Server" help:"Read and verify the audit log: of the server you are logged in to, or of a local data dir."`
	Doctor  doctorCmd  `cmd:"" group:"Server" help:"Show which kernel isolation features this host offers."`
	Version versionCmd `cmd:"" help:"Print the version."`
}

// serverFlags name the server's data dir and config file, for the commands
// that run on the server's machine.
type serverFlags struct {
	DataDir string `name:"data-dir" help:"Data directory (store, audit, keys). Default: $SANDBOX_DATA_DIR, else /var/lib/sandhold as root, else $XDG_DATA_HOME/sandhold." type:"path"`
	Config  string `name:"config" help:"YAML config file (flat keys as in SECURITY.md)." type:"path"`
}

// named reports whether the flags or the environment name a data dir or a
// config file: the operator means the local server.
func (f serverFlags) named() bool {
	return f.DataDir != "" || f.Config != "" || os.Getenv("SANDBOX_DATA_DIR") != ""
}

// env is what every subcommand gets: its streams and the command tree.
type env struct {
	stdout, stderr io.Writer
	global         *cli
}

// loadConfig resolves the configuration (flags > env > file > defaults)
// and validates it, reporting every problem on one line.
func (e *env) loadConfig(sf serverFlags, flags map[string]string) (config.Config, error) {
	if flags == nil {
		flags = map[string]string{}
	}
	if sf.DataDir != "" {
		flags["data_dir"] = sf.DataDir
	}
	c, err := config.Load(config.LoadOptions{File: sf.Config, Flags: flags})
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
		os.Exit(exitCodeOf(err))
	}
}

// Exit statuses of the client beside a remote command's own (sysexits.h's
// where one fits).
const (
	exitUsage           = 2
	exitApprovalPending = 75  // EX_TEMPFAIL: an operator has not decided yet; try again
	exitApprovalDenied  = 77  // EX_NOPERM: an operator denied this exact call
	exitNotFound        = 127 // the command is not in the sandbox (a shell's)
)

// exitCodeOf is the exit status for a failure.
func exitCodeOf(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if _, ok := client.IsApprovalPending(err); ok {
		return exitApprovalPending
	}
	if client.IsApprovalDenied(err) {
		return exitApprovalDenied
	}
	return 1
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
