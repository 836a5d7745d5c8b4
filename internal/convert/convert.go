// Package convert turns documents (HTML, PDF, DOCX, ODT, EPUB, RTF, …)
// into Markdown — AIO's POST /v1/util/convert_to_markdown.
//
// The document is untrusted (an agent fetched it from anywhere), and
// document parsers are a classic attack surface, so nothing parses it in
// the server: the bytes are read through the file API's resolver (the
// sensitive-path policy, symlink and hard-link checks apply; a .env or
// .ssh key cannot be "converted" out of the sandbox) and handed on stdin to
// a converter run as the sandbox user *inside* the sandbox, with its
// limits (memory, pids, CPU time, wall timeout, output cap). The
// converters are Debian's: pandoc (run with --sandbox, so a document
// cannot make it read other files or fetch URLs) for HTML, DOCX, ODT,
// EPUB, RTF, LaTeX, reStructuredText, Org, ipynb …; poppler-utils'
// pdftotext for PDF. `make deps` installs them on the host, whose /usr
// every sandbox sees; a missing one is a clear error naming the package.
//
// What it does not stop: a converter bug exploited by the document still
// runs code — inside the sandbox, as the sandbox user, which is what the
// agent could do anyway.
package convert

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox"
	"github.com/sandhold/sandhold/internal/workspace"
)

// Caps of a conversion, with their reasons.
const (
	// MaxDocumentBytes caps the document read (it travels as the
	// converter's stdin, which the sandbox caps at sandbox.MaxStdin).
	MaxDocumentBytes = sandbox.MaxStdin
	// MaxMarkdownBytes caps the Markdown kept (server memory); a longer
	// result is middle-truncated and says so.
	MaxMarkdownBytes = 4 << 20
	// convertTimeout bounds one conversion's wall time (and a download's).
	convertTimeout = 60 * time.Second
	// maxURIBytes bounds the uri argument.
	maxURIBytes = 8192
	// maxZipEntries bounds the names looked at when sniffing a zip
	// container (DOCX, ODT, EPUB) without an extension.
	maxZipEntries = 4096
)

// Resolver returns the sandbox a call names ("" = the caller's default).
type Resolver func(ctx context.Context, c auth.Caller, id string) (*sandbox.Sandbox, error)

// Service converts documents inside sandboxes.
type Service struct {
	resolve Resolver
	pol     workspace.Policy
}

// New returns a service; a zero policy means the file API's default.
func New(resolve Resolver, pol workspace.Policy) *Service {
	if pol.Names == nil && pol.Dirs == nil && pol.Paths == nil {
		pol = workspace.DefaultPolicy()
	}
	return &Service{resolve: resolve, pol: pol}
}

// Args is the request: AIO's UtilConvertToMarkdownRequest plus the
// sandbox the tool acts on.
type Args struct {
	dispatch.On
	URI string `json:"uri" required:"true" maxLength:"8192" doc:"the document: a path in the sandbox (/workspace/a.pdf, a.pdf = /workspace/a.pdf, file:///workspace/a.pdf) or an http(s) URL fetched from inside the sandbox (its egress policy applies)"`
}

// Validate checks the uri's form.
func (a Args) Validate() error {
	_, _, err := parseURI(a.URI)
	return err
}

// Result is the converted document.
type Result struct {
	Markdown string `json:"markdown" doc:"the document as Markdown (GitHub-flavoured; a PDF as its text layout)"`
	// Format is the input format the converter read.
	Format    string `json:"format" doc:"the format read: html, docx, pdf, odt, epub, rtf, latex, rst, org, ipynb, text …"`
	Converter string `json:"converter" doc:"the program that converted it inside the sandbox"`
	Bytes     int64  `json:"bytes" doc:"size of the document read"`
	Truncated bool   `json:"truncated" doc:"the Markdown was longer than 4 MiB and is middle-truncated"`
	// SandboxID is the sandbox converted in (for the audit record).
	SandboxID string `json:"-"`
}

