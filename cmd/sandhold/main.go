// Command sandhold is the sandhold server and its operator CLI: serve the
// API, manage keys, verify the audit log, and report host isolation features.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/alecthomas/kong"
)

// Set by the linker: -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "dev"
	commit  = "unknown"
)

// cli is the command tree; one file per subcommand.
type cli struct {
	Serve   serveCmd   `cmd:"" help:"Run the API server."`
	Keys    keysCmd    `cmd:"" help:"Manage API keys in the local data dir."`
	Audit   auditCmd   `cmd:"" help:"Inspect and verify the audit log."`
	Doctor  doctorCmd  `cmd:"" help:"Show which kernel isolation features this host offers."`
	Version versionCmd `cmd:"" help:"Print the version."`
}

// exitError carries a process exit code through run.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandhold: %v\n", err)
		var ee *exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		os.Exit(1)
	}
}

// run parses args and runs the chosen subcommand.
func run(ctx context.Context, args []string) error {
	var c cli
	parser, err := kong.New(&c,
		kong.Name("sandhold"),
		kong.Description("Secure multi-tenant sandbox server for AI agents."),
		kong.UsageOnError(),
		kong.BindTo(ctx, (*context.Context)(nil)),
	)
	if err != nil {
		return err
	}
	kctx, err := parser.Parse(args)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	return kctx.Run()
}
