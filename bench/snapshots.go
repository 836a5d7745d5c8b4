package main

// "bench snapshots": snapshots, forks and hibernation in one run, each
// against its baseline measured in the same run on the same file system.
//
//   - snapshot of a sandbox holding 100 MB (fresh random bytes each round,
//     so no chunk is shared with an earlier snapshot) against
//     `cp --reflink=auto` of its workspace image on the same file system
//     (and against that cp followed by an fsync of the copy, the durable
//     equivalent: a snapshot is durable when it answers); the image is
//     evicted from the page cache before each, the order alternates;
//   - fork ×10 of that snapshot until all ten answered their first exec,
//     against one cold create + first exec (no warm pool);
//   - hibernate: the sandbox's cgroup memory before (a process holding
//     ~200 MB) and after, and what is left of it on the node;
//   - resume + first exec of a hibernated sandbox against a cold create.
//
// With -xfs (make bench-snapshots runs both) the same rounds run on an XFS
// file system with reflinks made on a loop device, where cp and the
// snapshot clone blocks instead of copying them.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// snapshotBench is the result of bench snapshots on one file system.
type snapshotBench struct {
	FS             string  `json:"fs"`
	Reflink        bool    `json:"reflink"`
	Snapshot       figure  `json:"snapshot_100mb"`
	Cp             figure  `json:"cp_reflink_auto"`
	CpSync         figure  `json:"cp_reflink_auto_fsync"`
	SnapshotRatio  float64 `json:"snapshot_over_cp"`
	SnapshotRatioS float64 `json:"snapshot_over_cp_fsync"`
	SnapshotBytes  int64   `json:"snapshot_bytes"`
	// Sealed: from the call until the snapshot reads ready with its
	// digest (the answer itself, where the digest is computed before it).
	Sealed figure `json:"snapshot_until_sealed"`
	// Get: a dispatched GET of the snapshot, the API's own cost (HTTP,
	// authentication, dispatch) beside the snapshot's.
	Get figure `json:"snapshot_get"`
	// AnsweredSealing: how many answers read sealing.
	AnsweredSealing int     `json:"answered_sealing"`
	Pause           figure  `json:"longest_pause_during_snapshot"`
	Cold            figure  `json:"cold_create_first_exec"`
	Fork10          figure  `json:"fork10_all_first_exec"`
	Fork10First     float64 `json:"fork10_first_round_ms"`
	ForkRatio       float64 `json:"fork10_over_cold"`
	MemBefore       int64   `json:"memory_before_bytes"`
	MemAfter        int64   `json:"memory_after_bytes"`
	MemFreed        float64 `json:"memory_freed_share"`
	ImageAfter      int64   `json:"image_bytes_on_node_after"`
	Resume          figure  `json:"resume_first_exec"`
	ResumeRatio     float64 `json:"resume_over_cold"`
}

const snapDisk = "1GB"

