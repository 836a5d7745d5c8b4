package ratelimit

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is a manually advanced clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newTestLimiter(t *testing.T, opts Options) (*Limiter, *fakeClock) {
	t.Helper()
	clk := newFakeClock()
	opts.Now = clk.Now
	return New(opts), clk
}

func TestDefaultRulesMatchSecurityRules(t *testing.T) {
	r := DefaultRules()
	if err := r.Validate(); err != nil {
		t.Fatalf("default rules invalid: %v", err)
	}
	want := map[Category]Rule{
		File:        {PerMinute: 100, Burst: 100},
		Exec:        {PerMinute: 10, Burst: 10},
		Browser:     {PerMinute: 20, Burst: 20},
		AuthFailure: {PerMinute: 10, Burst: 10},
		Terminal:    {Concurrent: 5},
	}
	for c, w := range want {
		if got := r[c]; got != w {
			t.Errorf("%s: got %+v, want %+v", c, got, w)
		}
	}
}

func TestAllowBurstRefuseRecover(t *testing.T) {
	cases := []struct {
		name  string
		cat   Category
		burst int
		// refill is the time one token takes.
		refill time.Duration
	}{
		{"exec 10/min burst 10", Exec, 10, 6 * time.Second},
		{"file 100/min", File, 100, 600 * time.Millisecond},
		{"browser 20/min", Browser, 20, 3 * time.Second},
		{"auth failures 10/min", AuthFailure, 10, 6 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, clk := newTestLimiter(t, Options{})
			start := clk.Now()
			for i := range tc.burst {
				d := l.Allow("k1", tc.cat)
				if !d.Allowed {
					t.Fatalf("request %d refused within burst: %+v", i+1, d)
				}
				if d.Limit != tc.burst || d.Remaining != tc.burst-i-1 {
					t.Fatalf("request %d: limit %d remaining %d, want %d %d", i+1, d.Limit, d.Remaining, tc.burst, tc.burst-i-1)
				}
				if d.RetryAfter != 0 {
					t.Fatalf("allowed request carries RetryAfter %v", d.RetryAfter)
				}
			}
			d := l.Allow("k1", tc.cat)
			if d.Allowed {
				t.Fatalf("request beyond burst allowed: %+v", d)
			}
			if d.Remaining != 0 || d.Limit != tc.burst {
				t.Fatalf("refusal: %+v", d)
			}
			if d.RetryAfter != tc.refill {
				t.Fatalf("RetryAfter = %v, want %v", d.RetryAfter, tc.refill)
			}
			if want := start.Add(time.Duration(tc.burst) * tc.refill); !d.Reset.Equal(want) {
				t.Fatalf("Reset = %v, want %v (full bucket)", d.Reset, want)
			}
			if d.RetryAfterSeconds() < 1 {
				t.Fatalf("RetryAfterSeconds = %d", d.RetryAfterSeconds())
			}
			// Another key is unaffected.
			if d := l.Allow("k2", tc.cat); !d.Allowed {
				t.Fatalf("other key refused: %+v", d)
			}
			// Just before the hint: still refused; at the hint: allowed.
			clk.Advance(tc.refill - time.Millisecond)
			if d := l.Allow("k1", tc.cat); d.Allowed {
				t.Fatalf("allowed before RetryAfter elapsed: %+v", d)
			}
			clk.Advance(time.Millisecond)
			if d := l.Allow("k1", tc.cat); !d.Allowed {
				t.Fatalf("refused after RetryAfter elapsed: %+v", d)
			}
			// After a whole window the full burst is back.
			clk.Advance(time.Minute)
			for i := range tc.burst {
				if d := l.Allow("k1", tc.cat); !d.Allowed {
					t.Fatalf("after the window, request %d refused: %+v", i+1, d)
				}
			}
		})
	}
}

// A client that keeps hammering while refused must be let back in exactly
// when it would have been had it waited quietly.
func TestRefusedRequestsAreNotCounted(t *testing.T) {
	l, clk := newTestLimiter(t, Options{})
	for range 10 {
		l.Allow("k", Exec)
	}
	first := l.Allow("k", Exec)
	if first.Allowed {
		t.Fatal("11th exec allowed")
	}
	// 1000 refused attempts spread over the first 5.9 s.
	for range 1000 {
		clk.Advance(5900 * time.Microsecond)
		d := l.Allow("k", Exec)
		if d.Allowed {
			t.Fatalf("allowed early at %v", clk.Now())
		}
		if d.Limit != 10 || d.Remaining != 0 {
			t.Fatalf("refusal changed the bucket: %+v", d)
		}
	}
	clk.Advance(100 * time.Millisecond) // 6.0 s after the first refusal
	if d := l.Allow("k", Exec); !d.Allowed {
		t.Fatalf("refused retries extended the window: %+v", d)
	}
}

