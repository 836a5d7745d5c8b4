package dispatch

import (
	"context"
	"testing"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/store"
)

// TestRecordsThroughTheLogsWrite: over a real audit.Log the dispatcher
// stores each call's record with Write (no record decoded back), the
// record is in the chain before the answer, and a log that cannot store
// it still withholds the result.
func TestRecordsThroughTheLogsWrite(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	lg := audit.New(st, dir)
	d := New(Options{Audit: lg})
	d.MustRegister(Tool{Name: "plain.echo", Risk: guard.Safe,
		Run: func(context.Context, auth.Caller, any) (any, error) { return "result", nil }})
	c := auth.Caller{KeyID: "key_1", Role: auth.RoleAgent}
	res, err := d.Dispatch(context.Background(), c, "plain.echo", nil)
	if err != nil || res != "result" {
		t.Fatalf("Dispatch = %v, %v", res, err)
	}
	last, err := st.LastAudit(context.Background())
	if err != nil || last.Action != "plain.echo" || last.Actor != "key_1" || last.Verdict != "allowed" {
		t.Fatalf("last record %+v, %v; want the call's", last, err)
	}
	if v, err := lg.Verify(context.Background()); err != nil || !v.OK {
		t.Fatalf("Verify = %+v, %v", v, err)
	}
	// The store closed under the log: the call runs, its answer is withheld.
	_ = st.Close()
	res, err = d.Dispatch(context.Background(), c, "plain.echo", nil)
	if res != nil || fault.KindOf(err) != fault.Unavailable {
		t.Fatalf("Dispatch without a store = %v, %v; want no result, Unavailable", res, err)
	}
}
