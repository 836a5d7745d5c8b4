package archive

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestExtractToolArchives extracts archives made by GNU tar, zstd and
// Info-ZIP zip (when installed): their `./` entries, extra fields and data
// descriptors must pass, and the content must match.
func TestExtractToolArchives(t *testing.T) {
	src := filepath.Join(t.TempDir(), "tree")
	must(t, os.MkdirAll(filepath.Join(src, "a", "b"), 0o755))
	must(t, os.WriteFile(filepath.Join(src, "a", "b", "f.txt"), []byte("deep"), 0o640))
	must(t, os.WriteFile(filepath.Join(src, "top.sh"), []byte("#!/bin/sh\n"), 0o755))
	out := t.TempDir()
	cases := []struct {
		name   string
		tool   string
		args   []string
		file   string
		format Format
	}{
		{"gnu-tar", "tar", []string{"-C", src, "-cf", "{out}", "."}, "x.tar", FormatTar},
		{"gnu-tar-gz", "tar", []string{"-C", src, "-czf", "{out}", "a", "top.sh"}, "x.tgz", FormatTarGz},
		{"gnu-tar-zst", "tar", []string{"-C", src, "--zstd", "-cf", "{out}", "."}, "x.tar.zst", FormatTarZst},
		{"info-zip", "zip", []string{"-q", "-r", "{out}", "."}, "x.zip", FormatZip},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := exec.LookPath(tc.tool); err != nil {
				t.Skipf("%s not installed", tc.tool)
			}
			p := filepath.Join(out, tc.file)
			args := make([]string, len(tc.args))
			for i, a := range tc.args {
				if a == "{out}" {
					a = p
				}
				args[i] = a
			}
			cmd := exec.Command(tc.tool, args...)
			cmd.Dir = src
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Skipf("%s failed: %v %s", tc.tool, err, b)
			}
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			d := newDest(t)
			res, err := d.extract(t, data, tc.format, DefaultLimits())
			if err != nil {
				t.Fatal(err)
			}
			got := readTree(t, filepath.Join(d.base, "dst"))
			if got["a/b/f.txt"] != "-rw-r----- deep" || got["top.sh"] != "-rwxr-xr-x #!/bin/sh\n" || res.Files != 2 {
				t.Fatalf("res %+v tree %v", res, got)
			}
		})
	}
}
