package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/store"
	"github.com/sandhold/sandhold/internal/store/pgtest"
)

// Except leaves out exact actions (the console's polling reads), on both
// stores, and nothing else: a prefix of a left-out action still matches.
func TestAuditQueryExcept(t *testing.T) {
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			var st store.Store
			if name == "sqlite" {
				s, err := store.Open(ctx, t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				st = s
			} else {
				s, err := store.OpenPostgres(ctx, pgtest.URL(t))
				if err != nil {
					t.Fatal(err)
				}
				st = s
			}
			t.Cleanup(func() { _ = st.Close() })
			l := audit.New(st, t.TempDir())
			for _, a := range []string{"sandbox.list", "exec.run", "sandbox.resources", "sandbox.list.more", "control.get", "exec.run"} {
				if _, err := l.Append(ctx, audit.Entry{Actor: "k", Action: a, Verdict: audit.Allow}); err != nil {
					t.Fatal(err)
				}
			}
			for _, tc := range []struct {
				name   string
				f      audit.Filter
				expect string
			}{
				{"none left out", audit.Filter{}, "sandbox.list exec.run sandbox.resources sandbox.list.more control.get exec.run"},
				{"polls left out", audit.Filter{Except: []string{"sandbox.list", "sandbox.resources", "control.get"}}, "exec.run sandbox.list.more exec.run"},
				{"with an action", audit.Filter{Action: "sandbox", Except: []string{"sandbox.list"}}, "sandbox.resources sandbox.list.more"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					recs, err := l.Query(ctx, tc.f)
					if err != nil {
						t.Fatal(err)
					}
					var got []string
					for _, r := range recs {
						if r.Action != "audit.anchor" {
							got = append(got, r.Action)
						}
					}
					if strings.Join(got, " ") != tc.expect {
						t.Fatalf("got %v, want %s", got, tc.expect)
					}
				})
			}
		})
	}
}
