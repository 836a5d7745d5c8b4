package audit

import (
	"context"
	"testing"

	"github.com/sandhold/sandhold/internal/store"
)

func TestQueryByCategory(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	l := New(st, dir)
	ctx := context.Background()
	for _, a := range []string{"auth.failure", "authz.deny", "exec.run", "shell.exec", "code.execute", "file.write", "artifact.create", "network.connect", "executive.x", "key.create"} {
		if _, err := l.Append(ctx, Entry{Actor: "k", Action: a, Verdict: Allow}); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		filter string
		want   []string
	}{
		{"auth", []string{"auth.failure", "authz.deny"}},
		{"exec", []string{"exec.run", "shell.exec", "code.execute"}},
		{"file", []string{"file.write", "artifact.create"}},
		{"network", []string{"network.connect"}},
		{"shell", []string{"shell.exec"}},
		{"exec.run", []string{"exec.run"}},
	}
	for _, tc := range cases {
		t.Run(tc.filter, func(t *testing.T) {
			recs, err := l.Query(ctx, Filter{Action: tc.filter})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range recs {
				got = append(got, r.Action)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("action=%s: %v, want %v", tc.filter, got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("action=%s: %v, want %v", tc.filter, got, tc.want)
				}
			}
		})
	}
}
