package build

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox"
	"github.com/sandhold/sandhold/internal/template"
)

// runStep runs a RUN instruction in a sandbox made from the build so far
// and adds what it changed as the step's layer.
func (st *state) runStep(ctx context.Context, in Instruction) error {
	if len(st.layers) == 0 {
		return lineErr(in, "RUN needs a FROM with a shell (not scratch)")
	}
	env := st.runEnv()
	envKey, _ := json.Marshal(env)
	if in.JSON {
		b, _ := json.Marshal(in.Args)
		st.next("RUN", "exec", string(b), string(envKey))
	} else {
		st.next("RUN", "shell", in.Rest, string(envKey))
	}
	return st.addCached(ctx, func(w io.Writer) error { return st.execute(ctx, in, env, w) })
}

// runEnv is what a RUN gets besides the template's env: the build's ARGs
// (Docker passes them to RUN, they stay out of the template).
func (st *state) runEnv() map[string]string {
	env := map[string]string{}
	for k := range st.args {
		if v, ok := st.vars[k]; ok {
			env[k] = v
		}
	}
	return env
}

// execute makes the step's sandbox, runs the command through the
// dispatcher (exec.run, as the build's caller), streams its output to the
// log and the client, and packs the sandbox's writable layer into w.
func (st *state) execute(ctx context.Context, in Instruction, env map[string]string, w io.Writer) error {
	cfg := st.cfg
	uid, gid, err := st.b.store.ResolveUser(st.layers, cfg.User)
	if err != nil {
		return lineErr(in, fault.Public(err))
	}
	cfg.UID, cfg.GID = uid, gid
	// The step's own template: the build so far, unnamed, held by the
	// build's transaction, usable only through the pin below.
	base, err := st.txn.Put(template.OwnerOf(st.c), "", "", template.Manifest{Layers: st.layers, Config: cfg,
		Source: template.Source{Kind: "build", Parent: st.parent, Build: st.id}})
	if err != nil {
		return err
	}
	spec := sandbox.Spec{Name: st.id, Network: st.a.Network}
	sandbox.PinTemplate(&spec, base)
	caller := sandbox.Caller{KeyID: st.c.KeyID, Admin: st.c.IsAdmin()}
	info, err := st.b.sandboxes.Create(ctx, caller, spec)
	if err != nil {
		return fault.Wrap(fault.KindOf(err), err, fmt.Sprintf("Dockerfile line %d (RUN): the step's sandbox: %s", in.Line, fault.Public(err)))
	}
	defer func() {
		if err := st.b.sandboxes.Delete(context.WithoutCancel(ctx), sandbox.Caller{Admin: true}, info.ID); err != nil {
			st.b.log.Error("delete a build step's sandbox", "id", info.ID, "err", err)
		}
	}()
	timeout := sandbox.MaxTimeout.Seconds()
	cwd := cfg.WorkingDir
	if cwd == "" {
		cwd = "/" // Docker's: a build step starts at the root
	}
	args := sandbox.ExecArgs{ID: info.ID, Env: env, Cwd: cwd, Timeout: &timeout, OutputLimit: sandbox.MaxOutputLimit}
	if in.JSON {
		args.Argv = in.Args
	} else {
		args.Command = in.Rest
	}
	out, err := sandbox.ToolExec.Call(dispatch.WithStreaming(ctx), st.b.d, st.c, args)
	if err != nil {
		return fault.Wrap(fault.KindOf(err), err, fmt.Sprintf("Dockerfile line %d (RUN): %s", in.Line, fault.Public(err)))
	}
	r := out.Result
	if e := out.Running(); e != nil {
		r = st.follow(ctx, e)
	}
	if r.Status != sandbox.StatusCompleted || r.ExitCode == nil || *r.ExitCode != 0 {
		code := "no exit code"
		if r.ExitCode != nil {
			code = fmt.Sprintf("exit code %d", *r.ExitCode)
		}
		why := r.Status
		if r.Reason != "" {
			why += " (" + r.Reason + ")"
		}
		return fault.New(fault.Invalid, fmt.Sprintf("Dockerfile line %d (RUN) failed: %s, %s; the build log has its output", in.Line, why, code))
	}
	sb, err := st.b.sandboxes.Get(caller, info.ID)
	if err != nil {
		return err
	}
	if _, err := sb.PackRoot(ctx, w, st.b.store.LayerLimits()); err != nil {
		return err
	}
	return nil
}

// follow copies a running execution's output to the log and the client
// until it ends, and returns its result.
func (st *state) follow(ctx context.Context, e *sandbox.Execution) sandbox.Result {
	var off [2]int64
	streams := [2]struct {
		name string
		out  interface {
			ReadAt(int64, int) ([]byte, int64, int64)
		}
	}{{"stdout", e.Stdout}, {"stderr", e.Stderr}}
	drain := func() {
		for i, s := range streams {
			for {
				data, next, _ := s.out.ReadAt(off[i], outputChunk)
				if len(data) == 0 {
					break
				}
				off[i] = next
				_, _ = st.logW.Write(data)
				st.a.Progress.Send(template.Event{Step: "output", Stream: s.name, Message: string(data)})
			}
		}
	}
	for {
		outCh, _ := e.Stdout.Wait()
		errCh, _ := e.Stderr.Wait()
		drain()
		select {
		case <-e.Done():
			drain()
			return e.Result()
		case <-ctx.Done():
			e.Kill()
			<-e.Done()
			return e.Result()
		case <-outCh:
		case <-errCh:
		}
	}
}

// chownOf reads COPY/ADD --chown=user[:group] against the build's tree.
func (st *state) chownOf(in Instruction) (uid, gid int, err error) {
	v := in.Flags["chown"]
	if v == "" {
		return 0, 0, nil
	}
	v, err = expand(v, st.vars)
	if err != nil {
		return 0, 0, lineErr(in, err.Error())
	}
	uid, gid, err = st.b.store.ResolveUser(st.layers, v)
	if err != nil {
		return 0, 0, lineErr(in, fault.Public(err))
	}
	if !strings.Contains(v, ":") {
		gid = uid
	}
	return uid, gid, nil
}
