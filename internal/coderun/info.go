package coderun

import (
	"context"
	"sort"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox"
)

// LanguageInfo describes one runtime.
type LanguageInfo struct {
	Language       string         `json:"language"`
	Description    string         `json:"description"`
	RuntimeVersion *string        `json:"runtime_version"`
	DefaultTimeout int            `json:"default_timeout"`
	MaxTimeout     int            `json:"max_timeout"`
	Details        map[string]any `json:"details"`
}

// Info reports the runtimes as sandboxes have them: each interpreter is
// started once per server, in the caller's sandbox, to learn its version
// (all sandboxes see the same read-only /usr). A viewer's call starts
// nothing (no default sandbox for it, no process in others' sandboxes);
// versions not yet learnt are reported as null.
func (s *Service) Info(ctx context.Context, c auth.Caller, sandboxID string) ([]LanguageInfo, error) {
	var sb *sandbox.Sandbox
	if sandboxID != "" || c.Role != auth.RoleViewer {
		var err error
		if sb, err = s.m.Resolve(ctx, c, sandboxID); err != nil {
			return nil, err
		}
	}
	langs := make([]string, 0, len(runtimes))
	for l := range runtimes {
		langs = append(langs, l)
	}
	sort.Slice(langs, func(i, j int) bool { return langOrder(langs[i]) < langOrder(langs[j]) })
	out := make([]LanguageInfo, 0, len(langs))
	for _, lang := range langs {
		rt := runtimes[lang]
		li := LanguageInfo{Language: lang, Description: rt.desc, DefaultTimeout: int(DefaultTimeout.Seconds()),
			MaxTimeout: int(MaxTimeout.Seconds()), Details: map[string]any{
				"executable": rt.exe, "stateful": true, "session_idle_timeout_seconds": int(s.cfg.IdleTimeout.Seconds()),
				"max_sessions": s.cfg.MaxSessions,
			}}
		s.mu.Lock()
		p, ok := s.probes[lang]
		s.mu.Unlock()
		if !ok && sb != nil && c.Role != auth.RoleViewer {
			// A missing runtime is remembered too: info must not start
			// an interpreter on every call.
			p = probe{}
			if in, err := startInterp(ctx, sb, lang, "", c.IsAdmin()); err == nil {
				p = probe{version: in.version, mpl: in.mpl, ok: true}
				in.close()
			} else if ctx.Err() != nil {
				return nil, fault.Wrap(fault.Unavailable, ctx.Err(), "the request ended")
			}
			s.mu.Lock()
			s.probes[lang] = p
			s.mu.Unlock()
		}
		if p.ok {
			v := p.version
			li.RuntimeVersion = &v
			if lang == Python {
				li.Details["matplotlib"] = p.mpl
			}
		} else if ok {
			li.Details["available"] = false
		}
		out = append(out, li)
	}
	return out, nil
}

// probe is what starting an interpreter taught about a runtime.
type probe struct {
	version string
	mpl     bool
	ok      bool
}

func langOrder(l string) int {
	switch l {
	case Python:
		return 0
	case JavaScript:
		return 1
	}
	return 2
}
