package main

// "bench templates": template sandboxes against host sandboxes, in one run.
//
//   - cold create + first exec: a sandbox made from a ~300 MB template (a
//     Debian root with Python, and 100 MB of data in a layer of its own)
//     and its first python3 against the same from host (the host's
//     python3), interleaved, without a warm pool;
//   - sharing: two sandboxes of the template running the same Python; the
//     store's layer bytes before and after the second, what each
//     sandbox's workspace image holds on disk, each sandbox's cgroup
//     memory, and how much the host's page cache grew for each;
//   - rebuild: a Dockerfile whose RUN step takes seconds, built, then
//     built again unchanged (the step's layer comes from the cache).
//
// The template is uploaded through POST /v1/templates/import as a docker
// save tarball made here from a Debian root built by mmdebstrap (cached in
// $XDG_CACHE_HOME/sandhold-test, as the tests do).

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// templateBench is the result of bench templates.
type templateBench struct {
	TemplateMiB    float64 `json:"template_mib"`
	ColdTemplate   figure  `json:"cold_create_first_exec_template"`
	ColdHost       figure  `json:"cold_create_first_exec_host"`
	ColdRatio      float64 `json:"cold_ratio"`
	StoreBefore    int64   `json:"store_bytes_one_sandbox"`
	StoreAfter     int64   `json:"store_bytes_two_sandboxes"`
	ImageBytes     []int64 `json:"workspace_image_bytes"`
	MemoryBytes    []int64 `json:"sandbox_memory_bytes"`
	PageCacheGrown []int64 `json:"page_cache_growth_bytes"`
	BuildFirst     float64 `json:"build_first_s"`
	BuildAgain     float64 `json:"build_again_s"`
	BuildRatio     float64 `json:"rebuild_ratio"`
}

// pythonProbe is the first exec: Python starts and imports a few modules
// (its code is read from the template's layers).
const pythonProbe = "import argparse, datetime, pathlib, subprocess, random; print('ok')"

func templatesBench(ctx context.Context, o options) error {
	root, err := debianRoot(ctx)
	if err != nil {
		return err
	}
	save, mib, err := benchImage(root)
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(save) }()
	srv, err := startServer(ctx, o.server, 0)
	if err != nil {
		return err
	}
	defer srv.stop()
	fmt.Fprintf(os.Stderr, "importing a %.0f MiB template...\n", mib)
	f, err := os.Open(save) //nolint:gosec // G304: the bench's own file
	if err != nil {
		return err
	}
	err = srv.upload("/v1/templates/import?name=bench&tag=1", f)
	_ = f.Close()
	if err != nil {
		return err
	}
	res := templateBench{TemplateMiB: mib}
	n := max(o.n/30, 5)
	var tmpl, host latency
	for i := range n {
		for _, side := range []struct {
			spec map[string]any
			argv []string
			out  *latency
		}{
			{map[string]any{"template": "bench:1"}, []string{"python3", "-c", pythonProbe}, &tmpl},
			{map[string]any{}, []string{"/usr/bin/python3", "-c", pythonProbe}, &host},
		} {
			t0 := time.Now()
			id, err := srv.createSpec(side.spec)
			if err != nil {
				return err
			}
			if err := srv.execArgv(id, side.argv); err != nil {
				return fmt.Errorf("round %d: %w", i, err)
			}
			*side.out = append(*side.out, time.Since(t0))
			if err := srv.delete(id); err != nil {
				return err
			}
		}
	}
	res.ColdTemplate, res.ColdHost = fig(tmpl), fig(host)
	res.ColdRatio = res.ColdTemplate.P50ms / res.ColdHost.P50ms
	if err := sharing(srv, &res); err != nil {
		return err
	}
	if err := rebuild(srv, &res); err != nil {
		return err
	}
	if o.json {
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	fmt.Printf("template: %.0f MiB (Debian bookworm root with Python, 100 MiB data layer)\n\n", res.TemplateMiB)
	fmt.Printf("cold create + first python3      p50 %7.1f ms  p99 %7.1f ms  (n=%d)\n", res.ColdTemplate.P50ms, res.ColdTemplate.P99ms, res.ColdTemplate.N)
	fmt.Printf("  same from host                 p50 %7.1f ms  p99 %7.1f ms\n", res.ColdHost.P50ms, res.ColdHost.P99ms)
	fmt.Printf("  ratio template/host            %.2fx (goal <= 1.5x)\n\n", res.ColdRatio)
	fmt.Printf("store bytes, one sandbox         %d\n", res.StoreBefore)
	fmt.Printf("store bytes, two sandboxes       %d\n", res.StoreAfter)
	fmt.Printf("workspace image on disk          %v bytes (first, second)\n", res.ImageBytes)
	fmt.Printf("sandbox cgroup memory            %v bytes (first, second)\n", res.MemoryBytes)
	fmt.Printf("host page cache growth           %v bytes (first, second sandbox's python3)\n\n", res.PageCacheGrown)
	fmt.Printf("build with a slow RUN step       %.2f s\n", res.BuildFirst)
	fmt.Printf("rebuild unchanged                %.2f s\n", res.BuildAgain)
	fmt.Printf("  ratio rebuild/build            %.3f (goal <= 0.05)\n", res.BuildRatio)
	return nil
}

