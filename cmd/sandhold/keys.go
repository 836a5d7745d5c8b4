package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/client"
	"github.com/sandhold/sandhold/internal/daemon"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/ratelimit"
	"github.com/sandhold/sandhold/internal/store"
)

type keysCmd struct {
	serverFlags `embed:""`
	where       `embed:""`
	Create      keysCreateCmd `cmd:"" help:"Create a key and print it (shown only now)."`
	List        keysListCmd   `cmd:"" help:"List keys (never their secrets)."`
	Revoke      keysRevokeCmd `cmd:"" help:"Revoke a key by id; a running server refuses it on its next request."`
}

// where picks the server (logged in) or a local data dir for keys and
// audit.
type where struct {
	Remote bool `help:"Ask the server you are logged in to (the default when logged in and no data dir is named)."`
	Local  bool `help:"Read the local data dir (the default when --data-dir, --config or SANDBOX_DATA_DIR names one, or when not logged in)."`
}

// remote says whether a keys or audit command goes to the server: --remote,
// else not when a local data dir is named (or --local), else when logged in.
func (w where) remote(sf serverFlags) (bool, error) {
	switch {
	case w.Remote && w.Local:
		return false, &exitError{code: exitUsage, err: errors.New("--remote and --local: choose one")}
	case w.Remote:
		return true, nil
	case w.Local || sf.named():
		return false, nil
	}
	_, err := client.LoadConfig()
	return err == nil, nil
}

// remoteKeysErr adds to a refusal of the server what an operator at the
// server's machine can do instead: the login may be an agent's.
func remoteKeysErr(err error) error {
	if client.IsStatus(err, http.StatusForbidden) {
		return fmt.Errorf("%w; on the server's machine, --local (or --data-dir) reads its data dir instead", err)
	}
	return err
}

// cliCaller is the audit actor for local CLI actions: whoever can run the
// binary against the data dir is the operator.
var cliCaller = auth.Caller{KeyID: "cli", KeyName: "local operator", Role: auth.RoleAdmin, Addr: "local"}

// openLocal opens the data dir's store with an auth service over it. A
// read (write false) never makes a data dir or a store: it needs a
// server's.
func openLocal(ctx context.Context, e *env, sf serverFlags, write bool) (store.Store, *audit.Log, *auth.Service, error) {
	cfg, err := e.loadConfig(sf, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	if write {
		if err := daemon.EnsureDataDir(cfg.DataDir); err != nil {
			return nil, nil, nil, err
		}
	} else if cfg.DatabaseURL == "" {
		if _, err := os.Stat(filepath.Join(cfg.DataDir, store.FileName)); err != nil {
			return nil, nil, nil, &exitError{code: 1, err: fmt.Errorf("no sandhold server's data in %s: name its data dir with --data-dir, or `sandhold login URL` to ask a server", cfg.DataDir)}
		}
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
	kc := e.global.Keys
	remote, err := kc.remote(kc.serverFlags)
	if err != nil {
		return err
	}
	var info client.Key
	if remote {
		c, _, err := connect()
		if err != nil {
			return err
		}
		if info, err = c.CreateKey(ctx, k.Name, k.Role, k.RateLimits); err != nil {
			return remoteKeysErr(flagErr(err, map[string]string{"name": "--name", "role": "--role", "rate_limits": "--rate-limits"}))
		}
	} else {
		st, _, svc, err := openLocal(ctx, e, kc.serverFlags, true)
		if err != nil {
			return err
		}
		defer func() { _ = st.Close() }()
		ki, secret, err := svc.CreateKeyWithLimits(ctx, cliCaller, k.Name, auth.Role(k.Role), k.RateLimits)
		if err != nil {
			return fmt.Errorf("create key: %s", fault.Public(err))
		}
		info = client.Key{ID: ki.ID, Name: ki.Name, Role: string(ki.Role), Secret: secret}
	}
	_, _ = fmt.Fprintf(e.stderr, "created %s key %s (%s); the key is shown only now:\n", client.Escape(info.Role), client.Escape(info.ID), client.Escape(info.Name))
	_, err = fmt.Fprintln(e.stdout, info.Secret)
	return err
}

type keysListCmd struct{}

func (keysListCmd) Run(ctx context.Context, e *env) error {
	kc := e.global.Keys
	remote, err := kc.remote(kc.serverFlags)
	if err != nil {
		return err
	}
	var keys []client.Key
	if remote {
		c, _, err := connect()
		if err != nil {
			return err
		}
		if keys, err = c.Keys(ctx); err != nil {
			return remoteKeysErr(err)
		}
	} else {
		st, _, svc, err := openLocal(ctx, e, kc.serverFlags, false)
		if err != nil {
			return err
		}
		defer func() { _ = st.Close() }()
		local, err := svc.ListKeys(ctx)
		if err != nil {
			return err
		}
		for _, k := range local {
			keys = append(keys, client.Key{ID: k.ID, Name: k.Name, Role: string(k.Role), CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt, RateLimits: k.RateLimits})
		}
	}
	return writeKeys(e.stdout, keys)
}

func writeKeys(w io.Writer, keys []client.Key) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
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
		if _, err := fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", client.Escape(k.ID), client.Escape(k.Name), client.Escape(k.Role),
			k.CreatedAt.Format(time.RFC3339), revoked, client.Escape(limits)); err != nil {
			return err
		}
	}
	return tw.Flush()
}

type keysRevokeCmd struct {
	ID string `arg:"" help:"Key id (from keys list)."`
}

func (k *keysRevokeCmd) Run(ctx context.Context, e *env) error {
	kc := e.global.Keys
	remote, err := kc.remote(kc.serverFlags)
	if err != nil {
		return err
	}
	var info client.Key
	if remote {
		c, _, err := connect()
		if err != nil {
			return err
		}
		if info, err = c.RevokeKey(ctx, k.ID); err != nil {
			return remoteKeysErr(err)
		}
	} else {
		st, _, svc, err := openLocal(ctx, e, kc.serverFlags, true)
		if err != nil {
			return err
		}
		defer func() { _ = st.Close() }()
		ki, err := svc.RevokeKey(ctx, cliCaller, k.ID)
		if err != nil {
			return fmt.Errorf("revoke %s: %s", k.ID, fault.Public(err))
		}
		info = client.Key{ID: ki.ID, Name: ki.Name}
	}
	_, err = fmt.Fprintf(e.stdout, "revoked %s (%s)\n", client.Escape(info.ID), client.Escape(info.Name))
	return err
}
