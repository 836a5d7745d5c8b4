package sleepgate

import (
	"testing"
	"time"
)

// TestSleepGateHoldsLeavesWhileCreating: a leave to sleep is granted at
// once when no create is under way or recent; otherwise it waits until
// creates have been quiet for createQuiet, or maxHold passed; held ones go
// in the order asked. The clock is next's argument.
func TestSleepGateHoldsLeavesWhileCreating(t *testing.T) {
	type step struct {
		after time.Duration // since the gate's start
		want  int           // the leave next grants, -1 none
	}
	tests := []struct {
		name string
		// creating: a create under way when the leaves are asked, ended
		// (if end) at endAt.
		creating bool
		end      bool
		endAt    time.Duration
		asks     int
		steps    []step
	}{
		{"while a create runs", true, false, 0, 1, []step{{0, -1}, {time.Minute, -1}, {maxHold - time.Millisecond, -1}, {maxHold, 0}}},
		{"after the create ended", true, true, 10 * time.Second, 2, []step{
			{10*time.Second + createQuiet - time.Millisecond, -1}, {10*time.Second + createQuiet, 0}, {10*time.Second + createQuiet, 1}, {11 * time.Minute, -1}}},
		{"just after a create", false, true, 0, 1, []step{{createQuiet / 2, -1}, {createQuiet, 0}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t0 := time.Now()
			g := &Gate{kick: make(chan struct{}, 1)}
			end := g.Creates()
			if !tc.creating {
				end()
			}
			granted := make([]bool, tc.asks)
			for i := range tc.asks {
				g.Ask(func() { granted[i] = true })
			}
			g.mu.Lock()
			if len(g.held) != tc.asks {
				t.Fatalf("%d leaves held, want %d", len(g.held), tc.asks)
			}
			g.held[0].at = t0 // the leaves were asked at the gate's start
			if !tc.creating {
				g.ended = t0
			}
			g.mu.Unlock()
			for _, st := range tc.steps {
				if tc.creating && tc.end && st.after >= tc.endAt && g.creating > 0 {
					end()
					g.mu.Lock()
					g.ended = t0.Add(tc.endAt)
					g.mu.Unlock()
				}
				grant, wait := g.next(t0.Add(st.after))
				if (grant != nil) != (st.want >= 0) {
					t.Fatalf("at %v: grant %v, want leave %d (wait %v)", st.after, grant != nil, st.want, wait)
				}
				if grant == nil {
					continue
				}
				grant()
				if !granted[st.want] {
					t.Fatalf("at %v: another leave than %d granted: %v", st.after, st.want, granted)
				}
			}
		})
	}
}

// TestSleepGateGrantsAtOnceWhenQuiet: with no create under way or recent,
// a leave is not held.
func TestSleepGateGrantsAtOnceWhenQuiet(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	g := New(stop)
	done := make(chan struct{})
	g.Ask(func() { close(done) })
	<-done
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.held) != 0 {
		t.Fatalf("%d leaves held with no create", len(g.held))
	}
}

// TestSleepGateReleasesAfterCreates: the gate's loop grants a leave held
// during a create once creates are quiet.
func TestSleepGateReleasesAfterCreates(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	g := New(stop)
	end := g.Creates()
	done := make(chan struct{})
	g.Ask(func() { close(done) })
	g.mu.Lock()
	held := len(g.held)
	g.mu.Unlock()
	if held != 1 {
		t.Fatalf("%d leaves held during a create, want 1", held)
	}
	end()
	<-done
}

// TestAfterMs: the quiet period as the init reads it.
func TestAfterMs(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int
	}{{0, 0}, {-1, -1}, {-time.Hour, -1}, {time.Microsecond, 1}, {30 * time.Second, 30000}} {
		if got := AfterMs(tc.d); got != tc.want {
			t.Errorf("AfterMs(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
}