// sharing makes two sandboxes of the template and reads what the second
// adds.
func sharing(srv *server, res *templateBench) error {
	work := []string{"python3", "-c", "import argparse, datetime, pathlib, subprocess, random, inspect, csv; open('/opt/data.bin','rb').read(64<<20); print('ok')"}
	// The import left the layers in the page cache: the first sandbox
	// must read them from disk, as after a restart.
	evictDir(filepath.Join(srv.dir, "templates", "layers"))
	var ids []string
	for i := range 2 {
		id, err := srv.createSpec(map[string]any{"template": "bench:1"})
		if err != nil {
			return err
		}
		ids = append(ids, id)
		if i == 0 {
			res.StoreBefore = dirBytes(filepath.Join(srv.dir, "templates", "layers"))
		}
		cached0 := pageCache()
		if err := srv.execArgv(id, work); err != nil {
			return err
		}
		res.PageCacheGrown = append(res.PageCacheGrown, pageCache()-cached0)
		mem, err := srv.sandboxMemory(id)
		if err != nil {
			return err
		}
		res.MemoryBytes = append(res.MemoryBytes, mem)
		res.ImageBytes = append(res.ImageBytes, fileBlocks(filepath.Join(srv.dir, "workspaces", id, "disk.img")))
	}
	res.StoreAfter = dirBytes(filepath.Join(srv.dir, "templates", "layers"))
	for _, id := range ids {
		if err := srv.delete(id); err != nil {
			return err
		}
	}
	return nil
}

// rebuild builds a Dockerfile twice.
func rebuild(srv *server, res *templateBench) error {
	df := "FROM bench:1\n" +
		`RUN python3 -c "import hashlib; h=hashlib.sha256(); [h.update(bytes(1<<20)) for _ in range(3000)]; open('/opt/digest','w').write(h.hexdigest())"` + "\n" +
		"ENV BUILT=1\n"
	body := map[string]any{"name": "rebuilt", "tag": "1", "dockerfile": df}
	for i, out := range []*float64{&res.BuildFirst, &res.BuildAgain} {
		t0 := time.Now()
		if err := srv.call("POST", "/v1/templates", body, nil); err != nil {
			return fmt.Errorf("build %d: %w", i+1, err)
		}
		*out = time.Since(t0).Seconds()
	}
	res.BuildRatio = res.BuildAgain / res.BuildFirst
	return nil
}

func (s *server) createSpec(spec map[string]any) (string, error) {
	var sb struct {
		ID string `json:"id"`
	}
	err := s.call("POST", "/v1/sandboxes", spec, &sb)
	return sb.ID, err
}

