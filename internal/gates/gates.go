// Package gates holds the repository's checks that stop a bad change in
// `make test`: every gosec suppression carries a reason and is on a
// reviewed list (gosec_test.go), and every direct dependency in go.mod is
// listed with why in DEPENDENCIES.md (deps_test.go). The tool-backed
// gates (secrets scan, licenses, govulncheck, fuzzing) are Makefile
// targets; SECURITY.md lists them all and what each stops.
package gates

import (
	"errors"
	"os"
	"path/filepath"
)

// RepoRoot finds the module root above dir (the directory holding go.mod).
func RepoRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// skipDirs are never scanned: VCS data, installed tools, release output,
// npm trees, local server data.
var skipDirs = map[string]bool{".git": true, ".tools": true, "dist": true, "node_modules": true, ".data": true, "bin": true}

// GoFiles lists the repository's .go files (relative, slash-separated).
func GoFiles(root string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && skipDirs[d.Name()] {
				return filepath.SkipDir
			}
			return nil
		}
		if filepath.Ext(p) == ".go" {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	return files, err
}
