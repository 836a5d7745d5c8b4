package main

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// filesResult holds "bench files": bulk transfer through the API against
// cp on the same disk, and extraction of a many-file zip through the API
// (every archive cap on, inside the sandbox) against unzip.
type filesResult struct {
	SizeMiB        int     `json:"size_mib"`
	CpSeconds      float64 `json:"cp_s"`
	CpSyncSeconds  float64 `json:"cp_sync_s"`
	UploadSeconds  float64 `json:"upload_s"`
	DownloadSecs   float64 `json:"download_s"`
	ZipFiles       int     `json:"zip_files"`
	UnzipSeconds   float64 `json:"unzip_s"`
	ExtractSeconds float64 `json:"extract_s"`
	Ratios         struct {
		UploadVsCp    float64 `json:"upload_vs_cp"`
		DownloadVsCp  float64 `json:"download_vs_cp"`
		ExtractVsUnzp float64 `json:"extract_vs_unzip"`
	} `json:"ratios"`
}

// files runs "bench files". Ratios are throughput relative to the peer:
// peer time / sandhold time (goal >= 0.5).
func files(ctx context.Context, o options) error {
	const size = 1 << 30
	const zipFiles = 10_000
	srv, err := startServer(ctx, o.server, 0)
	if err != nil {
		return err
	}
	defer srv.stop()
	var sb struct {
		ID string `json:"id"`
	}
	if err := srv.call("POST", "/v1/sandboxes", map[string]any{"limits": map[string]any{"disk": "4GB"}}, &sb); err != nil {
		return err
	}
	// The host-side files live next to the server's data dir: the same
	// disk that holds the workspace images.
	work, err := os.MkdirTemp(filepath.Dir(srv.dir), "sandhold-bench-files-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(work) }()
	src := filepath.Join(work, "src.bin")
	if err := writeRandom(src, size); err != nil {
		return err
	}
	res := filesResult{SizeMiB: size >> 20, ZipFiles: zipFiles}

	// Every timed step starts with no dirty pages of an earlier one.
	settle := func() { _ = exec.CommandContext(ctx, "sync").Run() }
	settle()
	t0 := time.Now()
	if err := exec.CommandContext(ctx, "cp", src, filepath.Join(work, "cp.bin")).Run(); err != nil { //nolint:gosec // G204: the benchmark's own temp files
		return fmt.Errorf("cp: %w", err)
	}
	res.CpSeconds = time.Since(t0).Seconds()
	settle() // the upload fsyncs; cp + sync is the like-for-like figure
	res.CpSyncSeconds = time.Since(t0).Seconds()
	_ = os.Remove(filepath.Join(work, "cp.bin"))
	settle()

	prefix := srv.base + "/sandboxes/" + sb.ID
	t0 = time.Now()
	if err := srv.uploadFile(prefix+"/v1/file/upload", "/workspace/big.bin", src); err != nil {
		return err
	}
	res.UploadSeconds = time.Since(t0).Seconds()

	settle()
	t0 = time.Now()
	if err := srv.downloadTo(prefix+"/v1/file/download?path=/workspace/big.bin", filepath.Join(work, "down.bin"), size); err != nil {
		return err
	}
	res.DownloadSecs = time.Since(t0).Seconds()
	_ = srv.call("POST", "/v1/sandboxes/"+sb.ID+"/exec", map[string]any{"argv": []string{"rm", "/workspace/big.bin"}}, nil)

	zipPath := filepath.Join(work, "many.zip")
	if err := writeManyZip(zipPath, zipFiles); err != nil {
		return err
	}
	settle()
	t0 = time.Now()
	if out, err := exec.CommandContext(ctx, "unzip", "-q", zipPath, "-d", filepath.Join(work, "unzipped")).CombinedOutput(); err != nil { //nolint:gosec // G204: the benchmark's own temp files
		return fmt.Errorf("unzip: %w: %s", err, out)
	}
	res.UnzipSeconds = time.Since(t0).Seconds()
	if err := srv.uploadFile(prefix+"/v1/file/upload", "/workspace/many.zip", zipPath); err != nil {
		return err
	}
	settle()
	t0 = time.Now()
	var xr struct {
		Files int `json:"files"`
	}
	if err := srv.call("POST", "/sandboxes/"+sb.ID+"/v1/file/extract", map[string]any{"path": "/workspace/many.zip", "dest": "/workspace/many"}, &xr); err != nil {
		return err
	}
	res.ExtractSeconds = time.Since(t0).Seconds()
	if xr.Files != zipFiles {
		return fmt.Errorf("extracted %d files, want %d", xr.Files, zipFiles)
	}

	res.Ratios.UploadVsCp = res.CpSeconds / res.UploadSeconds
	res.Ratios.DownloadVsCp = res.CpSeconds / res.DownloadSecs
	res.Ratios.ExtractVsUnzp = res.UnzipSeconds / res.ExtractSeconds
	if o.json {
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	mibs := func(s float64) float64 { return float64(size>>20) / s }
	fmt.Printf("%-46s %7.2f s  %7.0f MiB/s\n", "cp (1 GiB, same disk)", res.CpSeconds, mibs(res.CpSeconds))
	fmt.Printf("%-46s %7.2f s  %7.0f MiB/s\n", "cp + sync", res.CpSyncSeconds, mibs(res.CpSyncSeconds))
	fmt.Printf("%-46s %7.2f s  %7.0f MiB/s\n", "sandhold upload (multipart, fsync, rename)", res.UploadSeconds, mibs(res.UploadSeconds))
	fmt.Printf("%-46s %7.2f s  %7.0f MiB/s\n", "sandhold download (to a file)", res.DownloadSecs, mibs(res.DownloadSecs))
	fmt.Printf("%-46s %7.2f s\n", fmt.Sprintf("unzip -q (%d files)", zipFiles), res.UnzipSeconds)
	fmt.Printf("%-46s %7.2f s\n", "sandhold extract (two passes, all caps on)", res.ExtractSeconds)
	fmt.Printf("\nupload / cp throughput:     %.2fx   (goal >= 0.5x)\n", res.Ratios.UploadVsCp)
	fmt.Printf("download / cp throughput:   %.2fx   (goal >= 0.5x)\n", res.Ratios.DownloadVsCp)
	fmt.Printf("extract / unzip throughput: %.2fx   (goal >= 0.5x)\n", res.Ratios.ExtractVsUnzp)
	return nil
}

func writeRandom(path string, size int) error {
	f, err := os.Create(path) //nolint:gosec // G304: a file in the benchmark's own temp dir
	if err != nil {
		return err
	}
	r := rand.NewChaCha8([32]byte{7})
	buf := make([]byte, 1<<20)
	for n := 0; n < size; n += len(buf) {
		_, _ = r.Read(buf)
		if _, err := f.Write(buf); err != nil {
			_ = f.Close()
			return err
		}
	}
	return f.Close()
}

// writeManyZip writes n small, compressible files in 100 directories.
func writeManyZip(path string, n int) error {
	f, err := os.Create(path) //nolint:gosec // G304: a file in the benchmark's own temp dir
	if err != nil {
		return err
	}
	zw := zip.NewWriter(f)
	body := bytes.Repeat([]byte("sandhold benchmark line\n"), 100)
	for i := range n {
		w, err := zw.Create(fmt.Sprintf("d%02d/f%05d.txt", i%100, i))
		if err != nil {
			_ = f.Close()
			return err
		}
		if _, err := w.Write(append([]byte(strconv.Itoa(i)+"\n"), body...)); err != nil {
			_ = f.Close()
			return err
		}
	}
	if err := zw.Close(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// uploadFile streams path as AIO's multipart form ("path" first, then
// "file").
func (s *server) uploadFile(url, target, path string) error {
	src, err := os.Open(path) //nolint:gosec // G304: a file in the benchmark's own temp dir
	if err != nil {
		return err
	}
	defer func() { _ = src.Close() }()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		_ = mw.WriteField("path", target)
		fw, _ := mw.CreateFormFile("file", filepath.Base(path))
		if _, err := io.CopyBuffer(fw, src, make([]byte, 1<<20)); err != nil {
			pw.CloseWithError(err)
			return
		}
		pw.CloseWithError(mw.Close())
	}()
	req, _ := http.NewRequest("POST", url, pr)
	req.Header.Set("Authorization", "Bearer "+s.key)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	c := &http.Client{Timeout: 10 * time.Minute}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("upload: %d %s", resp.StatusCode, b)
	}
	return nil
}

func (s *server) downloadTo(url, path string, want int64) error {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+s.key)
	c := &http.Client{Timeout: 10 * time.Minute}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("download: %d", resp.StatusCode)
	}
	f, err := os.Create(path) //nolint:gosec // G304: a file in the benchmark's own temp dir
	if err != nil {
		return err
	}
	n, err := io.CopyBuffer(f, resp.Body, make([]byte, 1<<20))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != want {
		err = fmt.Errorf("downloaded %d bytes, want %d", n, want)
	}
	return err
}
