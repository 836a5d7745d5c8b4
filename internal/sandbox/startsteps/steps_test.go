package startsteps

import (
	"errors"
	"testing"
)

// TestBesideGivesItsResultOnce: the first wait gives fn's error (after fn
// ended); later waits give nothing, so a start's cleanup that waits again
// does not report the failure twice. A nil fn is done at once.
func TestBesideGivesItsResultOnce(t *testing.T) {
	boom := errors.New("boom")
	ran := false
	wait := Beside(func() error { ran = true; return boom })
	if _, err := wait(); !errors.Is(err, boom) || !ran {
		t.Fatalf("first wait: %v (ran %v), want boom after fn ran", err, ran)
	}
	if d, err := wait(); d != 0 || err != nil {
		t.Fatalf("second wait: %v, %v; want 0, nil", d, err)
	}
	if d, err := Beside(nil)(); d != 0 || err != nil {
		t.Fatalf("nil fn: %v, %v", d, err)
	}
}

// TestClockRecordsInOrder: marks and added steps come out in the order
// recorded, as log attributes too; a nil clock records nothing.
func TestClockRecordsInOrder(t *testing.T) {
	c := New()
	c.Mark("a")
	c.Add("b_beside", 5)
	c.Mark("c")
	var names []string
	for _, s := range c.Steps() {
		names = append(names, s.Name)
	}
	if len(names) != 3 || names[0] != "a" || names[1] != "b_beside" || names[2] != "c" || c.Steps()[1].D != 5 {
		t.Fatalf("steps %+v", c.Steps())
	}
	if n := len(c.Attrs()); n != 3 {
		t.Fatalf("%d attributes, want 3", n)
	}
	var nilClock *Clock
	nilClock.Mark("x")
	nilClock.Add("y", 1)
	if nilClock.Steps() != nil || nilClock.Attrs() != nil {
		t.Fatal("a nil clock recorded")
	}
}