// extFormats maps a file extension to pandoc's reader name (pdf and text
// are handled by other programs). A literal table so what is accepted is
// reviewable in one place.
var extFormats = map[string]string{
	".html": "html", ".htm": "html", ".xhtml": "html",
	".docx": "docx", ".odt": "odt", ".epub": "epub", ".rtf": "rtf",
	".tex": "latex", ".latex": "latex", ".rst": "rst", ".org": "org",
	".ipynb": "ipynb", ".textile": "textile", ".wiki": "mediawiki",
	".dbk": "docbook", ".csv": "csv",
	".pdf": "pdf",
	".md":  "text", ".markdown": "text", ".txt": "text",
}

// converters names the program and Debian package of each path of the
// script (for error messages and the answer).
var converters = map[string][2]string{
	"pdf":  {"pdftotext", "poppler-utils"},
	"text": {"cat", "coreutils"},
}

func converterOf(format string) (prog, pkg string) {
	if c, ok := converters[format]; ok {
		return c[0], c[1]
	}
	return "pandoc", "pandoc"
}

// script runs inside the sandbox; $1 is the format, the document is on
// stdin. It is a constant: nothing a client sends is ever part of it.
// A missing converter prints a marker line the server turns into an
// error naming the Debian package.
const script = `set -eu
fmt=$1
t=$(mktemp -d /tmp/.sandhold-convert.XXXXXX)
trap 'rm -rf "$t"' EXIT
cat > "$t/in"
need() { command -v "$1" >/dev/null 2>&1 || { printf 'sandhold-missing-converter %s\n' "$1" >&2; exit 127; }; }
case $fmt in
pdf) need pdftotext; pdftotext -q -enc UTF-8 -layout "$t/in" - ;;
text) cat "$t/in" ;;
*) need pandoc; pandoc --sandbox -f "$fmt" -t gfm --wrap=none "$t/in" ;;
esac
`

// fetchScript downloads $1 (an http(s) URL) to stdout from inside the
// sandbox, capped at $2 bytes.
const fetchScript = `set -eu
command -v curl >/dev/null 2>&1 || { printf 'sandhold-missing-converter curl\n' >&2; exit 127; }
exec curl -fsSL --proto =http,https --max-redirs 5 --max-filesize "$2" -- "$1"
`

// parseURI splits a uri into a sandbox path or a URL.
func parseURI(uri string) (p string, remote bool, err error) {
	bad := func(msg string) error { return fault.InvalidField("body.uri", msg) }
	switch {
	case strings.TrimSpace(uri) == "":
		return "", false, bad("uri is required")
	case len(uri) > maxURIBytes:
		return "", false, bad(fmt.Sprintf("uri longer than %d bytes", maxURIBytes))
	case strings.ContainsAny(uri, "\x00\r\n"):
		return "", false, bad("uri holds a NUL or a line break")
	}
	low := strings.ToLower(uri)
	switch {
	case strings.HasPrefix(low, "http://"), strings.HasPrefix(low, "https://"):
		u, err := url.Parse(uri)
		if err != nil || u.Host == "" {
			return "", false, bad("uri is not a valid URL")
		}
		if u.User != nil {
			return "", false, bad("credentials in the URL are refused (they would land in logs)")
		}
		return uri, true, nil
	case strings.HasPrefix(low, "file://"):
		u, err := url.Parse(uri)
		if err != nil || (u.Host != "" && u.Host != "localhost") || u.Path == "" {
			return "", false, bad("a file URI must be file:///absolute/path")
		}
		return u.Path, false, nil
	case strings.Contains(uri, "://"):
		return "", false, bad("uri scheme not supported: give a path in the sandbox, file:///path or an http(s) URL")
	}
	if !strings.HasPrefix(uri, "/") {
		uri = "/workspace/" + uri
	}
	return uri, false, nil
}

