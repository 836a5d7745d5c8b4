package archive

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"testing"
)

// TestPackCheckedJudgesEveryEntry: the caller's EntryCheck sees every
// directory and regular file with its descriptor's stat, and a refusal
// (its own *Error, or any error as a forbidden entry) ends the packing.
func TestPackCheckedJudgesEveryEntry(t *testing.T) {
	src, files := makeSrc(t)
	seen := map[string]bool{}
	_, err := PackChecked(context.Background(), &bytes.Buffer{}, src, "src", FormatZip, DefaultLimits(),
		func(name string, fi fs.FileInfo) error {
			if !fi.IsDir() && !fi.Mode().IsRegular() {
				t.Errorf("check got %s of mode %v", name, fi.Mode())
			}
			seen[name] = true
			return nil
		})
	must(t, err)
	for name := range files {
		if !seen[name] {
			t.Errorf("check never saw %s (saw %v)", name, keys(boolMap(seen)))
		}
	}
	for _, tc := range []struct {
		name   string
		err    error
		reason string
	}{
		{"own error", &Error{Reason: "sensitive_path", Kind: KindForbidden}, "sensitive_path"},
		{"plain error", errors.New("no"), ReasonPolicy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			_, err := PackChecked(context.Background(), &out, src, "src", FormatTar, DefaultLimits(),
				func(string, fs.FileInfo) error { return tc.err })
			ae := wantReason(t, err, tc.reason)
			if ae.Kind != KindForbidden {
				t.Fatalf("kind %s", ae.Kind)
			}
		})
	}
}

// TestExtractCheckedRefusesBeforeWriting: a name the caller's NameCheck
// refuses ends the extraction in pass one — nothing is written, not even
// the entries before it.
func TestExtractCheckedRefusesBeforeWriting(t *testing.T) {
	d := newDest(t)
	data := buildTar(t, tent{name: "ok.txt", body: "fine"}, tent{name: "app/.env", body: "TOKEN=x"})
	_, err := ExtractChecked(context.Background(), archiveFile(t, data), FormatTar, d.root, "dst", DefaultLimits(),
		func(name string) error {
			if name == "app/.env" {
				return errors.New("sensitive")
			}
			return nil
		})
	ae := wantReason(t, err, ReasonPolicy)
	if ae.Entry != "app/.env" || ae.Kind != KindForbidden {
		t.Fatalf("refusal %+v", ae)
	}
	d.assertUntouched(t)
	// Without a refusal the same archive extracts.
	if _, err := ExtractChecked(context.Background(), archiveFile(t, data), FormatTar, d.root, "dst", DefaultLimits(),
		func(string) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

func boolMap(m map[string]bool) map[string]string {
	out := map[string]string{}
	for k := range m {
		out[k] = ""
	}
	return out
}
