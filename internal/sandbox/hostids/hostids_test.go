package hostids

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	// The sandboxes' range: 2^30 and 16,000 ranges of 65,536 ids.
	const lo, hi = 1 << 30, 1<<30 + 16000*65536
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name, file, body, want string
	}{
		{"ordinary accounts", "passwd", "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n", ""},
		{"an account in the range", "passwd", "root:x:0:0::/:/bin/sh\nsvc:x:1073741824:1::/:/bin/false\n", `"svc" holds host ids 1073741824`},
		{"a group at the range's end", "group", "last:x:2122317823:\n", `"last"`},
		{"a group just past it", "group", "past:x:2122317824:\n", ""},
		{"a subordinate range reaching in", "subuid", "dev:1073000000:1000000\n", `"dev" holds host ids 1073000000-1073999999`},
		{"a subordinate range below", "subgid", "dev:100000:65536\n", ""},
		{"comments and junk", "passwd", "# x\n\nbad line\nx:y:notanumber\n", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := write(tc.file, tc.body)
			err := Check([]string{p, filepath.Join(dir, "missing")}, lo, hi)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one naming %s", err, tc.want)
			}
		})
	}
}

func TestSlotsReuseFreedAndSkipMarked(t *testing.T) {
	a := NewSlots(6)
	a.Mark(1) // a recorded sandbox's, at start
	a.Mark(3)
	var got []int
	for range 4 {
		i, err := a.Alloc()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, i)
	}
	if want := []int{0, 2, 4, 5}; !slices.Equal(got, want) {
		t.Fatalf("allocated %v, want %v (marked slots skipped)", got, want)
	}
	if _, err := a.Alloc(); err == nil {
		t.Fatal("allocated past the limit")
	}
	a.Release(2)
	a.Release(1) // the recorded sandbox was deleted
	a.Release(1) // twice: no duplicate on the free list
	for _, want := range []int{1, 2} {
		i, err := a.Alloc()
		if err != nil || i != want {
			t.Fatalf("alloc = %d, %v; want %d", i, err, want)
		}
	}
	if i, err := a.Alloc(); err == nil {
		t.Fatalf("allocated %d with every slot in use", i)
	}
}
