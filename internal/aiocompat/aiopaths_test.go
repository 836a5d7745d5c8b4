package aiocompat_test

import (
	"encoding/json"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/aiocompat/aiotest"
	"github.com/sandhold/sandhold/internal/api/aio"
)

// TestAIOPathsMatchTheDocument: the paths the tool-level status rule
// applies to are exactly AIO's /v1 operations.
func TestAIOPathsMatchTheDocument(t *testing.T) {
	p, err := aiotest.Find()
	if err != nil {
		t.Skipf("AIO reference OpenAPI document not available (%v)", err)
	}
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var want []string
	for path := range doc.Paths {
		if strings.HasPrefix(path, "/v1/") {
			want = append(want, path)
		}
	}
	sort.Strings(want)
	got := aio.AIOPaths()
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Fatalf("aio.AIOPaths() has %d paths, AIO's document %d /v1 paths: an AIO operation lacks its row in internal/api's table, or one of sandhold's own rows lacks native()", len(got), len(want))
	}
}
