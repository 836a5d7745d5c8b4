package speccheck

import (
	"errors"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/fault"
)

// TestLimitsFillRefuseAndNameTheSetting: a zero limit takes its default,
// a negative one is refused, one above the maximum is refused in the
// unit people use with the setting that raises it (never lowered), and
// the first refusal in the table's order is the one reported.
func TestLimitsFillRefuseAndNameTheSetting(t *testing.T) {
	var mem, pids int64
	if err := Limits([]Limit{
		{Field: "limits.memory", V: &mem, Def: 512 << 20, Max: 1 << 30, Show: Bytes, Setting: "SANDBOX_MAX_MEMORY"},
		{Field: "limits.pids", V: &pids, Def: 50, Show: Count},
	}); err != nil || mem != 512<<20 || pids != 50 {
		t.Fatalf("defaults: %v, memory %d, pids %d", err, mem, pids)
	}
	mem, pids = 2<<30, -1
	err := Limits([]Limit{
		{Field: "limits.memory", V: &mem, Max: 1 << 30, Show: Bytes, Setting: "SANDBOX_MAX_MEMORY"},
		{Field: "limits.pids", V: &pids, Show: Count},
	})
	var fe *fault.Error
	if !errors.As(err, &fe) || fe.Field != "limits.memory" || !strings.Contains(fe.Msg, "2.0 GiB exceeds the server maximum of 1.0 GiB (SANDBOX_MAX_MEMORY)") || mem != 2<<30 {
		t.Fatalf("over the maximum: %v (memory now %d)", err, mem)
	}
	mem = 0
	if err := Limits([]Limit{{Field: "limits.pids", V: &pids, Show: Count}}); !errors.As(err, &fe) || fe.Field != "limits.pids" {
		t.Fatalf("negative: %v", err)
	}
	if got := CPUs(1500); got != "1.5 CPUs" {
		t.Fatalf("CPUs(1500) = %q", got)
	}
}

// TestLabelsAreBounded: too many labels, an empty or long key and a long
// value are refused on labels; the environment passes the executions'
// rule (LD_PRELOAD for admins only).
func TestLabelsAreBounded(t *testing.T) {
	many := map[string]string{}
	for i := range maxLabels + 1 {
		many[strings.Repeat("k", i+1)] = "v"
	}
	for name, labels := range map[string]map[string]string{
		"too many": many, "empty key": {"": "v"},
		"long key": {strings.Repeat("k", maxLabelKeyBytes+1): "v"}, "long value": {"k": strings.Repeat("v", maxLabelBytes+1)},
	} {
		var fe *fault.Error
		if err := Labels(labels, nil, false); !errors.As(err, &fe) || fe.Field != "labels" {
			t.Errorf("%s: %v, want a refusal on labels", name, err)
		}
	}
	if err := Labels(map[string]string{"team": "a"}, map[string]string{"FOO": "1"}, false); err != nil {
		t.Fatalf("plain labels and env: %v", err)
	}
	if err := Labels(nil, map[string]string{"LD_PRELOAD": "/x.so"}, false); err == nil {
		t.Fatal("LD_PRELOAD for a non-admin")
	}
	if err := Labels(nil, map[string]string{"LD_PRELOAD": "/x.so"}, true); err != nil {
		t.Fatalf("LD_PRELOAD for an admin: %v", err)
	}
}

// TestOnExpireIsDeleteOrHibernate: the end of a TTL deletes (also when
// unsaid) or hibernates; anything else is the caller's invalid field.
func TestOnExpireIsDeleteOrHibernate(t *testing.T) {
	for _, v := range []string{"", ExpireDelete, ExpireHibernate} {
		if err := OnExpire(v); err != nil {
			t.Errorf("%q: %v", v, err)
		}
	}
	for _, v := range []string{"pause", "Delete", " hibernate"} {
		if err := OnExpire(v); fault.KindOf(err) != fault.Invalid {
			t.Errorf("%q: %v, want invalid on_expire", v, err)
		}
	}
}
