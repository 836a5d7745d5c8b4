package diskbudget

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/fault"
)

// TestDefaultsAdmitDensity: with the stock settings on a host with 55 GiB
// free (the budget the server derives from it, the default quota and the
// default over-commit), at least 200 default sandboxes are admitted, and
// the promise cap is still a bound: the next ones are refused with a
// message that names what to change.
func TestDefaultsAdmitDensity(t *testing.T) {
	d := config.Default()
	const free = 55 << 30
	budget := int64(free / 100 * config.DefaultDiskBudgetPercent)
	var l Ledger
	admitted := 0
	var refusal error
	for range 10000 {
		if _, err := l.Reserve(d.MaxDisk.Bytes(), budget, d.DiskOvercommit); err != nil {
			refusal = err
			break
		}
		admitted++
	}
	if admitted < 200 {
		t.Fatalf("the defaults admit %d sandboxes of %s on a host with 55 GiB free, want at least 200", admitted, d.MaxDisk)
	}
	var fe *fault.Error
	if !errors.As(refusal, &fe) || fe.Kind != fault.Conflict || fe.Field != "limits.disk" {
		t.Fatalf("past the cap (%d admitted): got %v, want a conflict on limits.disk", admitted, refusal)
	}
	for _, want := range []string{"SANDBOX_DISK_OVERCOMMIT", "SANDBOX_DISK_BUDGET", "SANDBOX_MAX_DISK", "limits.disk", "delete a sandbox"} {
		if !strings.Contains(fe.Msg, want) {
			t.Errorf("the refusal %q does not name %s", fe.Msg, want)
		}
	}
	if c := l.Committed(); c != int64(admitted)*d.MaxDisk.Bytes() || c > PromiseCap(budget, d.DiskOvercommit) {
		t.Fatalf("committed %d after %d admitted of %d", c, admitted, d.MaxDisk.Bytes())
	}
	t.Logf("admitted %d default sandboxes; refusal: %s", admitted, fe.Msg)
}

// TestLedgerMovesAQuotaInOneStep follows one quota through a pool's life
// (reserved by a refill, pooled, taken by a create, listed, released) and
// a thrown-away pool sandbox: the committed sum counts it at every step
// and never twice once the step is done; releases run once.
func TestLedgerMovesAQuotaInOneStep(t *testing.T) {
	const budget, q = 100, 30
	var l Ledger
	step := func(name string, want int64) {
		t.Helper()
		if c := l.Committed(); c != want {
			t.Fatalf("%s: committed %d, want %d", name, c, want)
		}
	}
	if _, err := l.Reserve(q, budget, 1); err != nil {
		t.Fatal(err)
	}
	step("reserved", q)
	l.IntoPool(q, q) // the refill's keep: its release is not called
	step("pooled", q)
	release := l.OutOfPool(q, true)
	step("taken by a create", q)
	l.List(q)
	step("listed before the release", 2*q)
	release()
	release()
	step("listed", q)
	l.Unlist(q)
	step("deleted", 0)

	if _, err := l.Reserve(q, budget, 1); err != nil {
		t.Fatal(err)
	}
	l.IntoPool(q, q)
	_ = l.OutOfPool(q, false)
	step("a pool sandbox thrown away", 0)

	if _, err := l.Reserve(budget+1, budget, 1); err == nil {
		t.Fatal("a reservation over the cap was admitted")
	}
	if r, err := l.Reserve(budget+1, 0, 1); err != nil {
		t.Fatalf("without a budget: %v", err)
	} else {
		r()
	}
	step("without a budget nothing is counted", 0)
}

// TestLedgerHoldsTheCapUnderRaces: reservations racing from many
// goroutines never promise more than the cap together.
func TestLedgerHoldsTheCapUnderRaces(t *testing.T) {
	const budget, q, n = 1000, 7, 64
	var l Ledger
	var wg sync.WaitGroup
	var mu sync.Mutex
	var admitted int64
	for range n {
		wg.Go(func() {
			for range 20 {
				if _, err := l.Reserve(q, budget, 2); err == nil {
					mu.Lock()
					admitted += q
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if admitted > 2*budget || admitted != l.Committed() {
		t.Fatalf("admitted %d, committed %d, cap %d", admitted, l.Committed(), 2*budget)
	}
	if admitted+q <= 2*budget {
		t.Fatalf("admitted %d: room for another %d left under the cap %d", admitted, q, 2*budget)
	}
}
