// Package templateroot is what a template sandbox takes from its template:
// the plan of its start read from the store (Plan: the layers, the user,
// the launch's overlay root), the environment, shell and working directory
// its commands start with (Env, Shell, Cwd), and the layout of its root in
// its workspace image: the trees the image holds (Layout), the descriptors
// an init builds its overlay root from (Files), the writable layer a commit
// reads (OpenUpper), and the one-layer template the self-test starts
// (SelfTestLayer). It runs in the server; internal/sandbox decides when a
// sandbox runs on a template.
package templateroot

import (
	"archive/tar"
	"bytes"
	"os"
)

// Names of a template sandbox's trees in its workspace image: the
// workspace, bound at /workspace, and the root's overlay upper and work
// directories.
const (
	Workspace = "workspace"
	Root      = "rootfs"
)

// SelfTestLayer is the self-test template's one layer: the directories a
// root has, a marker file, and busybox (the host's static one at bb) when
// given.
func SelfTestLayer(bb string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"bin", "etc", "tmp", "proc", "dev", "root", "workspace"} {
		if err := tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
			return nil, err
		}
	}
	files := map[string][]byte{"selftest": []byte("template\n")}
	if bb != "" {
		b, err := os.ReadFile(bb) //nolint:gosec // G304: the host's busybox, a fixed path
		if err != nil {
			return nil, err
		}
		files["bin/busybox"] = b
	}
	for name, b := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(b))}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(b); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
