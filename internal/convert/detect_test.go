package convert

import (
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox"
)

func TestParseURI(t *testing.T) {
	for _, tc := range []struct {
		name, uri, path string
		remote, ok      bool
	}{
		{"absolute", "/workspace/a.pdf", "/workspace/a.pdf", false, true},
		{"relative", "docs/a.pdf", "/workspace/docs/a.pdf", false, true},
		{"file-uri", "file:///tmp/a.html", "/tmp/a.html", false, true},
		{"file-uri-host", "file://evil/tmp/a.html", "", false, false},
		{"https", "https://example.com/a.pdf", "https://example.com/a.pdf", true, true},
		{"credentials", "https://u:p@example.com/a.pdf", "", false, false},
		{"ftp", "ftp://example.com/a.pdf", "", false, false},
		{"empty", "  ", "", false, false},
		{"newline", "/workspace/a\n.pdf", "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, remote, err := parseURI(tc.uri)
			if (err == nil) != tc.ok {
				t.Fatalf("err %v", err)
			}
			if err != nil {
				if fault.KindOf(err) != fault.Invalid || fault.FieldOf(err) != "body.uri" {
					t.Errorf("kind %s field %q", fault.KindOf(err), fault.FieldOf(err))
				}
				return
			}
			if p != tc.path || remote != tc.remote {
				t.Errorf("got %q %v", p, remote)
			}
		})
	}
}

func TestDetect(t *testing.T) {
	for _, tc := range []struct {
		name, file, doc, want string
	}{
		{"ext-wins", "a.HTML", "%PDF-1.4", "html"},
		{"pdf-magic", "blob", "%PDF-1.7\n...", "pdf"},
		{"rtf-magic", "blob", `{\rtf1 hi}`, "rtf"},
		{"html-sniff", "blob", "\n  <!DOCTYPE html><p>x</p>", "html"},
		{"text", "blob", "just words", "text"},
		{"binary", "blob", "\xff\xfe\x00\x01", ""},
		{"bad-zip", "blob", "PK\x03\x04garbage", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := detect(tc.file, []byte(tc.doc))
			if got != tc.want || (err != nil) != (tc.want == "") {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestMissingConverterNamesThePackage: the script's marker becomes an
// Unsupported error naming the Debian package.
func TestMissingConverterNamesThePackage(t *testing.T) {
	code := 127
	err := failure(sandbox.Result{Status: sandbox.StatusCompleted, ExitCode: &code,
		Stderr: "sandhold-missing-converter pdftotext\n"}, "convert the pdf document")
	if fault.KindOf(err) != fault.Unsupported || !strings.Contains(fault.Public(err), "poppler-utils") {
		t.Fatalf("%v", err)
	}
	err = failure(sandbox.Result{Status: sandbox.StatusTimedOut}, "convert")
	if fault.KindOf(err) != fault.Timeout {
		t.Fatalf("%v", err)
	}
	zero := 0
	if err := failure(sandbox.Result{Status: sandbox.StatusCompleted, ExitCode: &zero}, "convert"); err != nil {
		t.Fatal(err)
	}
}
