package dispatch

import (
	"context"
	"errors"
	"testing"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/store"
)

// recordFirstLog is a real audit log on SQLite in a temp dir.
func recordFirstLog(t *testing.T) (*audit.Log, store.Store) {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	lg := audit.New(st, dir)
	t.Cleanup(func() { _ = lg.Close() }) // before the store closes: the posted outcomes
	return lg, st
}

// records reads every stored record of action (exact), after a flush.
func records(t *testing.T, lg *audit.Log, action string) []audit.Record {
	t.Helper()
	all, err := lg.Query(context.Background(), audit.Filter{Action: action})
	if err != nil {
		t.Fatal(err)
	}
	var out []audit.Record
	for _, r := range all {
		if r.Action == action {
			out = append(out, r)
		}
	}
	return out
}

// A tool that starts a command has its call's record durable before the
// command can start — before Run (RecordFirst) or before the sandbox
// releases the command (HeldCommand) — and its outcome in a second record
// that names the first; a query by the tool's name finds one record per
// call. A refused call keeps one record and no outcome.
func TestCommandCallsRecordFirst(t *testing.T) {
	for _, mode := range []struct {
		name string
		c    Commands
	}{{"record first", RecordFirst}, {"held", HeldCommand}} {
		t.Run(mode.name, func(t *testing.T) {
			lg, st := recordFirstLog(t)
			pol := policyFunc(func(a Assessment) (Decision, string) {
				if a.Risk >= guard.Dangerous {
					return Deny, "too risky"
				}
				return Allow, ""
			})
			d := New(Options{Audit: lg, Policy: pol})
			var seenAtStart store.AuditRecord
			var heldFor error
			d.MustRegister(Tool{Name: "cmd.run", Risk: guard.Safe, RiskCeiling: guard.Dangerous, Commands: mode.c,
				Assess: func(args any) Assessment {
					if args == "rm" {
						return Assessment{Risk: guard.Dangerous, Guard: &GuardVerdict{Risk: guard.Dangerous}}
					}
					return Assessment{Risk: guard.Safe, Guard: &GuardVerdict{Risk: guard.Safe}}
				},
				Describe:  func(args any) Target { return Target{Target: args.(string), Sandbox: "sb1"} },
				Summarize: func(_, r any) map[string]any { return map[string]any{"exit_code": r} },
				Run: func(ctx context.Context, _ auth.Caller, args any) (any, error) {
					held := HeldRecord(ctx)
					if (held != nil) != (mode.c == HeldCommand) {
						t.Errorf("HeldRecord = %v in mode %s", held, mode.name)
					}
					if held != nil {
						// The sandbox's part: commit the record, start the
						// command once it is durable.
						_, heldFor = held.Wait()
					}
					// The command starts here: its record must be stored.
					last, err := st.LastAudit(context.Background())
					if err != nil {
						t.Error(err)
					}
					seenAtStart = last
					if args == "fail" {
						return nil, fault.New(fault.Invalid, "bad command")
					}
					return 0, nil
				}})
			c := auth.Caller{KeyID: "key_1", Role: auth.RoleAgent, Addr: "10.0.0.1"}
			if _, err := d.Dispatch(context.Background(), c, "cmd.run", "true"); err != nil {
				t.Fatal(err)
			}
			if heldFor != nil {
				t.Fatalf("the held command was released with %v", heldFor)
			}
			if seenAtStart.Action != "cmd.run" || seenAtStart.Target != "true" || seenAtStart.Verdict != "allowed" {
				t.Fatalf("when the command started the last stored record was %+v, want the call's", seenAtStart)
			}
			calls, outs := records(t, lg, "cmd.run"), records(t, lg, "cmd.run"+OutcomeSuffix)
			if len(calls) != 1 || len(outs) != 1 {
				t.Fatalf("%d call records and %d outcomes, want one each", len(calls), len(outs))
			}
			if calls[0].Detail["guard"] != "safe" || calls[0].Detail["exit_code"] != nil {
				t.Fatalf("call record detail %v: want the assessment, not the outcome", calls[0].Detail)
			}
			o := outs[0]
			if o.Detail["call_seq"] != float64(calls[0].Seq) || o.Detail["exit_code"] != float64(0) || o.Verdict != "allowed" ||
				o.Actor != "key_1" || o.ClientAddr != "10.0.0.1" || o.Target != "true" || o.Sandbox != "sb1" || o.Seq <= calls[0].Seq {
				t.Fatalf("outcome %+v for call %d", o, calls[0].Seq)
			}

			// A run that fails: its outcome says so.
			_, err := d.Dispatch(context.Background(), c, "cmd.run", "fail")
			if fault.KindOf(err) != fault.Invalid {
				t.Fatalf("failing run: %v", err)
			}
			outs = records(t, lg, "cmd.run"+OutcomeSuffix)
			if len(outs) != 2 || outs[1].Verdict != "error" || outs[1].Detail["error"] == nil {
				t.Fatalf("outcomes %+v", outs)
			}

			// Refused by the policy: one record, no outcome, nothing ran.
			seenAtStart = store.AuditRecord{}
			if _, err := d.Dispatch(context.Background(), c, "cmd.run", "rm"); fault.KindOf(err) != fault.Forbidden {
				t.Fatalf("dangerous command: %v", err)
			}
			if seenAtStart.Seq != 0 {
				t.Fatal("a refused command ran")
			}
			calls, outs = records(t, lg, "cmd.run"), records(t, lg, "cmd.run"+OutcomeSuffix)
			if len(calls) != 3 || calls[2].Verdict != "denied" || len(outs) != 2 {
				t.Fatalf("after a refusal: %d call records (last %+v), %d outcomes", len(calls), calls[len(calls)-1], len(outs))
			}
			if v, err := lg.Verify(context.Background()); err != nil || !v.OK {
				t.Fatalf("Verify = %+v, %v", v, err)
			}
		})
	}
}

