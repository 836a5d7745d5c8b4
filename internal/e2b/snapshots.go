package e2b

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox"
)

// E2B's snapshots and fork on sandhold's snapshots (the snapshot.* tools
// of internal/sandbox). An E2B snapshot is a sandhold snapshot:
// its id (sn + 16 hex) is what Sandbox.create takes as the template to
// start a sandbox from it, and what deleteSnapshot deletes. Like every
// sandhold snapshot it keeps the sandbox's files, packages and settings,
// not its running processes (memory capture is off). E2B's fork of a
// running sandbox is a snapshot of it, the forks made from that snapshot
// (snapshot.fork), each given the fork's timeout (e2b.set_timeout), and
// the snapshot deleted again: four kinds of dispatched call, each audited.

func (s *Service) snapshotRoutes(r chi.Router) {
	r.Post(Prefix+"/sandboxes/{sandboxID}/snapshots", s.createSnapshot)
	r.Get(Prefix+"/snapshots", s.listSnapshots)
	r.Delete(Prefix+"/templates/{templateID}", s.deleteSnapshot)
	r.Post(Prefix+"/sandboxes/{sandboxID}/fork", s.fork)
}

// snapshotJSON is E2B's SnapshotInfo.
type snapshotJSON struct {
	SnapshotID string   `json:"snapshotID"`
	Names      []string `json:"names"`
	// State is sandhold's (sealing until its digest exists, then ready),
	// beside E2B's fields; E2B's SDKs ignore it.
	State string `json:"state,omitempty"`
}

func snapshotOf(in sandbox.SnapshotInfo) snapshotJSON {
	out := snapshotJSON{SnapshotID: in.ID, Names: []string{}, State: in.State}
	if in.Name != "" {
		out.Names = append(out.Names, in.Name)
	}
	return out
}

// createSnapshot is Sandbox.createSnapshot: snapshot.create of the sandbox.
func (s *Service) createSnapshot(w http.ResponseWriter, r *http.Request) {
	c, ok := s.caller(w, r)
	if !ok {
		return
	}
	var b struct {
		Name string `json:"name"`
	}
	if err := readBody(r, &b); err != nil {
		s.writeError(w, r, err)
		return
	}
	in, err := sandbox.ToolSnapshotCreate.Call(r.Context(), s.d.Dispatch, c,
		sandbox.SnapshotCreateArgs{ID: chi.URLParam(r, "sandboxID"), Name: b.Name})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, snapshotOf(in))
}

// listSnapshots is Sandbox.listSnapshots: the caller's snapshots
// (snapshot.list), filtered by sandboxID and name, paged like the
// sandbox listing (limit, nextToken an offset). Hibernations are the
// server's own, not the client's snapshots: they are left out.
func (s *Service) listSnapshots(w http.ResponseWriter, r *http.Request) {
	c, ok := s.caller(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	limit, offset, err := page(q.Get("limit"), q.Get("nextToken"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	all, err := sandbox.ToolSnapshotList.Call(r.Context(), s.d.Dispatch, c, sandbox.NoArgs{})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := []snapshotJSON{}
	for _, in := range all {
		if (q.Get("sandboxID") != "" && in.Sandbox != q.Get("sandboxID")) || (q.Get("name") != "" && in.Name != q.Get("name")) {
			continue
		}
		out = append(out, snapshotOf(in))
	}
	writePage(w, out, limit, offset)
}

// deleteSnapshot is Sandbox.deleteSnapshot (E2B deletes a snapshot as a
// template): snapshot.delete. A template's name is no snapshot's id: not
// found (sandhold's templates are managed through its own API).
func (s *Service) deleteSnapshot(w http.ResponseWriter, r *http.Request) {
	c, ok := s.caller(w, r)
	if !ok {
		return
	}
	id := chi.URLParam(r, "templateID")
	if _, err := sandbox.ToolSnapshotDelete.Call(r.Context(), s.d.Dispatch, c, sandbox.SnapshotRef{Snapshot: id}); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// forkResult is one entry of E2B's fork answer.
type forkResult struct {
	Sandbox *sandboxJSON `json:"sandbox,omitempty"`
	Error   *errorJSON   `json:"error,omitempty"`
}

// fork is Sandbox.fork: count sandboxes with the files of a running one
// (all or none, snapshot.fork's rule), each living timeout seconds (E2B's
// default when absent).
func (s *Service) fork(w http.ResponseWriter, r *http.Request) {
	c, ok := s.caller(w, r)
	if !ok {
		return
	}
	var b struct {
		Timeout *int64 `json:"timeout"`
		Count   *int   `json:"count"`
	}
	if err := readBody(r, &b); err != nil {
		s.writeError(w, r, err)
		return
	}
	count := 1
	if b.Count != nil {
		count = *b.Count
	}
	if count < 1 || count > sandbox.MaxForks {
		s.writeError(w, r, fault.InvalidField("count", "count must be 1 to "+strconv.Itoa(sandbox.MaxForks)))
		return
	}
	ttl, err := seconds(b.Timeout, defaultTimeout)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	snap, err := sandbox.ToolSnapshotCreate.Call(ctx, s.d.Dispatch, c,
		sandbox.SnapshotCreateArgs{ID: chi.URLParam(r, "sandboxID"), Name: "e2b-fork"})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// The snapshot served its purpose once the forks have their images
	// (or failed): it goes, through the dispatcher like everything else,
	// even when the client has gone meanwhile.
	cleanup := context.WithoutCancel(ctx)
	defer func() {
		if _, err := sandbox.ToolSnapshotDelete.Call(cleanup, s.d.Dispatch, c, sandbox.SnapshotRef{Snapshot: snap.ID}); err != nil {
			s.d.Log.Warn("e2b fork: delete the fork's snapshot", "snapshot", snap.ID, "err", err)
		}
	}()
	res, err := sandbox.ToolSnapshotFork.Call(ctx, s.d.Dispatch, c,
		sandbox.ForkArgs{Snapshot: snap.ID, Count: count})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]forkResult, 0, len(res.Sandboxes))
	for _, fk := range res.Sandboxes {
		in, err := ToolSetTimeout.Call(ctx, s.d.Dispatch, c, TimeoutArgs{ID: fk.ID, Seconds: int64(ttl / time.Second)})
		if err == nil {
			var sj sandboxJSON
			if sj, err = s.answer(ctx, r, c, in); err == nil {
				out = append(out, forkResult{Sandbox: &sj})
				continue
			}
		}
		// A fork without its timeout would outlive what the client asked
		// for: it goes, and the entry says why.
		if _, derr := sandbox.ToolDelete.Call(cleanup, s.d.Dispatch, c, sandbox.IDArgs{ID: fk.ID}); derr != nil {
			s.d.Log.Warn("e2b fork: delete a fork without its timeout", "sandbox", fk.ID, "err", derr)
		}
		status, msg := s.statusOf(ctx, err)
		out = append(out, forkResult{Error: &errorJSON{Code: status, Message: msg}})
	}
	writeJSON(w, http.StatusCreated, out)
}
