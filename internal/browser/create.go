package browser

import (
	"context"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox"
)

// Defaults of a sandbox created with "browser": true, each still capped
// by the server's maximum (SANDBOX_MAX_PROCESSES, SANDBOX_MAX_MEMORY) and
// never below the server's default.
const (
	// BrowserPids fits a multi-process Chromium (about 80 threads at
	// rest, more per context; browserPids) with room for a few contexts,
	// a recording's encoder and the shell, without an allowance.
	BrowserPids = 256
	// BrowserMemory fits Chromium with a few tabs plus its shared memory,
	// which lives in /tmp (--disable-dev-shm-usage: a sandbox's /dev/shm
	// is small) and so counts against the sandbox's memory.
	BrowserMemory = 1 << 30
)

// CreateHook is the sandbox manager's hook for "browser": true: browser
// limits by default, and the browser started with the sandbox, so its
// first operation does not pay the cold start.
func (m *Manager) CreateHook() sandbox.CreateHook {
	return sandbox.CreateHook{Prepare: PrepareSpec, After: m.afterCreate}
}

// PrepareSpec gives a browser sandbox's unset limits the browser's
// defaults (within max), and refuses a browser the server cannot run.
func PrepareSpec(spec *sandbox.Spec, def, maxL sandbox.Limits) error {
	if !spec.Browser {
		return nil
	}
	if err := Available(); err != nil {
		return fault.Wrap(fault.Unsupported, err, "this server has no browser installed; create the sandbox without \"browser\": true")
	}
	if spec.Network.Mode == sandbox.NetworkHost {
		return fault.InvalidField("browser", "the browser does not run in a sandbox with network.mode host (its DevTools port would be on the host's loopback)")
	}
	l := &spec.Limits
	if l.Pids == 0 {
		l.Pids = browserDefault(BrowserPids, def.Pids, maxL.Pids)
	}
	if l.MemoryBytes == 0 {
		l.MemoryBytes = browserDefault(BrowserMemory, def.MemoryBytes, maxL.MemoryBytes)
	}
	return nil
}

// browserDefault is want, capped by the maximum (0: none), and at least
// the server's default.
func browserDefault(want, def, maxV int64) int64 {
	v := want
	if maxV > 0 && v > maxV {
		v = maxV
	}
	return max(v, def)
}

// afterCreate starts the new sandbox's browser (headless, default size).
func (m *Manager) afterCreate(ctx context.Context, _ sandbox.Caller, s *sandbox.Sandbox) error {
	if !s.Record().Spec.Browser {
		return nil
	}
	_, err := m.ensure(ctx, s, nil)
	return err
}