func TestPeekDoesNotConsume(t *testing.T) {
	l, _ := newTestLimiter(t, Options{})
	if d := l.Peek("addr", AuthFailure); !d.Allowed || d.Remaining != 10 {
		t.Fatalf("peek of fresh key: %+v", d)
	}
	if n := l.Tracked(); n != 0 {
		t.Fatalf("peek of fresh key created %d buckets", n)
	}
	for range 10 {
		l.Allow("addr", AuthFailure)
	}
	for range 5 {
		if d := l.Peek("addr", AuthFailure); d.Allowed || d.RetryAfter != 6*time.Second {
			t.Fatalf("peek of drained key: %+v", d)
		}
	}
}

func TestRuleOverridesAndResolve(t *testing.T) {
	l, _ := newTestLimiter(t, Options{Roles: map[string]Rules{
		"admin":  {Exec: {PerMinute: 600, Burst: 50}},
		"viewer": {File: {PerMinute: 10, Burst: 2}},
	}})
	cases := []struct {
		name string
		role string
		key  Rules
		cat  Category
		want Rule
	}{
		{"base", "agent", nil, Exec, Rule{PerMinute: 10, Burst: 10}},
		{"role overrides base", "admin", nil, Exec, Rule{PerMinute: 600, Burst: 50}},
		{"role leaves other categories", "admin", nil, File, Rule{PerMinute: 100, Burst: 100}},
		{"key overrides role", "admin", Rules{Exec: {PerMinute: 1, Burst: 1}}, Exec, Rule{PerMinute: 1, Burst: 1}},
		{"key override of concurrency", "agent", Rules{Terminal: {Concurrent: 1}}, Terminal, Rule{Concurrent: 1}},
		{"unknown role is base", "nobody", nil, File, Rule{PerMinute: 100, Burst: 100}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := l.Resolve(tc.role, tc.key)[tc.cat]; got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	// Resolve does not mutate the base rules.
	if got := l.Resolve("agent", nil)[Exec]; got.Burst != 10 {
		t.Fatalf("base rules mutated: %+v", got)
	}

	// A bucket adopts a changed rule on next use.
	rules := l.Resolve("viewer", nil)
	for range 2 {
		if d := l.AllowRule("v", File, rules[File]); !d.Allowed {
			t.Fatalf("viewer refused within burst: %+v", d)
		}
	}
	if d := l.AllowRule("v", File, rules[File]); d.Allowed || d.Limit != 2 {
		t.Fatalf("viewer beyond burst 2: %+v", d)
	}
	if d := l.AllowRule("v", File, Rule{PerMinute: 100, Burst: 100}); d.Limit != 100 {
		t.Fatalf("raised rule not adopted: %+v", d)
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name  string
		rules Rules
		ok    bool
	}{
		{"defaults", DefaultRules(), true},
		{"empty", Rules{}, true},
		{"negative rate", Rules{File: {PerMinute: -1, Burst: 1}}, false},
		{"negative burst", Rules{File: {PerMinute: 1, Burst: -1}}, false},
		{"negative concurrency", Rules{Terminal: {Concurrent: -1}}, false},
		{"unknown category", Rules{Category(200): {PerMinute: 1, Burst: 1}}, false},
		{"huge rate", Rules{File: {PerMinute: 1e12, Burst: 1}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.rules.Validate(); (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestParseCategory(t *testing.T) {
	for _, c := range Categories() {
		got, err := ParseCategory(c.String())
		if err != nil || got != c {
			t.Errorf("round trip %v: %v %v", c, got, err)
		}
	}
	if _, err := ParseCategory("nope"); err == nil {
		t.Error("unknown category parsed")
	}
}

func TestUnlimitedAndDisabled(t *testing.T) {
	l, _ := newTestLimiter(t, Options{Disabled: true})
	for range 1000 {
		if d := l.Allow("k", Exec); !d.Allowed {
			t.Fatal("disabled limiter refused")
		}
	}
	var releases []func()
	for range 100 {
		rel, d := l.Acquire("k", Terminal)
		if !d.Allowed {
			t.Fatal("disabled limiter refused a terminal")
		}
		releases = append(releases, rel)
	}
	for _, rel := range releases {
		rel()
	}
	if n := l.Tracked(); n != 0 {
		t.Fatalf("disabled limiter tracks %d buckets", n)
	}

	l2, _ := newTestLimiter(t, Options{Rules: Rules{File: {PerMinute: 1, Burst: 1}}})
	for range 100 {
		if d := l2.Allow("k", Exec); !d.Allowed || d.Limit != 0 {
			t.Fatalf("category without a rule limited: %+v", d)
		}
	}
}

func TestConcurrencyCap(t *testing.T) {
	l, _ := newTestLimiter(t, Options{})
	var rels []func()
	for i := range 5 {
		rel, d := l.Acquire("k", Terminal)
		if !d.Allowed || d.Limit != 5 || d.Remaining != 4-i {
			t.Fatalf("terminal %d: %+v", i+1, d)
		}
		rels = append(rels, rel)
	}
	rel, d := l.Acquire("k", Terminal)
	if d.Allowed || d.RetryAfter != ConcurrencyRetryAfter || d.Remaining != 0 {
		t.Fatalf("6th terminal: %+v", d)
	}
	rel() // releasing a refused hold must not free a slot
	if _, d := l.Acquire("k", Terminal); d.Allowed {
		t.Fatal("release of a refused hold freed a slot")
	}
	// Another key and another category are independent.
	if _, d := l.Acquire("other", Terminal); !d.Allowed {
		t.Fatal("other key refused")
	}
	// Release is idempotent: releasing one hold twice frees one slot.
	rels[0]()
	rels[0]()
	if _, d := l.Acquire("k", Terminal); !d.Allowed {
		t.Fatal("slot not freed by release")
	}
	if _, d := l.Acquire("k", Terminal); d.Allowed {
		t.Fatal("double release freed two slots")
	}
	// Caller-provided caps (sandboxes per key, executions per sandbox).
	for i := range 3 {
		if _, d := l.AcquireRule("sbx-1", Executions, Rule{Concurrent: 3}); !d.Allowed {
			t.Fatalf("execution %d refused", i+1)
		}
	}
	if _, d := l.AcquireRule("sbx-1", Executions, Rule{Concurrent: 3}); d.Allowed {
		t.Fatal("4th execution allowed with cap 3")
	}
}

func TestConcurrentAcquireRelease(t *testing.T) {
	l, _ := newTestLimiter(t, Options{})
	const workers = 16
	var wg sync.WaitGroup
	var mu sync.Mutex
	inUse, peak := 0, 0
	for range workers {
		wg.Go(func() {
			for range 200 {
				rel, d := l.Acquire("k", Terminal)
				if !d.Allowed {
					continue
				}
				mu.Lock()
				inUse++
				peak = max(peak, inUse)
				mu.Unlock()
				runtime.Gosched()
				mu.Lock()
				inUse--
				mu.Unlock()
				rel()
			}
		})
	}
	wg.Wait()
	if peak > DefaultTerminals {
		t.Fatalf("peak holds %d > cap %d", peak, DefaultTerminals)
	}
	if _, d := l.Acquire("k", Terminal); !d.Allowed || d.Remaining != DefaultTerminals-1 {
		t.Fatalf("holds leaked: %+v", d)
	}
}

func TestIdleBucketsAreEvicted(t *testing.T) {
	l, clk := newTestLimiter(t, Options{})
	for i := range 1000 {
		l.Allow(fmt.Sprintf("k%d", i), Exec)
	}
	rel, _ := l.Acquire("holder", Terminal)
	if n := l.Tracked(); n != 1001 {
		t.Fatalf("tracked %d, want 1001", n)
	}
	// 30 s later: one-token buckets have refilled (6 s) but the sweep has
	// not run yet (interval 1 min since the first call). Drain a bucket now.
	clk.Advance(30 * time.Second)
	for range 30 {
		l.Allow("drained", Exec)
	}
	if n := l.Tracked(); n != 1002 {
		t.Fatalf("swept before the interval: tracked %d, want 1002", n)
	}
	// One minute after the first call the sweep runs: refilled buckets go;
	// the drained bucket (full only 60 s after its draining) and the held
	// one stay, with their state.
	clk.Advance(30 * time.Second)
	l.Allow("tick", Exec)
	if n := l.Tracked(); n != 3 { // drained, holder, tick
		t.Fatalf("after sweep tracked %d, want 3", n)
	}
	if d := l.Peek("drained", Exec); d.Remaining != 5 {
		t.Fatalf("drained bucket lost its state (30 s refill = 5 tokens): %+v", d)
	}
	if _, d := l.Acquire("holder", Terminal); d.Remaining != 3 {
		t.Fatalf("held bucket lost its count: %+v", d)
	}
	rel()
	clk.Advance(2 * time.Minute)
	l.Allow("tick2", Exec)
	// The holder still has the second hold open, so it stays.
	if n := l.Tracked(); n != 2 {
		t.Fatalf("after sweep tracked %d, want 2 (holder, tick2)", n)
	}
}

func TestHardCapEvictsOldestIdle(t *testing.T) {
	l, clk := newTestLimiter(t, Options{MaxTracked: 100})
	// victim drains its bucket first; it is the oldest entry.
	for range 10 {
		l.Allow("victim", Exec)
	}
	if d := l.Allow("victim", Exec); d.Allowed {
		t.Fatal("victim not drained")
	}
	held, _ := l.Acquire("held", Terminal)
	defer held()
	// 98 other keys fill the table to its cap without evicting the victim.
	for i := range 98 {
		clk.Advance(time.Millisecond)
		l.Allow(fmt.Sprintf("churn%d", i), AuthFailure)
	}
	if n := l.Tracked(); n != 100 {
		t.Fatalf("tracked %d, want 100", n)
	}
	if d := l.Allow("victim", Exec); d.Allowed {
		t.Fatal("victim reset before the cap was exceeded")
	}
	// Touching the victim moved it to the front: churn of up to 98 more keys
	// evicts older churn, not the victim and never the held bucket.
	for i := range 98 {
		l.Allow(fmt.Sprintf("more%d", i), AuthFailure)
		if n := l.Tracked(); n > 100 {
			t.Fatalf("tracked %d above cap", n)
		}
	}
	if d := l.Allow("victim", Exec); d.Allowed {
		t.Fatal("victim reset by churn smaller than the cap")
	}
	if _, d := l.Acquire("held", Terminal); !d.Allowed || d.Remaining != 3 {
		t.Fatalf("held bucket lost its count: %+v", d)
	}
}

func TestHardCapAllHeldFailsClosed(t *testing.T) {
	l, _ := newTestLimiter(t, Options{MaxTracked: 3})
	for i := range 3 {
		if _, d := l.Acquire(fmt.Sprintf("s%d", i), Sandboxes); !d.Allowed {
			t.Fatalf("acquire %d refused", i)
		}
	}
	if d := l.Allow("new", Exec); d.Allowed {
		t.Fatal("new key allowed while every tracked bucket is held")
	}
	if _, d := l.Acquire("new", Sandboxes); d.Allowed {
		t.Fatal("new hold allowed while every tracked bucket is held")
	}
	if n := l.Tracked(); n != 3 {
		t.Fatalf("tracked %d, want 3", n)
	}
}

// TestSoakKeyChurn drives 100,000 distinct keys (a client cycling through
// addresses) and checks that the table stays under its cap and the heap does
// not grow with the number of keys.
func TestSoakKeyChurn(t *testing.T) {
	const keys = 100_000
	const maxTracked = 10_000
	l, clk := newTestLimiter(t, Options{MaxTracked: maxTracked})
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range keys {
		if i%1000 == 0 {
			clk.Advance(time.Second)
		}
		key := fmt.Sprintf("198.51.100.%d/%d", i%256, i)
		l.Allow(key, AuthFailure)
		l.Allow(key, Exec)
		if i%7 == 0 {
			rel, _ := l.Acquire(key, Terminal)
			rel()
		}
		if i%10_000 == 0 {
			if n := l.Tracked(); n > maxTracked {
				t.Fatalf("after %d keys tracked %d > cap %d", i, n, maxTracked)
			}
		}
	}
	if n := l.Tracked(); n > maxTracked {
		t.Fatalf("tracked %d > cap %d", n, maxTracked)
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	growth := float64(after.HeapAlloc) - float64(before.HeapAlloc)
	// 10,000 buckets at a few hundred bytes each is a few MiB; 100,000
	// untracked would be ten times that. 16 MiB is generous.
	const limit = 16 << 20
	t.Logf("tracked %d buckets, heap growth %.0f KiB", l.Tracked(), growth/1024)
	if growth > limit {
		t.Fatalf("heap grew %.0f bytes for %d keys (limit %d)", growth, keys, limit)
	}
	// After an idle minute everything refilled goes.
	clk.Advance(2 * time.Minute)
	l.Allow("last", Exec)
	if n := l.Tracked(); n != 1 {
		t.Fatalf("after idle sweep tracked %d, want 1", n)
	}
	runtime.KeepAlive(l)
}

func TestLongKeysAreDistinctAndBounded(t *testing.T) {
	l, _ := newTestLimiter(t, Options{})
	long := strings.Repeat("k", 10_000)
	for range 10 {
		l.Allow(long+"a", Exec)
	}
	if d := l.Allow(long+"a", Exec); d.Allowed {
		t.Fatal("long key not limited")
	}
	if d := l.Allow(long+"b", Exec); !d.Allowed {
		t.Fatal("distinct long keys share a bucket")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for id := range l.buckets {
		if len(id.key) > maxKeyLen {
			t.Fatalf("stored key of %d bytes", len(id.key))
		}
	}
}