func snapshotsBench(ctx context.Context, o options) error {
	var all []snapshotBench
	r, err := snapshotRounds(ctx, o, "")
	if err != nil {
		return err
	}
	all = append(all, r)
	if o.xfs {
		mnt, done, err := xfsMount(ctx)
		if err != nil {
			return fmt.Errorf("xfs: %w", err)
		}
		r, err := snapshotRounds(ctx, o, mnt)
		done()
		if err != nil {
			return err
		}
		all = append(all, r)
	}
	if o.json {
		return json.NewEncoder(os.Stdout).Encode(all)
	}
	for _, r := range all {
		fmt.Printf("file system: %s (reflinks: %v)\n", r.FS, r.Reflink)
		fmt.Printf("snapshot of 100 MB               p50 %8.1f ms  p99 %8.1f ms  (n=%d; %d bytes stored)\n", r.Snapshot.P50ms, r.Snapshot.P99ms, r.Snapshot.N, r.SnapshotBytes)
		fmt.Printf("  until sealed (digest computed) p50 %8.1f ms  p99 %8.1f ms  (%d of %d answered sealing)\n", r.Sealed.P50ms, r.Sealed.P99ms, r.AnsweredSealing, r.Snapshot.N)
		fmt.Printf("  a GET of the snapshot (the API's own cost) p50 %.1f ms\n", r.Get.P50ms)
		fmt.Printf("  cp --reflink=auto of the image p50 %8.1f ms\n", r.Cp.P50ms)
		fmt.Printf("  same cp + fsync of the copy    p50 %8.1f ms\n", r.CpSync.P50ms)
		goal := "<= 1.2x: no reflinks"
		if r.Reflink {
			goal = "<= 2x: reflinks"
		}
		fmt.Printf("  ratio snapshot/cp              %.2fx (goal %s); snapshot/(cp+fsync) %.2fx\n", r.SnapshotRatio, goal, r.SnapshotRatioS)
		fmt.Printf("  longest pause of a process in the sandbox during its snapshot p50 %.1f ms p99 %.1f ms\n", r.Pause.P50ms, r.Pause.P99ms)
		fmt.Printf("cold create + first exec         p50 %8.1f ms  p99 %8.1f ms  (n=%d)\n", r.Cold.P50ms, r.Cold.P99ms, r.Cold.N)
		fmt.Printf("fork x10, all first exec         p50 %8.1f ms  p99 %8.1f ms  (n=%d)\n", r.Fork10.P50ms, r.Fork10.P99ms, r.Fork10.N)
		// On a file system without shared blocks the first fork of a
		// snapshot also restores its lower layer, once.
		fmt.Printf("  the first fork x10 of the snapshot %8.1f ms\n", r.Fork10First)
		fmt.Printf("  ratio fork10/cold              %.2fx (goal <= 10x)\n", r.ForkRatio)
		fmt.Printf("hibernate: memory                %d -> %d bytes, %.1f%% freed (goal >= 90%%); image left on the node %d bytes\n",
			r.MemBefore, r.MemAfter, 100*r.MemFreed, r.ImageAfter)
		fmt.Printf("resume + first exec              p50 %8.1f ms  (n=%d)\n", r.Resume.P50ms, r.Resume.N)
		fmt.Printf("  ratio resume/cold              %.2fx (goal <= 3x)\n\n", r.ResumeRatio)
	}
	return nil
}

