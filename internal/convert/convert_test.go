package convert_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/convert"
	"github.com/sandhold/sandhold/internal/daemon/daemontest"
	"github.com/sandhold/sandhold/internal/testenv"
)

// requireConverter skips unless the host's /usr (which every sandbox
// sees) has prog.
func requireConverter(t *testing.T, prog, pkg string) {
	t.Helper()
	testenv.SkipShort(t, "runs a converter of the host's /usr in a sandbox")
	if _, err := exec.LookPath(prog); err != nil {
		t.Skipf("%s is not installed (Debian package %s; make deps installs it)", prog, pkg)
	}
}

// tinyPDF writes a one-page PDF showing text, with a correct xref table.
func tinyPDF(text string) []byte {
	content := fmt.Sprintf("BT /F1 24 Tf 72 720 Td (%s) Tj ET", text)
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
		fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offs := make([]int, len(objs))
	for i, o := range objs {
		offs[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, o := range offs {
		fmt.Fprintf(&b, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return b.Bytes()
}

// pandocDOCX makes a DOCX from Markdown with the host's pandoc.
func pandocDOCX(t *testing.T, md string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "doc.docx")
	cmd := exec.Command("pandoc", "-f", "markdown", "-t", "docx", "-o", out)
	cmd.Stdin = strings.NewReader(md)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pandoc: %v: %s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type reply struct {
	status  int
	success bool
	message string
	res     convert.Result
}

func call(t *testing.T, cl *daemontest.Client, args map[string]any) reply {
	t.Helper()
	r := cl.Do("POST", "/v1/tools/call", map[string]any{"name": convert.ToolConvert.Name(), "arguments": args})
	out := reply{status: r.Status, success: r.Success, message: r.Message}
	if r.Success {
		if err := json.Unmarshal(r.Data, &out.res); err != nil {
			t.Fatalf("decode %s: %v", r.Raw, err)
		}
	}
	return out
}

func write(t *testing.T, cl *daemontest.Client, sb, file string, data []byte) {
	t.Helper()
	r := cl.Do("POST", "/v1/tools/call", map[string]any{"name": "file.write", "arguments": map[string]any{
		"sandbox": sb, "file": file, "content": base64.StdEncoding.EncodeToString(data), "encoding": "base64"}})
	if !r.Success {
		t.Fatalf("write %s: %d %s", file, r.Status, r.Raw)
	}
}

// TestConvertRealDocuments converts an HTML page, a DOCX and a PDF made
// here, inside a real sandbox, and checks the Markdown holds their text
// and structure.
func TestConvertRealDocuments(t *testing.T) {
	requireConverter(t, "pandoc", "pandoc")
	requireConverter(t, "pdftotext", "poppler-utils")
	d := daemontest.Start(t, nil)
	cl := daemontest.NewClient(t, d)
	sb := cl.NewSandbox(nil)

	write(t, cl, sb, "/workspace/page.html", []byte(`<!doctype html><html><body><h1>Quarterly report</h1><p>Revenue <b>grew</b>.</p><ul><li>alpha</li><li>beta</li></ul></body></html>`))
	write(t, cl, sb, "/workspace/memo.docx", pandocDOCX(t, "# Memo title\n\nSome *important* words.\n"))
	write(t, cl, sb, "/workspace/paper.pdf", tinyPDF("Hello from a PDF"))
	// No extension: the format is sniffed from the bytes.
	write(t, cl, sb, "/workspace/noext", tinyPDF("Sniffed PDF"))

	for _, tc := range []struct {
		name, uri, format string
		want              []string
	}{
		{"html", "/workspace/page.html", "html", []string{"# Quarterly report", "**grew**", "-   alpha"}},
		{"html-relative", "page.html", "html", []string{"# Quarterly report"}},
		{"html-file-uri", "file:///workspace/page.html", "html", []string{"# Quarterly report"}},
		{"docx", "/workspace/memo.docx", "docx", []string{"# Memo title", "*important*"}},
		{"pdf", "/workspace/paper.pdf", "pdf", []string{"Hello from a PDF"}},
		{"sniffed-pdf", "/workspace/noext", "pdf", []string{"Sniffed PDF"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := call(t, cl, map[string]any{"sandbox": sb, "uri": tc.uri})
			if !r.success {
				t.Fatalf("%d %s", r.status, r.message)
			}
			if r.res.Format != tc.format {
				t.Errorf("format %q, want %q", r.res.Format, tc.format)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.res.Markdown, w) {
					t.Errorf("markdown lacks %q:\n%s", w, r.res.Markdown)
				}
			}
		})
	}
}

// TestConvertRefusals: the sensitive-path policy applies before the
// converter sees a byte, a missing file and a garbled document are
// errors the client can read, and no host path leaks into a message.
func TestConvertRefusals(t *testing.T) {
	requireConverter(t, "pandoc", "pandoc")
	d := daemontest.Start(t, nil)
	cl := daemontest.NewClient(t, d)
	sb := cl.NewSandbox(nil)
	res := cl.Exec(sb, "echo SECRET=hunter2 > /workspace/.env && ln -s /workspace/.env /workspace/innocent.html && printf 'PK\\003\\004garbage' > /workspace/bad.docx")
	if res.ExitCode == nil || *res.ExitCode != 0 {
		t.Fatalf("setup: %+v", res)
	}
	for _, tc := range []struct {
		name, uri string
		status    int
		msg       string
	}{
		{"sensitive", "/workspace/.env", 403, "sensitive"},
		{"sensitive-via-symlink", "/workspace/innocent.html", 403, "sensitive"},
		{"missing", "/workspace/nope.html", 404, "no such file"},
		{"bad-scheme", "ftp://example.com/a.pdf", 400, "scheme"},
		{"dotdot", "/workspace/../etc/passwd", 400, ""},
		{"garbled-docx", "/workspace/bad.docx", 400, "could not convert"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := call(t, cl, map[string]any{"sandbox": sb, "uri": tc.uri})
			if r.success || r.status != tc.status {
				t.Fatalf("status %d success %v (%s), want %d", r.status, r.success, r.message, tc.status)
			}
			if !strings.Contains(strings.ToLower(r.message), tc.msg) {
				t.Errorf("message %q lacks %q", r.message, tc.msg)
			}
			if strings.Contains(r.message, "hunter2") || strings.Contains(r.message, "/var/") || strings.Contains(r.message, os.TempDir()) {
				t.Errorf("message leaks: %q", r.message)
			}
		})
	}
}
