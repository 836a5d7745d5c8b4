package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/agent/initbin"
	"github.com/sandhold/sandhold/internal/api"
	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/browser"
	"github.com/sandhold/sandhold/internal/browserops"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/outbuf"
	"github.com/sandhold/sandhold/internal/posture"
	"github.com/sandhold/sandhold/internal/ratelimit"
	"github.com/sandhold/sandhold/internal/sandbox"
	"github.com/sandhold/sandhold/internal/sandbox/sandboxtools"
	"github.com/sandhold/sandhold/internal/sandbox/selfcheck"
	"github.com/sandhold/sandhold/internal/store"
	"github.com/sandhold/sandhold/internal/template"
)

// Sandbox settings that are not (yet) configuration, with their reasons.
const (
	// tmpBytes caps each sandbox's /tmp; tmpfs pages count against the
	// sandbox's memory limit as well.
	tmpBytes = 256 << 20
	// defaultCPUMilli is one CPU per sandbox unless a client asks for
	// another share.
	defaultCPUMilli = 1000
)

// cgroupBase names the group, below the server's own, that holds this
// server's sandboxes. It is derived from the data dir, so two servers (or
// tests running in parallel) never reap each other's sandboxes, while a
// restarted server finds exactly what its previous run left.
func cgroupBase(dataDir string) string {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		abs = dataDir
	}
	sum := sha256.Sum256([]byte(abs))
	return "sandhold-" + hex.EncodeToString(sum[:6])
}

// records adapts the store to the sandbox manager.
type records struct{ st store.Store }

func (r records) PutSandbox(ctx context.Context, rec sandbox.Record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return r.st.PutSandbox(ctx, store.SandboxRow{ID: rec.ID, Owner: rec.Owner, Record: b})
}

// CountOwnedElsewhere makes records a sandbox.ClusterRecords: a key's
// sandboxes on the other nodes of a cluster count against its cap (none on
// one host).
func (r records) CountOwnedElsewhere(ctx context.Context, owner string) (int, error) {
	if cl := r.st.Cluster(); cl != nil {
		return cl.CountOwnedElsewhere(ctx, owner)
	}
	return 0, nil
}

func (r records) DeleteSandbox(ctx context.Context, id string) error {
	return r.st.DeleteSandbox(ctx, id)
}

func (r records) ListSandboxes(ctx context.Context) ([]sandbox.Record, error) {
	rows, err := r.st.ListSandboxes(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]sandbox.Record, 0, len(rows))
	for _, row := range rows {
		var rec sandbox.Record
		if err := json.Unmarshal(row.Record, &rec); err != nil {
			return nil, fmt.Errorf("sandbox record %s: %w", row.ID, err)
		}
		out = append(out, rec)
	}
	return out, nil
}