// snapshotRounds runs every figure with the server's data dir under dir
// ("": the default temporary directory).
func snapshotRounds(ctx context.Context, o options, dir string) (snapshotBench, error) {
	var res snapshotBench
	var env []string
	if dir != "" {
		old := os.Getenv("TMPDIR")
		_ = os.Setenv("TMPDIR", dir)
		defer func() { _ = os.Setenv("TMPDIR", old) }()
	}
	srv, err := startServer(ctx, o.server, 0, env...)
	if err != nil {
		return res, err
	}
	defer srv.stop()
	res.FS = fsType(srv.dir)
	res.Reflink = reflinks(srv.dir)
	rounds := max(o.n/60, 5)

	id, err := srv.createSpec(map[string]any{"limits": map[string]any{"disk": snapDisk}})
	if err != nil {
		return res, err
	}
	img := filepath.Join(srv.dir, "workspaces", id, "disk.img")
	copyTo := filepath.Join(srv.dir, "cp-baseline.img")
	var snap, sealed, get, cp, cpSync, pause latency
	var keep string
	// A process in the sandbox notes the time every 2 ms: the longest gap
	// while a snapshot runs is how long the sandbox stood still (frozen).
	if err := srv.call("POST", "/v1/sandboxes/"+id+"/exec", map[string]any{"keep": true, "background": true,
		"command": "while :; do date +%s%N >> .ticks; sleep 0.002; done"}, nil); err != nil {
		return res, err
	}
	for i := range rounds {
		// New bytes each round: nothing is shared with an earlier snapshot.
		if err := srv.execArgv(id, []string{"sh", "-c", "head -c 100000000 /dev/urandom > data && sync"}); err != nil {
			return res, err
		}
		takeSnap := func() error {
			if err := srv.execArgv(id, []string{"sh", "-c", ": > .ticks"}); err != nil {
				return err
			}
			evictDir(filepath.Dir(img))
			t0 := time.Now()
			var sn struct {
				ID    string `json:"id"`
				Bytes int64  `json:"bytes"`
				State string `json:"state"`
			}
			if err := srv.call("POST", "/v1/sandboxes/"+id+"/snapshots", map[string]any{}, &sn); err != nil {
				return err
			}
			t1 := time.Now()
			snap = append(snap, t1.Sub(t0))
			gap, err := srv.longestGap(id, t0, t1)
			if err != nil {
				return err
			}
			pause = append(pause, gap)
			// Its seal ends before anything else is measured (it reads
			// and hashes the image after the answer).
			if sn.State == "sealing" {
				res.AnsweredSealing++
			}
			var gerr error
			took, err := waitFor(t0, func() bool {
				if sn.State == "sealing" && gerr == nil {
					gerr = srv.call("GET", "/v1/snapshots/"+sn.ID, nil, &sn)
				}
				return gerr != nil || sn.State != "sealing"
			})
			if err == nil {
				err = gerr
			}
			if err != nil {
				return fmt.Errorf("snapshot %s sealed: %w", sn.ID, err)
			}
			sealed = append(sealed, took)
			res.SnapshotBytes = sn.Bytes
			t2 := time.Now()
			if err := srv.call("GET", "/v1/snapshots/"+sn.ID, nil, &sn); err != nil {
				return err
			}
			get = append(get, time.Since(t2))
			if keep != "" {
				if err := srv.call("DELETE", "/v1/snapshots/"+keep, nil, nil); err != nil {
					return err
				}
			}
			keep = sn.ID
			return nil
		}
		takeCp := func() error {
			for _, sync := range []bool{false, true} {
				_ = os.Remove(copyTo)
				evictDir(filepath.Dir(img))
				t0 := time.Now()
				args := []string{"--reflink=auto", img, copyTo}
				if err := exec.CommandContext(ctx, "cp", args...).Run(); err != nil { //nolint:gosec // G204: fixed arguments
					return fmt.Errorf("cp: %w", err)
				}
				if sync {
					f, err := os.OpenFile(copyTo, os.O_RDWR, 0) //nolint:gosec // G304: the bench's own file
					if err != nil {
						return err
					}
					err = f.Sync()
					_ = f.Close()
					if err != nil {
						return err
					}
					cpSync = append(cpSync, time.Since(t0))
				} else {
					cp = append(cp, time.Since(t0))
				}
			}
			return os.Remove(copyTo)
		}
		steps := []func() error{takeSnap, takeCp}
		if i%2 == 1 {
			steps[0], steps[1] = steps[1], steps[0]
		}
		for _, f := range steps {
			if err := f(); err != nil {
				return res, err
			}
		}
	}
	res.Snapshot, res.Sealed, res.Cp, res.CpSync, res.Pause = fig(snap), fig(sealed), fig(cp), fig(cpSync), fig(pause)
	res.Get = fig(get)
	res.SnapshotRatio = res.Snapshot.P50ms / res.Cp.P50ms
	res.SnapshotRatioS = res.Snapshot.P50ms / res.CpSync.P50ms

	// Cold create + first exec, and fork x10 of the snapshot, interleaved.
	var cold, fork10 latency
	for range rounds {
		t0 := time.Now()
		cid, err := srv.createSpec(map[string]any{"limits": map[string]any{"disk": snapDisk}})
		if err != nil {
			return res, err
		}
		if err := srv.exec(cid); err != nil {
			return res, err
		}
		cold = append(cold, time.Since(t0))
		if err := srv.delete(cid); err != nil {
			return res, err
		}
		t0 = time.Now()
		var fk struct {
			Sandboxes []struct {
				ID string `json:"id"`
			} `json:"sandboxes"`
		}
		if err := srv.call("POST", "/v1/snapshots/"+keep+"/fork", map[string]any{"count": 10}, &fk); err != nil {
			return res, err
		}
		errs := make(chan error, len(fk.Sandboxes))
		for _, f := range fk.Sandboxes {
			go func() { errs <- srv.exec(f.ID) }()
		}
		for range fk.Sandboxes {
			if err := <-errs; err != nil {
				return res, err
			}
		}
		fork10 = append(fork10, time.Since(t0))
		for _, f := range fk.Sandboxes {
			if err := srv.delete(f.ID); err != nil {
				return res, err
			}
		}
	}
	res.Cold, res.Fork10 = fig(cold), fig(fork10)
	res.Fork10First = ms(fork10[0])
	res.ForkRatio = res.Fork10.P50ms / res.Cold.P50ms

	// Hibernate: memory held, then freed.
	if err := srv.call("POST", "/v1/sandboxes/"+id+"/exec", map[string]any{"keep": true, "background": true,
		"command": "python3 -c 'import time; x = bytearray(200 << 20); [x.__setitem__(i, 1) for i in range(0, len(x), 4096)]; time.sleep(1e6)'"}, nil); err != nil {
		return res, err
	}
	for range 200 {
		if m, err := srv.sandboxMemory(id); err == nil && m > 200<<20 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if res.MemBefore, err = srv.sandboxMemory(id); err != nil {
		return res, err
	}
	if err := srv.call("POST", "/v1/sandboxes/"+id+"/hibernate", nil, nil); err != nil {
		return res, err
	}
	res.MemAfter = srv.memoryOrZero(id)
	res.MemFreed = 1 - float64(res.MemAfter)/float64(res.MemBefore)
	res.ImageAfter = max(fileBlocks(img), 0)

	// Resume + first exec (the exec resumes it), hibernating again each round.
	var resume latency
	for i := range rounds {
		if i > 0 {
			if err := srv.call("POST", "/v1/sandboxes/"+id+"/hibernate", nil, nil); err != nil {
				return res, err
			}
		}
		t0 := time.Now()
		if err := srv.exec(id); err != nil {
			return res, err
		}
		resume = append(resume, time.Since(t0))
	}
	res.Resume = fig(resume)
	res.ResumeRatio = res.Resume.P50ms / res.Cold.P50ms
	return res, nil
}

// longestGap is the longest gap between two of the sandbox's time notes
// (.ticks) that ends within [from, to], the gap's start being the last note
// before it.
func (s *server) longestGap(id string, from, to time.Time) (time.Duration, error) {
	var r struct {
		Stdout string `json:"stdout"`
	}
	awk := fmt.Sprintf("awk -v a=%d -v b=%d 'p && $1 > a && p < b { g = $1 - p; if (g > m) m = g } { p = $1 } END { printf \"%%d\\n\", m }' .ticks", from.UnixNano(), to.UnixNano())
	if err := s.call("POST", "/v1/sandboxes/"+id+"/exec", map[string]any{"command": awk}, &r); err != nil {
		return 0, err
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(r.Stdout), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("time notes: %q: %w", r.Stdout, err)
	}
	return time.Duration(ns), nil
}

// memoryOrZero is the sandbox's cgroup memory, 0 when it has no cgroup.
func (s *server) memoryOrZero(id string) int64 {
	m, err := s.sandboxMemory(id)
	if err != nil {
		return 0
	}
	return m
}

// fsType names the file system dir is on.
func fsType(dir string) string {
	out, err := exec.Command("stat", "-f", "-c", "%T", dir).Output() //nolint:gosec // G204: fixed arguments
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// reflinks tells whether dir's file system clones files.
func reflinks(dir string) bool {
	a := filepath.Join(dir, ".reflink-probe")
	if err := os.WriteFile(a, []byte("x"), 0o600); err != nil {
		return false
	}
	defer func() { _ = os.Remove(a); _ = os.Remove(a + "2") }()
	return exec.Command("cp", "--reflink=always", a, a+"2").Run() == nil //nolint:gosec // G204: fixed arguments
}

// xfsMount makes an 8 GiB sparse XFS file system with reflinks on a loop
// device and mounts it; done unmounts and removes it.
func xfsMount(ctx context.Context) (string, func(), error) {
	if _, err := exec.LookPath("mkfs.xfs"); err != nil {
		return "", nil, fmt.Errorf("mkfs.xfs not installed (apt-get install xfsprogs)")
	}
	base, err := os.MkdirTemp("", "sandhold-bench-xfs-")
	if err != nil {
		return "", nil, err
	}
	img, mnt := filepath.Join(base, "xfs.img"), filepath.Join(base, "mnt")
	done := func() {
		// The workspaces' loop devices on it detach a moment after the
		// server stopped (autoclear); until then the unmount is refused.
		unmounted := false
		for range 200 {
			if exec.Command("umount", mnt).Run() == nil { //nolint:gosec // G204: the bench's own mount
				unmounted = true
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if !unmounted {
			_ = exec.Command("umount", "-l", mnt).Run() //nolint:gosec // G204: the bench's own mount
		}
		_ = os.RemoveAll(base)
	}
	f, err := os.Create(img) //nolint:gosec // G304: the bench's own file
	if err == nil {
		err = f.Truncate(8 << 30)
		_ = f.Close()
	}
	if err == nil {
		err = os.Mkdir(mnt, 0o700)
	}
	if err == nil {
		err = exec.CommandContext(ctx, "mkfs.xfs", "-q", "-m", "reflink=1", img).Run() //nolint:gosec // G204: the bench's own image
	}
	if err == nil {
		err = exec.CommandContext(ctx, "mount", "-o", "loop", img, mnt).Run() //nolint:gosec // G204: the bench's own image
	}
	if err != nil {
		done()
		return "", nil, err
	}
	return mnt, done, nil
}