func (s *server) execArgv(id string, argv []string) error {
	var r struct {
		ExitCode *int   `json:"exit_code"`
		Status   string `json:"status"`
		Stderr   string `json:"stderr"`
	}
	if err := s.call("POST", "/v1/sandboxes/"+id+"/exec", map[string]any{"argv": argv, "timeout": 300}, &r); err != nil {
		return err
	}
	if r.Status != "completed" || r.ExitCode == nil || *r.ExitCode != 0 {
		return fmt.Errorf("exec %v: status %s: %s", argv, r.Status, r.Stderr)
	}
	return nil
}

// upload posts a tar body.
func (s *server) upload(path string, body io.Reader) error {
	req, err := http.NewRequest("POST", s.base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+s.key)
	req.Header.Set("Content-Type", "application/x-tar")
	c := &http.Client{Timeout: 30 * time.Minute}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, b)
	}
	return nil
}

// debianRoot is the tests' cached Debian root with Python (built with
// mmdebstrap when missing).
func debianRoot(ctx context.Context) (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	dir = filepath.Join(dir, "sandhold-test")
	out := filepath.Join(dir, "debian-bookworm-python3-v1.tar")
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	mm, err := exec.LookPath("mmdebstrap")
	if err != nil {
		return "", errors.New("bench templates needs mmdebstrap (make deps) to build its Debian root")
	}
	fmt.Fprintln(os.Stderr, "building a Debian root with mmdebstrap (once)...")
	cmd := exec.CommandContext(ctx, mm, "--variant=minbase", "--include=python3-minimal", "--mode=root", "--format=tar", //nolint:gosec // G204: fixed arguments
		"--skip=output/dev", "bookworm", out+".tmp")
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("mmdebstrap: %w", err)
	}
	return out, os.Rename(out+".tmp", out)
}

// benchImage writes a docker save tarball of the Debian root and a layer
// of 100 MiB of random data, and returns its path and unpacked MiB.
func benchImage(root string) (string, float64, error) {
	fi, err := os.Stat(root)
	if err != nil {
		return "", 0, err
	}
	data := make([]byte, 100<<20)
	if _, err := rand.Read(data); err != nil {
		return "", 0, err
	}
	var layerBuf bytes.Buffer
	if err := writeTar(&layerBuf, "opt/data.bin", data); err != nil {
		return "", 0, err
	}
	dataLayer := layerBuf.Bytes()
	base, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return os.Open(root) }) //nolint:gosec // G304: the cached root
	if err != nil {
		return "", 0, err
	}
	top, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(dataLayer)), nil })
	if err != nil {
		return "", 0, err
	}
	img, err := mutate.AppendLayers(empty.Image, base, top)
	if err != nil {
		return "", 0, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return "", 0, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config = v1.Config{Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return "", 0, err
	}
	f, err := os.CreateTemp("", "sandhold-bench-image-*.tar")
	if err != nil {
		return "", 0, err
	}
	tag, _ := name.NewTag("bench/python:1")
	if err := tarball.Write(tag, img, f); err != nil {
		_ = f.Close()
		return "", 0, err
	}
	if err := f.Close(); err != nil {
		return "", 0, err
	}
	return f.Name(), float64(fi.Size()+int64(len(dataLayer))) / (1 << 20), nil
}

// dirBytes is the bytes a tree's files take on disk.
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}

// evictDir drops a tree's files from the page cache (POSIX_FADV_DONTNEED),
// leaving the rest of the host's cache alone.
func evictDir(dir string) {
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p) //nolint:gosec // G304: the bench server's own store
		if err != nil {
			return nil
		}
		// Dirty pages are not dropped: written back first.
		_ = f.Sync()
		dropCached(f)
		_ = f.Close()
		return nil
	})
}

// fileBlocks is the bytes a file takes on disk.
func fileBlocks(p string) int64 {
	var st syscall.Stat_t
	if syscall.Stat(p, &st) != nil {
		return -1
	}
	return st.Blocks * 512
}

// pageCache is the host's page cache (Cached in /proc/meminfo), in bytes.
func pageCache() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "Cached:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// writeTar writes one regular file as a tar stream.
func writeTar(w io.Writer, name string, data []byte) error {
	tw := tar.NewWriter(w)
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data))}); err != nil {
		return err
	}
	if _, err := tw.Write(data); err != nil {
		return err
	}
	return tw.Close()
}
