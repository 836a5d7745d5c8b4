package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"testing"
)

// TestReleaseRemovesAnEmptyBase: Release leaves a base that still holds a
// group and removes it, in every hierarchy, once it is empty — so a
// server run or a test leaves no empty cgroup behind.
func TestReleaseRemovesAnEmptyBase(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("cgroups need root")
	}
	m, err := New(fmt.Sprintf("sandhold-test-release-%d", os.Getpid()))
	if err != nil {
		t.Skip(err)
	}
	var bases []string
	switch mm := m.(type) {
	case *v1Manager:
		for _, h := range mm.hiers {
			bases = append(bases, h.baseDir)
		}
	case *v2Manager:
		bases = append(bases, mm.baseDir)
	}
	if len(bases) == 0 {
		t.Fatalf("no base directories for %T", m)
	}
	g, err := m.Create("held", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	m.Release()
	for _, b := range bases {
		if _, err := os.Stat(b); err != nil {
			t.Fatalf("a base that holds a group was removed: %v", err)
		}
	}
	if err := g.Destroy(); err != nil {
		t.Fatal(err)
	}
	m.Release()
	for _, b := range bases {
		if _, err := os.Stat(b); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("empty base %s still there after Release (%v)", b, err)
		}
	}
}
