package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckHostIDs(t *testing.T) {
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
			err := checkHostIDs([]string{p, filepath.Join(dir, "missing")})
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
	if err := checkHostIDs(hostIDFiles); err != nil {
		t.Fatalf("this host: %v", err)
	}
}