// Convert reads the document and converts it inside the sandbox.
func (s *Service) Convert(ctx context.Context, c auth.Caller, a Args) (Result, error) {
	p, remote, err := parseURI(a.URI)
	if err != nil {
		return Result{}, err
	}
	sb, err := s.resolve(ctx, c, a.Sandbox)
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, convertTimeout)
	defer cancel()
	var doc []byte
	name := p
	if remote {
		doc, err = s.fetch(ctx, c, sb, p)
		if u, perr := url.Parse(p); perr == nil {
			name = u.Path
		}
	} else {
		doc, err = s.read(ctx, sb, p)
	}
	if err != nil {
		return Result{}, err
	}
	format, err := detect(name, doc)
	if err != nil {
		return Result{}, err
	}
	prog, _ := converterOf(format)
	e, err := sb.Exec(ctx, sandbox.ExecRequest{
		Argv: []string{"/bin/bash", "-c", script, "convert", format}, Stdin: doc,
		Timeout: convertTimeout, OutputLimit: MaxMarkdownBytes, Actor: c.KeyID,
	})
	if err != nil {
		return Result{}, err
	}
	r := e.Result()
	if err := failure(r, "convert the "+format+" document"); err != nil {
		return Result{}, err
	}
	out, truncated := e.Stdout.Text()
	return Result{Markdown: out, Format: format, Converter: prog, Bytes: int64(len(doc)), Truncated: truncated, SandboxID: sb.ID()}, nil
}

// read opens a sandbox file through the file API's resolver and reads it
// whole (at most MaxDocumentBytes).
func (s *Service) read(ctx context.Context, sb *sandbox.Sandbox, p string) ([]byte, error) {
	l, err := s.pol.Locate(ctx, sb, "convert", p, false)
	if err != nil {
		return nil, err
	}
	if !l.Exists {
		return nil, fault.New(fault.NotFound, "convert "+l.Given+": no such file")
	}
	_, f, err := sb.File(ctx, agent.OpOpenRead, agent.FileReq{Path: l.Resolved, NoFollow: true})
	if err != nil {
		var pe *agent.Error
		if errors.As(err, &pe) && pe.Code == agent.CodeNotRegular {
			return nil, fault.InvalidField("body.uri", l.Given+": not a regular file")
		}
		return nil, workspace.FileErrorOf("convert", l.Given, err)
	}
	defer func() { _ = f.Close() }()
	if _, err := workspace.CheckOpened("convert", l, f); err != nil {
		return nil, err
	}
	doc, err := io.ReadAll(io.LimitReader(f, MaxDocumentBytes+1))
	if err != nil {
		return nil, fault.Wrap(fault.Internal, fmt.Errorf("read %s: %w", l.Given, err), "could not read the document")
	}
	if len(doc) > MaxDocumentBytes {
		return nil, fault.New(fault.TooLarge, fmt.Sprintf("convert %s: the document is larger than %d bytes", l.Given, MaxDocumentBytes))
	}
	return doc, nil
}

// fetch downloads a URL from inside the sandbox (its network policy
// applies: with the default mode none nothing leaves).
func (s *Service) fetch(ctx context.Context, c auth.Caller, sb *sandbox.Sandbox, u string) ([]byte, error) {
	e, err := sb.Exec(ctx, sandbox.ExecRequest{
		Argv:    []string{"/bin/bash", "-c", fetchScript, "fetch", u, fmt.Sprint(MaxDocumentBytes)},
		Timeout: convertTimeout, OutputLimit: MaxDocumentBytes + 1, Actor: c.KeyID,
	})
	if err != nil {
		return nil, err
	}
	r := e.Result()
	if r.ExitCode != nil && *r.ExitCode == 63 { // curl: --max-filesize exceeded
		return nil, fault.New(fault.TooLarge, fmt.Sprintf("the document is larger than %d bytes", MaxDocumentBytes))
	}
	if err := failure(r, "fetch the URL from inside the sandbox (its network policy applies)"); err != nil {
		return nil, err
	}
	out, truncated := e.Stdout.Text()
	if truncated || len(out) > MaxDocumentBytes {
		return nil, fault.New(fault.TooLarge, fmt.Sprintf("the document is larger than %d bytes", MaxDocumentBytes))
	}
	return []byte(out), nil
}