// startSandboxes builds the isolation stack after the host check: the cgroup
// manager, the dispatcher with the command guard and the rate limiter, the
// sandbox manager (which reaps what a previous run left) and a self-test
// sandbox. A host that cannot isolate stops the server here, unless the
// operator said --insecure-no-isolation.
func (d *Daemon) startSandboxes(ctx context.Context, o options) error {
	cfg := d.cfg
	insecure := cfg.InsecureNoIsolation
	report := d.posture
	cg := d.cg // made by New before anything was written
	d.guard = guard.New(guard.Config{})
	d.limiter = ratelimit.New(ratelimit.Options{Disabled: cfg.DisableRateLimit, Rules: ratelimit.DefaultRules().Merge(cfg.RateLimits)})
	dopts := dispatch.Options{Limiter: d.limiter, Audit: d.audit}
	// d.audit commits to this same database (audit.New(d.store)), so on a
	// store with flush windows (SQLite) a call's own writes there (a
	// create's sandbox row) may leave their flush to its record's commit:
	// one fdatasync, not two.
	dopts.FlushWindow = d.store.FlushWindows()
	d.dispatch = dispatch.New(dopts)

	initExe, initArgs := o.initExe, o.initArgs
	disk, err := diskBudget(cfg)
	if err != nil {
		return fmt.Errorf("disk budget: %w", err)
	}
	d.log.Info("disk budget for workspace images", "budget_bytes", disk.Budget, "overcommit", cfg.DiskOvercommit,
		"free_bytes", disk.Free, "floor_bytes", disk.Floor, "configured", cfg.DiskBudget > 0)
	if cfg.DiskBudget > 0 && disk.Budget > disk.Free {
		d.log.Warn("SANDBOX_DISK_BUDGET is above the data dir's free space: the disk guard stops workspace growth at its floor instead",
			"budget_bytes", disk.Budget, "free_bytes", disk.Free, "floor_bytes", disk.Floor)
	} else if cfg.DiskBudget > 0 && disk.Budget+d.retention.Budget > disk.Free {
		// The audit's budget is counted beside the workspaces': both are
		// bytes on the same file system.
		d.log.Warn("the workspaces' disk budget and the audit's (SANDBOX_AUDIT_RETENTION) together are above the data dir's free space",
			"budget_bytes", disk.Budget, "audit_budget_bytes", d.retention.Budget, "free_bytes", disk.Free)
	}
	// The init: the lean one from a sealed memfd when this binary carries
	// it (`make build`), else this binary re-executed; tests set their own.
	// Its closer is registered before the manager's, so it runs after it.
	var initFile *os.File
	initRow := posture.Check{Name: initbin.ReportName, OK: true, Detail: "test init " + filepath.Base(initExe)}
	if initExe == "" {
		choice, err := initbin.Select()
		if err != nil {
			return fmt.Errorf("sandbox init: %w", err)
		}
		d.closers = append(d.closers, choice.Close)
		initFile, initRow.Detail = choice.File, choice.Detail
	}
	// The launcher clones every init, so this process (with its large
	// heap) never forks itself for a sandbox. Its closer runs after the
	// manager's. If it cannot start, the server clones the inits itself:
	// as isolated and supervised, only slower, and the report says so.
	launcher, lerr := agent.StartLauncher(agent.LauncherSpec{Exe: initExe, Args: initArgs, ExeFile: initFile,
		Log: launcherLog{d.log}})
	if lerr != nil {
		d.log.Warn("init launcher unavailable: the server clones each init itself (slower cold starts)", "err", lerr)
		initRow.Detail += "; cloned by the server (launcher unavailable)"
	} else {
		d.closers = append(d.closers, launcher.Close)
		initRow.Detail += "; cloned by the launcher"
	}
	d.log.Info("sandbox init", "detail", initRow.Detail)
	report.Checks = append(report.Checks, initRow)
	if d.templates, err = d.openTemplates(); err != nil {
		return err
	}
	snaps, err := d.openSnapshots()
	if err != nil {
		return err
	}
	mcfg := sandbox.Config{
		Templates:      d.templates,
		Snapshots:      snaps,
		SnapshotBudget: cfg.SnapshotBudget.Bytes(),
		DiskBudget:     disk.Budget,
		DiskOvercommit: cfg.DiskOvercommit,
		DiskFloor:      disk.Floor,
		DataDir:        cfg.DataDir,
		Node:           nodeName(d.store),
		Max: sandbox.Limits{
			MemoryBytes: cfg.MaxMemory.Bytes(), Pids: int64(cfg.MaxProcesses), DiskBytes: cfg.MaxDisk.Bytes(),
			CPUTime: cfg.MaxCPUTime, CPUMilli: int64(runtime.NumCPU()) * 1000,
		},
		Default: sandbox.Limits{
			MemoryBytes: cfg.MaxMemory.Bytes(), Pids: int64(cfg.MaxProcesses), DiskBytes: cfg.MaxDisk.Bytes(),
			CPUTime: cfg.MaxCPUTime, CPUMilli: min(defaultCPUMilli, int64(runtime.NumCPU())*1000),
		},
		TmpBytes: tmpBytes,
		MaxPTYs:  cfg.MaxPTYs,
		// One budget for every stream the server keeps: executions and
		// shell sessions, per sandbox owner and in all.
		OutputBudget: outbuf.NewBudget(cfg.OutputBudget.Bytes(), cfg.OutputBudgetPerKey.Bytes()),
		WarmPool:     cfg.WarmPool,
		SpareInits:   cfg.SpareInits,
		IdleTTL:      cfg.SandboxTTL,
		IdleSleep:    cfg.IdleSleep,
		MaxPerOwner:  cfg.MaxSandboxesPerKey,
		AllowSudo:    cfg.EnableSudo,
		Insecure:     insecure,
		InitExe:      initExe,
		InitArgs:     initArgs,
		InitFile:     initFile,
		Launcher:     launcher,
		Log:          d.log,
		// The preview ports and the browser's (sandbox.LoopbackPorts).
		LoopbackPorts: sandbox.LoopbackPorts(cfg.PreviewPorts),
	}
	auditFn := func(ctx context.Context, e sandbox.Event) {
		if _, err := d.audit.Append(ctx, audit.Entry{Actor: e.Actor, Action: e.Action, Sandbox: e.Sandbox,
			Verdict: e.Verdict, Detail: e.Detail}); err != nil {
			d.log.Error("audit", "action", e.Action, "err", err)
		}
	}
	// The self-test runs before the pool fills, on a manager of its own
	// with no pool, so a broken host fails fast and leaves nothing.
	probe := mcfg
	probe.WarmPool, probe.WarmPools = 0, nil
	probe.DiskBudget, probe.DiskFloor = 0, 0 // the self-test's sandbox is gone before anything else is made
	pm, err := sandbox.New(ctx, probe, records{d.store}, auditFn, cg)
	if err != nil {
		return fmt.Errorf("sandbox manager: %w", err)
	}
	layers, err := pm.SelfTest(ctx)
	pm.Close()
	if err != nil {
		return fmt.Errorf("sandbox self-test: %w", err)
	}
	for _, l := range layers {
		if l.Name == selfcheck.TemplateRow {
			// A capability, not a layer of every sandbox: reported.
			report.Checks = append(report.Checks, posture.Check{Name: l.Name, OK: l.Active, Detail: l.Detail})
			if !l.Active {
				d.log.Warn("template sandboxes unavailable on this host; host sandboxes are unaffected", "detail", l.Detail)
			}
			continue
		}
		if !l.Active {
			d.log.Warn("INSECURE: isolation layer not in force", "layer", l.Name, "detail", l.Detail)
		}
		if l.Name == posture.CgroupNSCommand {
			// What a real command saw, in the security report's host rows.
			report.Checks = append(report.Checks, posture.Check{Name: l.Name, OK: l.Active, Detail: l.Detail, Required: true})
		}
	}
	if d.sandboxes, err = sandbox.New(ctx, mcfg, records{d.store}, auditFn, cg); err != nil {
		return fmt.Errorf("sandbox manager: %w", err)
	}
	d.closers = append(d.closers, func() error {
		d.sandboxes.Close()
		// The base group, empty once every sandbox is stopped, goes with
		// the server (the next start makes it again).
		cg.Release()
		return nil
	})
	for _, t := range sandboxtools.Tools(d.sandboxes, d.guard) {
		d.dispatch.MustRegister(t)
	}
	if err := d.startTemplates(disk.Budget); err != nil {
		return err
	}
	d.api.SandboxRoutes(d.dispatch, d.sandboxes, api.Posture{Insecure: insecure, Checks: report})
	d.api.SnapshotRoutes(d.dispatch)
	if err := d.startGovernance(ctx); err != nil {
		return err
	}
	met, err := d.startMetrics()
	if err != nil {
		return err
	}
	if err := d.startEgress(ctx, met); err != nil {
		return err
	}
	if err := d.startMCP(ctx); err != nil {
		return err
	}
	if err := d.startCode(ctx); err != nil {
		return err
	}
	if err := d.startBrowser(ctx); err != nil {
		return err
	}
	if err := d.startTransfer(ctx); err != nil {
		return err
	}
	if err := d.startShell(ctx); err != nil {
		return err
	}
	if err := d.startFiles(ctx); err != nil {
		return err
	}
	if err := d.startE2B(ctx); err != nil {
		return err
	}
	ops := d.startBrowserOps(browserRuntime{
		open: d.browser.DevTools,
		restart: func(ctx context.Context, c auth.Caller, id string, opts browserops.RestartOptions) error {
			_, err := d.browser.RestartWith(ctx, c, id, func(o *browser.Options) { o.Locale = opts.Locale })
			return err
		},
		encode: func(ctx context.Context, c auth.Caller, id string, spec browser.EncodeSpec) (browserops.PageEncoder, error) {
			enc, err := d.browser.EncodeFrames(ctx, c, id, spec)
			if err != nil {
				return nil, err // not a typed nil in the interface
			}
			return enc, nil
		},
	})
	if err := d.startAIOExtras(ctx); err != nil {
		return err
	}
	// After the sandbox's own shutdown hooks (registered by startAIOExtras):
	// a deleted sandbox's browser state goes with it.
	d.sandboxes.BeforeStop(func(_ context.Context, s *sandbox.Sandbox, reason string) {
		if reason == "delete" {
			ops.Forget(s.ID())
			d.browser.Forget(s.ID())
		}
	})
	return nil
}

// Templates is the template store.
func (d *Daemon) Templates() *template.Store { return d.templates }

// Sandboxes is the sandbox manager.
func (d *Daemon) Sandboxes() *sandbox.Manager { return d.sandboxes }

// Dispatcher is the one chokepoint every capability call passes.
func (d *Daemon) Dispatcher() *dispatch.Dispatcher { return d.dispatch }

// Guard is the command guard.
func (d *Daemon) Guard() *guard.Guard { return d.guard }

// Limiter is the rate limiter.
func (d *Daemon) Limiter() *ratelimit.Limiter { return d.limiter }

// WithInit sets how sandbox inits are started (tests start their own
// binary); default: this binary with the argument "init".
func WithInit(exe string, args ...string) Option {
	return func(o *options) { o.initExe, o.initArgs = exe, args }
}

// nodeName is this node's name in a cluster's shared store, "" on one host.
func nodeName(st store.Store) string {
	if cl := st.Cluster(); cl != nil {
		return cl.NodeName()
	}
	return ""
}

// launcherLog passes the init launcher's stderr to the server log.
type launcherLog struct{ log *slog.Logger }

func (l launcherLog) Write(p []byte) (int, error) {
	l.log.Warn("init launcher", "msg", string(p))
	return len(p), nil
}
