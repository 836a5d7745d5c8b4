package browserops

import (
	"context"
	"encoding/json"

	cdproto "github.com/chromedp/cdproto/cdp"
	jsonv2 "github.com/chromedp/cdproto/cdp/jsonv2"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/storage"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
)

// maxStateFile caps a state file read back (cookies + localStorage).
const maxStateFile = 8 << 20

// PathArgs is AIO's StateSaveRequest and StateLoadRequest.
type PathArgs struct {
	dispatch.On
	Path string `json:"path" required:"true" doc:"a workspace path (relative ones are under /workspace)"`
}

// Validate wants a path.
func (a PathArgs) Validate() error { return needPath("body.path", a.Path) }

// storageState is Playwright's storage state file.
type storageState struct {
	Cookies []*network.Cookie `json:"cookies"`
	Origins []originState     `json:"origins"`
}

type originState struct {
	Origin       string      `json:"origin"`
	LocalStorage []nameValue `json:"localStorage"`
}

type nameValue struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// stateTools save and load the browser's storage state (cookies and
// localStorage, Playwright's format) as workspace files.
func stateTools(ts *[]dispatch.Tool, s *Service) {
	define(ts, ToolStateSave, "Save cookies and the active page's localStorage to a workspace file (Playwright's storage state)", guard.Medium,
		func(ctx context.Context, c auth.Caller, a PathArgs) (map[string]any, error) {
			return s.SaveState(ctx, c, a)
		},
		func(a PathArgs) (string, map[string]any) { return clipMsg(a.Path), nil })
	define(ts, ToolStateLoad, "Load cookies and localStorage from a workspace file (Playwright's storage state)", guard.Medium,
		func(ctx context.Context, c auth.Caller, a PathArgs) (map[string]any, error) {
			return s.LoadState(ctx, c, a)
		},
		func(a PathArgs) (string, map[string]any) { return clipMsg(a.Path), nil })
}

// SaveState writes cookies and the active origin's localStorage.
func (s *Service) SaveState(ctx context.Context, c auth.Caller, a PathArgs) (map[string]any, error) {
	if s.cfg.Files == nil {
		return nil, errNoFiles()
	}
	st, err := run(ctx, s, c, a.Sandbox, func(o *op) (storageState, error) {
		res, err := cdproto.Call(ctx, o.b.client.Browser(), storage.GetCookies, storage.GetCookiesParams{})
		if err != nil {
			return storageState{}, err
		}
		st := storageState{Cookies: res.Cookies, Origins: []originState{}}
		var os originState
		if err := callJS(ctx, o.page(), `if (!/^https?:/.test(location.protocol)) return {origin: '', localStorage: []};
const out = [];
for (let i = 0; i < localStorage.length; i++) { const k = localStorage.key(i); out.push({name: k, value: localStorage.getItem(k)}); }
return {origin: location.origin, localStorage: out};`, nil, &os); err == nil && os.Origin != "" {
			st.Origins = append(st.Origins, os)
		}
		if st.Cookies == nil {
			st.Cookies = []*network.Cookie{}
		}
		return st, nil
	})
	if err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return nil, err
	}
	id, err := s.cfg.Resolve(ctx, c, a.Sandbox)
	if err != nil {
		return nil, err
	}
	if err := s.cfg.Files.WriteFile(ctx, c, id, workspacePath(a.Path), data); err != nil {
		return nil, err
	}
	return map[string]any{"path": a.Path, "cookies": len(st.Cookies), "origins": len(st.Origins)}, nil
}

// LoadState sets the cookies of a state file, and the localStorage of
// the origin the active page is on (other origins' storage can only be
// set on their pages: they are counted as skipped).
func (s *Service) LoadState(ctx context.Context, c auth.Caller, a PathArgs) (map[string]any, error) {
	id, err := s.filesFor(ctx, c, a.Sandbox)
	if err != nil {
		return nil, err
	}
	data, err := s.cfg.Files.ReadFile(ctx, c, id, workspacePath(a.Path))
	if err != nil {
		return nil, err
	}
	if len(data) > maxStateFile {
		return nil, fault.New(fault.TooLarge, "the state file is larger than 8 MiB")
	}
	var raw struct {
		Cookies []json.RawMessage `json:"cookies"`
		Origins []originState     `json:"origins"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fault.InvalidField("body.path", "the file is not a storage state (JSON with cookies and origins)")
	}
	params := make([]*network.CookieParam, 0, len(raw.Cookies))
	for _, rc := range raw.Cookies {
		var p network.CookieParam
		if err := jsonv2.Unmarshal(rc, &p); err != nil {
			return nil, fault.InvalidField("body.path", "a cookie in the file does not match the cookie shape")
		}
		if p.Expires < 0 {
			p.Expires = 0 // session cookie
		}
		params = append(params, &p)
	}
	return run(ctx, s, c, id, func(o *op) (map[string]any, error) {
		if len(params) > 0 {
			if _, err := cdproto.Call(ctx, o.b.client.Browser(), storage.SetCookies, storage.SetCookiesParams{Cookies: params}); err != nil {
				return nil, err
			}
		}
		applied, skipped := 0, 0
		for _, or := range raw.Origins {
			var ok bool
			if err := callJS(ctx, o.page(), `if (location.origin !== a.origin) return false;
for (const e of a.localStorage || []) localStorage.setItem(e.name, e.value);
return true;`, or, &ok); err != nil || !ok {
				skipped++
				continue
			}
			applied++
		}
		return map[string]any{"path": a.Path, "cookies": len(params), "origins_applied": applied, "origins_skipped": skipped}, nil
	})
}