// failure turns a converter's unhappy end into an error for the client:
// the converter's own message (it is about the client's document), a
// missing program named with its Debian package.
func failure(r sandbox.Result, what string) error {
	if r.Status == sandbox.StatusTimedOut {
		return fault.New(fault.Timeout, fmt.Sprintf("could not %s within %s", what, convertTimeout))
	}
	if r.Status != sandbox.StatusCompleted {
		return fault.New(fault.Conflict, fmt.Sprintf("could not %s: the converter was killed (%s)", what, r.Reason))
	}
	if r.ExitCode != nil && *r.ExitCode == 0 {
		return nil
	}
	if i := strings.Index(r.Stderr, "sandhold-missing-converter "); i >= 0 {
		prog := strings.TrimSpace(strings.SplitN(r.Stderr[i+len("sandhold-missing-converter "):], "\n", 2)[0])
		pkg := prog
		for _, c := range converters {
			if c[0] == prog {
				pkg = c[1]
			}
		}
		return fault.New(fault.Unsupported, fmt.Sprintf("could not %s: the converter %s is not installed on this server (Debian package %s; `make deps` installs it)", what, prog, pkg))
	}
	msg := strings.TrimSpace(r.Stderr)
	if len(msg) > 500 {
		msg = msg[:500] + "…"
	}
	if msg == "" {
		msg = fmt.Sprintf("exit status %d", deref(r.ExitCode))
	}
	return fault.New(fault.Invalid, fmt.Sprintf("could not %s: %s", what, strings.ToValidUTF8(msg, "?")))
}

func deref(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}

// detect names the document's format: by extension, else by its first
// bytes (a zip container by the names inside).
func detect(name string, doc []byte) (string, error) {
	if f, ok := extFormats[strings.ToLower(path.Ext(name))]; ok {
		return f, nil
	}
	head := doc[:min(len(doc), 1024)]
	trimmed := bytes.TrimLeft(head, " \t\r\n\ufeff")
	switch {
	case bytes.HasPrefix(doc, []byte("%PDF-")):
		return "pdf", nil
	case bytes.HasPrefix(doc, []byte("PK\x03\x04")):
		return zipFormat(doc)
	case bytes.HasPrefix(doc, []byte(`{\rtf`)):
		return "rtf", nil
	case looksHTML(trimmed):
		return "html", nil
	case utf8.Valid(doc):
		return "text", nil
	}
	return "", fault.InvalidField("body.uri", "the document's format is not recognised (supported: HTML, PDF, DOCX, ODT, EPUB, RTF, LaTeX, reStructuredText, Org, ipynb, CSV, text); give the file its usual extension")
}

func looksHTML(b []byte) bool {
	low := bytes.ToLower(b)
	for _, p := range []string{"<!doctype html", "<html", "<head", "<body", "<?xml"} {
		if bytes.HasPrefix(low, []byte(p)) {
			return true
		}
	}
	return false
}

// zipFormat tells DOCX, ODT and EPUB apart by their member names.
func zipFormat(doc []byte) (string, error) {
	zr, err := zip.NewReader(bytes.NewReader(doc), int64(len(doc)))
	if err != nil {
		return "", fault.InvalidField("body.uri", "the document is a damaged zip container")
	}
	for i, f := range zr.File {
		if i >= maxZipEntries {
			break
		}
		switch f.Name {
		case "word/document.xml":
			return "docx", nil
		case "content.xml":
			return "odt", nil
		case "META-INF/container.xml":
			return "epub", nil
		}
	}
	return "", fault.InvalidField("body.uri", "the zip container is not a DOCX, ODT or EPUB document")
}
