// Package speccheck holds the rules a sandbox's spec passes before
// anything of the sandbox is made (internal/sandbox, Manager.resolve): its
// limits against the server's defaults and maxima, its labels' sizes and
// the environment every process of it starts with.
package speccheck

import (
	"fmt"
	"strconv"

	"github.com/dustin/go-humanize"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox/execenv"
)

// Limit is one limit of a spec: its value, which a zero leaves at Def, and
// the server's maximum (0: none), shown to people by Show (in the unit
// people use), raised by Setting.
type Limit struct {
	Field    string
	V        *int64
	Def, Max int64
	Show     func(int64) string
	Setting  string
}

// Limits fills zero limits with their defaults and refuses, in ls's
// order, a negative one or one above its maximum (never silently
// lowered).
func Limits(ls []Limit) error {
	for _, l := range ls {
		switch {
		case *l.V < 0:
			return fault.InvalidField(l.Field, l.Field+" must not be negative")
		case *l.V == 0:
			*l.V = l.Def
		case l.Max > 0 && *l.V > l.Max:
			return fault.InvalidField(l.Field, fmt.Sprintf("%s %s exceeds the server maximum of %s (%s)", l.Field, l.Show(*l.V), l.Show(l.Max), l.Setting))
		}
	}
	return nil
}

// Bytes shows a size in the unit people use (MiB, GiB).
func Bytes(n int64) string { return humanize.IBytes(uint64(max(n, 0))) } // #nosec G115 -- not negative

// CPUs shows milli-CPUs as CPUs.
func CPUs(n int64) string { return strconv.FormatFloat(float64(n)/1000, 'f', -1, 64) + " CPUs" }

// Count shows a number.
func Count(n int64) string { return strconv.FormatInt(n, 10) }

// Caps of a sandbox's labels and environment, with their reasons: both
// live in the sandbox's record (the store) and in every listing.
const (
	maxLabels        = 64
	maxLabelKeyBytes = 128
	maxLabelBytes    = 1024
	// maxSpecEnv matches what one execution may add (execenv.MaxVars).
	maxSpecEnv = execenv.MaxVars
)

// Labels validates a spec's labels and environment: the labels' sizes,
// and the environment by the rule every execution's own variables pass
// (names, no NUL, LD_PRELOAD and friends only for admins: admin), since
// every process of the sandbox starts with it.
func Labels(labels, env map[string]string, admin bool) error {
	if len(labels) > maxLabels {
		return fault.InvalidField("labels", fmt.Sprintf("at most %d labels", maxLabels))
	}
	for k, v := range labels {
		if k == "" || len(k) > maxLabelKeyBytes || len(v) > maxLabelBytes {
			return fault.InvalidField("labels", fmt.Sprintf("label keys are 1 to %d bytes, values at most %d", maxLabelKeyBytes, maxLabelBytes))
		}
	}
	if len(env) > maxSpecEnv {
		return fault.InvalidField("env", fmt.Sprintf("at most %d environment variables", maxSpecEnv))
	}
	_, err := execenv.Build(map[string]string{}, env, admin, execenv.MaxVars)
	return err
}

// What the end of a sandbox's TTL does (sandbox.Spec.OnExpire).
const (
	ExpireDelete    = "delete"
	ExpireHibernate = "hibernate"
)

// OnExpire validates what the end of a spec's TTL does: delete (also
// when empty) or hibernate.
func OnExpire(v string) error {
	switch v {
	case "", ExpireDelete, ExpireHibernate:
		return nil
	}
	return fault.InvalidField("on_expire", "on_expire is delete or hibernate")
}
