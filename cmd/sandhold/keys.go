package main

import (
	"context"
	"fmt"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/daemon"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/ratelimit"
	"github.com/sandhold/sandhold/internal/store"
)

type keysCmd struct {
	Create keysCreateCmd `cmd:"" help:"Create a key and print it (shown only now)."`
	List   keysListCmd   `cmd:"" help:"List keys (never their secrets)."`
	Revoke keysRevokeCmd `cmd:"" help:"Revoke a key by id; a running server refuses it on its next request."`
}

// cliCaller is the audit actor for local CLI actions: whoever can run the
// binary against the data dir is the operator.
var cliCaller = auth.Caller{KeyID: "cli", KeyName: "local operator", Role: auth.RoleAdmin, Addr: "local"}

// openLocal opens the data dir's store with an auth service over it.
func openLocal(ctx context.Context, e *env) (store.Store, *audit.Log, *auth.Service, error) {
	cfg, err := e.loadConfig(nil)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := daemon.EnsureDataDir(cfg.DataDir); err != nil {
		return nil, nil, nil, err
	}
	st, err := store.OpenConfigured(ctx, cfg.DataDir, cfg.DatabaseURL, cfg.NodeName)
	if err != nil {
		return nil, nil, nil, err
	}
	lg := audit.New(st, cfg.DataDir)
	opts := []auth.Option{auth.WithRateMaxima(ratelimit.DefaultRules().Merge(cfg.RateLimits))}
	if cfg.DatabaseURL == "" {
		// A running server caches keys: a revocation here tells it through
		// the data dir's epoch file, so its next request is refused.
		opts = append(opts, auth.WithKeyCache(filepath.Join(cfg.DataDir, auth.KeyEpochFile)))
	}
	return st, lg, auth.NewService(st, lg, opts...), nil
}

type keysCreateCmd struct {
	Name string `required:"" help:"Label for the key."`
	Role string `required:"" enum:"admin,agent,viewer" help:"admin, agent or viewer."`
	// RateLimits are the key's own limits, at or below the server's.
	RateLimits string `name:"rate-limits" help:"The key's own rate limits in SANDBOX_RATE_LIMITS syntax (file, code, command, browser, read, manage), e.g. command=60/m,code=5/m; each at or below the server's."`
}

func (k *keysCreateCmd) Run(ctx context.Context, e *env) error {
	st, _, svc, err := openLocal(ctx, e)
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }()
	info, secret, err := svc.CreateKeyWithLimits(ctx, cliCaller, k.Name, auth.Role(k.Role), k.RateLimits)
	if err != nil {
		return fmt.Errorf("create key: %s", fault.Public(err))
	}
	_, _ = fmt.Fprintf(e.stderr, "created %s key %s (%s); the key is shown only now:\n", info.Role, info.ID, info.Name)
	_, err = fmt.Fprintln(e.stdout, secret)
	return err
}

type keysListCmd struct{}

func (keysListCmd) Run(ctx context.Context, e *env) error {
	st, _, svc, err := openLocal(ctx, e)
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }()
	keys, err := svc.ListKeys(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	if _, err := fmt.Fprintln(tw, "ID\tNAME\tROLE\tCREATED\tREVOKED\tRATE LIMITS"); err != nil {
		return err
	}
	for _, k := range keys {
		revoked := "-"
		if k.RevokedAt != nil {
			revoked = k.RevokedAt.Format(time.RFC3339)
		}
		limits := k.RateLimits
		if limits == "" {
			limits = "server's"
		}
		if _, err := fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Name, k.Role, k.CreatedAt.Format(time.RFC3339), revoked, limits); err != nil {
			return err
		}
	}
	return tw.Flush()
}

type keysRevokeCmd struct {
	ID string `arg:"" help:"Key id (from keys list)."`
}

func (k *keysRevokeCmd) Run(ctx context.Context, e *env) error {
	st, _, svc, err := openLocal(ctx, e)
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }()
	info, err := svc.RevokeKey(ctx, cliCaller, k.ID)
	if err != nil {
		return fmt.Errorf("revoke %s: %s", k.ID, fault.Public(err))
	}
	_, err = fmt.Fprintf(e.stdout, "revoked %s (%s)\n", info.ID, info.Name)
	return err
}
