package browser

import (
	"context"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox"
)

// TestCreateWithBrowserStartsItWithBrowserLimits: "browser": true gives
// the sandbox the browser's pids default (the server's default is 64,
// its maximum 512) and a running browser before the first operation; a
// sandbox without it keeps the server's defaults and no browser.
func TestCreateWithBrowserStartsItWithBrowserLimits(t *testing.T) {
	requireBrowser(t)
	sm, bm := newManagersWith(t, 64, 512)
	sm.OnCreate(bm.CreateHook())
	ctx := context.Background()
	info, err := sm.Create(ctx, sandbox.CallerOf(ownerA), sandbox.Spec{Browser: true})
	if err != nil {
		t.Fatal(err)
	}
	if info.Limits.Pids != BrowserPids {
		t.Fatalf("a browser sandbox's pids limit is %d, want the browser default %d", info.Limits.Pids, BrowserPids)
	}
	st, err := bm.Status(ctx, ownerA, info.ID)
	if err != nil || !st.Running || st.Mode != "multi-process" {
		t.Fatalf("status right after create: %+v, %v (want a running multi-process browser)", st, err)
	}
	plain, err := sm.Create(ctx, sandbox.CallerOf(ownerA), sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	if plain.Limits.Pids != 64 {
		t.Fatalf("a plain sandbox's pids limit is %d, want the server default 64", plain.Limits.Pids)
	}
	if st, _ := bm.Status(ctx, ownerA, plain.ID); st.Running {
		t.Fatal("a sandbox created without browser: true runs a browser")
	}
	// An explicit limit is kept, and one above the maximum refused.
	small, err := sm.Create(ctx, sandbox.CallerOf(ownerA), sandbox.Spec{Browser: true, Limits: sandbox.Limits{Pids: 100}})
	if err != nil {
		t.Fatal(err)
	}
	if small.Limits.Pids != 100 {
		t.Fatalf("explicit pids 100 became %d", small.Limits.Pids)
	}
	if _, err := sm.Create(ctx, sandbox.CallerOf(ownerA), sandbox.Spec{Browser: true, Limits: sandbox.Limits{Pids: 1000}}); !fault.Is(err, fault.Invalid) {
		t.Fatalf("pids above the maximum: %v, want invalid", err)
	}
}

func TestPrepareSpecStaysWithinTheMaxima(t *testing.T) {
	if Available() != nil {
		t.Skip("chromium is not installed")
	}
	for _, tc := range []struct {
		name                string
		def, maxP, wantPids int64
		defM, maxM, wantMem int64
	}{
		{"room for a multi-process browser", 50, 512, BrowserPids, 256 << 20, 4 << 30, BrowserMemory},
		{"maximum below the browser default", 50, 50, 50, 1 << 30, 1 << 30, 1 << 30},
		{"default above the browser default", 400, 512, 400, 2 << 30, 4 << 30, 2 << 30},
		{"no maximum", 50, 0, BrowserPids, 256 << 20, 0, BrowserMemory},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := sandbox.Spec{Browser: true}
			if err := PrepareSpec(&spec, sandbox.Limits{Pids: tc.def, MemoryBytes: tc.defM}, sandbox.Limits{Pids: tc.maxP, MemoryBytes: tc.maxM}); err != nil {
				t.Fatal(err)
			}
			if spec.Limits.Pids != tc.wantPids || spec.Limits.MemoryBytes != tc.wantMem {
				t.Fatalf("limits %+v, want pids %d memory %d", spec.Limits, tc.wantPids, tc.wantMem)
			}
		})
	}
	spec := sandbox.Spec{Browser: true, Network: sandbox.Network{Mode: sandbox.NetworkHost}}
	if err := PrepareSpec(&spec, sandbox.Limits{}, sandbox.Limits{}); !fault.Is(err, fault.Invalid) {
		t.Fatalf("host network: %v, want invalid", err)
	}
	plain := sandbox.Spec{}
	if err := PrepareSpec(&plain, sandbox.Limits{Pids: 50}, sandbox.Limits{Pids: 512}); err != nil || plain.Limits.Pids != 0 {
		t.Fatalf("a spec without browser changed: %+v, %v", plain.Limits, err)
	}
}

func TestChromiumArgsCarryTheLocale(t *testing.T) {
	args := chromiumArgs(sandbox.NetworkNone, Options{Width: 800, Height: 600, Locale: "de-DE"})
	var lang, accept bool
	for _, a := range args {
		lang = lang || a == "--lang=de-DE"
		accept = accept || a == "--accept-lang=de-DE"
	}
	if !lang || !accept {
		t.Fatalf("no locale flags in %v", args)
	}
	for _, a := range chromiumArgs(sandbox.NetworkNone, Options{Width: 800, Height: 600}) {
		if strings.HasPrefix(a, "--lang") {
			t.Fatalf("a locale flag without a locale: %s", a)
		}
	}
}
