// Package posture reports which kernel isolation features this host offers,
// by probing them for real (a user namespace is actually created, landlock
// and seccomp are asked through their syscalls) rather than guessing from
// version numbers. `sandhold doctor` prints the report; the server uses it to
// refuse to start without isolation unless told --insecure-no-isolation.
//
// It stops the quiet failure mode of sandboxing: believing a layer is active
// on a host where it is not.
package posture

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Check is one row of the report.
type Check struct {
	Name     string `json:"name"`
	OK       bool   `json:"ok"`
	Detail   string `json:"detail"`
	Required bool   `json:"required"`
}

// Report is the whole table.
type Report struct {
	Checks []Check `json:"checks"`
}

// Ready reports whether every required check passed.
func (r Report) Ready() bool {
	for _, c := range r.Checks {
		if c.Required && !c.OK {
			return false
		}
	}
	return true
}

// Missing lists the names of failed required checks.
func (r Report) Missing() []string {
	var out []string
	for _, c := range r.Checks {
		if c.Required && !c.OK {
			out = append(out, c.Name)
		}
	}
	return out
}

// Get returns the check named name.
func (r Report) Get(name string) (Check, bool) {
	for _, c := range r.Checks {
		if c.Name == name {
			return c, true
		}
	}
	return Check{}, false
}

// Write prints the report as an aligned table.
func (r Report) Write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if _, err := fmt.Fprintln(tw, "CHECK\tSTATUS\tREQUIRED\tDETAIL"); err != nil {
		return err
	}
	for _, c := range r.Checks {
		status := "ok"
		if !c.OK {
			status = "missing"
		}
		req := "no"
		if c.Required {
			req = "yes"
		}
		if _, err := fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Name, status, req, strings.ReplaceAll(c.Detail, "\n", " ")); err != nil {
			return err
		}
	}
	return tw.Flush()
}

// Check names, stable for callers that look rows up.
const (
	Kernel     = "kernel"
	UserNS     = "user namespaces"
	Cgroups    = "cgroups"
	Landlock   = "landlock"
	Seccomp    = "seccomp"
	NoNewPrivs = "no_new_privs"
	// SocketMemory: whether a sandbox's socket buffers are charged to
	// its memory cgroup (SECURITY.md, "Shared kernel resources").
	SocketMemory = "socket memory"
	// PTYPool: the host's terminal pool every sandbox's devpts draws on.
	PTYPool = "terminal pool"
)

// requiredControllers are the cgroup controllers sandbox limits use.
var requiredControllers = []string{"memory", "pids", "cpu"}