// A call nested in a HeldCommand call does not hold anything for the
// outer call's record; a command tool nested in it holds for its own.
func TestNestedCallsHoldForTheirOwnRecord(t *testing.T) {
	lg, _ := recordFirstLog(t)
	d := New(Options{Audit: lg})
	var inner, innerCmd Durable
	d.MustRegister(Tool{Name: "plain.get", Risk: guard.Safe,
		Run: func(ctx context.Context, _ auth.Caller, _ any) (any, error) {
			inner = HeldRecord(ctx)
			return "ok", nil
		}})
	d.MustRegister(Tool{Name: "cmd.inner", Risk: guard.Safe, Commands: HeldCommand,
		Run: func(ctx context.Context, _ auth.Caller, _ any) (any, error) {
			innerCmd = HeldRecord(ctx)
			return "ok", nil
		}})
	var outer Durable
	d.MustRegister(Tool{Name: "cmd.outer", Risk: guard.Safe, Commands: HeldCommand,
		Run: func(ctx context.Context, c auth.Caller, _ any) (any, error) {
			outer = HeldRecord(ctx)
			if _, err := Ref[any, string]("plain.get").CallWithin(ctx, nil, errors.New("outside")); err != nil {
				return nil, err
			}
			return Ref[any, string]("cmd.inner").CallWithin(ctx, nil, errors.New("outside"))
		}})
	if _, err := d.Dispatch(context.Background(), auth.Caller{KeyID: "k", Role: auth.RoleAgent}, "cmd.outer", nil); err != nil {
		t.Fatal(err)
	}
	if outer == nil || inner != nil || innerCmd == nil || innerCmd == outer {
		t.Fatalf("outer %v, nested plain %v, nested command %v", outer, inner, innerCmd)
	}
}

// A call record that cannot be stored keeps the command from starting:
// RecordFirst never runs, a held command is released with the error, and
// the answer is Unavailable.
func TestCommandNotStartedWithoutItsRecord(t *testing.T) {
	lg, st := recordFirstLog(t)
	d := New(Options{Audit: lg})
	ran := 0
	var released error
	d.MustRegister(Tool{Name: "cmd.first", Risk: guard.Safe, Commands: RecordFirst,
		Run: func(context.Context, auth.Caller, any) (any, error) { ran++; return "x", nil }})
	d.MustRegister(Tool{Name: "cmd.held", Risk: guard.Safe, Commands: HeldCommand,
		Run: func(ctx context.Context, _ auth.Caller, _ any) (any, error) {
			if _, released = HeldRecord(ctx).Wait(); released != nil {
				return nil, released
			}
			ran++
			return "x", nil
		}})
	_ = st.Close()
	c := auth.Caller{KeyID: "k", Role: auth.RoleAgent}
	for _, name := range []string{"cmd.first", "cmd.held"} {
		res, err := d.Dispatch(context.Background(), c, name, nil)
		if res != nil || fault.KindOf(err) != fault.Unavailable {
			t.Fatalf("%s without a store = %v, %v; want no result, Unavailable", name, res, err)
		}
	}
	if ran != 0 || released == nil {
		t.Fatalf("ran %d commands, held one released with %v", ran, released)
	}
}
