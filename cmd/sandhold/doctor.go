package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/agent/fds"
	"github.com/sandhold/sandhold/internal/agent/initbin"
	"github.com/sandhold/sandhold/internal/browser"
	"github.com/sandhold/sandhold/internal/isolate/cgroup"
	"github.com/sandhold/sandhold/internal/posture"
	"github.com/sandhold/sandhold/internal/sandbox"
)

type doctorCmd struct {
	NoSandbox bool `name:"no-sandbox" help:"Only probe kernel features; do not start a test sandbox."`
}

func (d doctorCmd) Run(e *env) error {
	r := posture.Probe()
	if err := r.Write(e.stdout); err != nil {
		return err
	}
	if _, err := fmt.Fprintln(e.stdout, "\n"+browser.ProbeHost(context.Background()).String()); err != nil {
		return err
	}
	if !r.Ready() {
		return &exitError{code: 1, err: fmt.Errorf("required isolation features missing: %s", strings.Join(r.Missing(), ", "))}
	}
	if d.NoSandbox {
		init := "server binary re-executed as init (built without the lean init)"
		if initbin.Embedded() {
			init = "lean init, executed from a sealed memfd"
		}
		_, err := fmt.Fprintf(e.stdout, "\n%s: %s\nall required isolation features are available (no test sandbox started)\n", initbin.ReportName, init)
		return err
	}
	choice, err := initbin.Select()
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	defer func() { _ = choice.Close() }()
	if _, err := fmt.Fprintf(e.stdout, "\n%s: %s\n", initbin.ReportName, choice.Detail); err != nil {
		return err
	}
	layers, err := testSandbox(choice.File)
	if err != nil {
		return &exitError{code: 1, err: fmt.Errorf("test sandbox: %w", err)}
	}
	if err := writeLayers(e.stdout, layers); err != nil {
		return err
	}
	_, err = fmt.Fprintln(e.stdout, "\nall isolation layers are in force in a test sandbox")
	return err
}

// testSandbox starts one throw-away sandbox, exactly as the server would,
// runs a command in it and reports the layers its init put in force.
// initFile is the lean init's memfd, or nil to re-execute this binary.
func testSandbox(initFile *os.File) ([]agent.Layer, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("starting a sandbox needs root (id mappings and cgroups); use --no-sandbox to probe only")
	}
	// As in serve: nothing inherited may reach the test sandbox.
	if err := fds.CloseOnExecFrom(3); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "sandhold-doctor-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	cg, err := cgroup.New(fmt.Sprintf("sandhold-doctor-%d", os.Getpid()))
	if err != nil {
		return nil, err
	}
	defer cg.Release() // after m.Close below: deferred calls run last first
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := sandbox.New(ctx, sandbox.Config{
		DataDir:  dir,
		Default:  sandbox.Limits{MemoryBytes: 256 << 20, Pids: 32, CPUMilli: 1000, CPUTime: 10 * time.Second},
		TmpBytes: 16 << 20,
		InitFile: initFile,
	}, noRecords{}, nil, cg)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	return m.SelfTest(ctx)
}

func writeLayers(w io.Writer, layers []agent.Layer) error {
	if _, err := fmt.Fprintln(w, "\nlayers in force in a test sandbox:"); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, l := range layers {
		state := "active"
		if !l.Active {
			state = "MISSING"
		}
		if _, err := fmt.Fprintf(tw, "  %s\t%s\t%s\n", l.Name, state, l.Detail); err != nil {
			return err
		}
	}
	return tw.Flush()
}

// noRecords keeps the test sandbox out of any store.
type noRecords struct{}

func (noRecords) PutSandbox(context.Context, sandbox.Record) error        { return nil }
func (noRecords) DeleteSandbox(context.Context, string) error             { return nil }
func (noRecords) ListSandboxes(context.Context) ([]sandbox.Record, error) { return nil, nil }
