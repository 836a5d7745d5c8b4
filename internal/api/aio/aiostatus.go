package aio

import (
	"errors"
	"slices"
	"strings"

	"github.com/sandhold/sandhold/internal/api"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox"
	"github.com/sandhold/sandhold/internal/transfer"
	"github.com/sandhold/sandhold/internal/workspace"
)

// AIO Sandbox's document (1.9.4) gives its operations two statuses: 200
// and 422 (one more, 409, on a download whose file changed). A failure of
// the tool itself — a missing file, a bad regex, an unknown session — is
// HTTP 200 with success:false, and file operations put a
// FileOperationError in data, every other operation null (the schemas of
// its answers allow nothing else). SDKs generated from that document check
// result.success and raise on any other status, so the AIO routes answer
// that way. sandhold's own routes (/v1/sandboxes, keys, audit, policy,
// ...) keep real statuses, and so does everything that is not the tool's
// answer on any route: authentication and role/policy/HALT refusals
// (401/403), rate limits (429), schema validation (422), media type (415),
// a body over the limit, an approval to wait for (202), unavailable and
// internal errors (5xx), unknown routes or methods (404/405), and a
// sandbox of the URL that is missing or another key's (404, the same
// answer for both). Those carry sandhold's error envelope, data
// {code, request_id, field}, on every route.

// isAIOPath says whether path is one of AIO's operations (aioPaths), at
// /v1/... or at /sandboxes/{id}/v1/..., whose row does not keep real
// statuses: the download answers a file (a client saves the body; AIO
// documents 409 there) and the upload takes one (multipart or raw,
// refused before or while streaming with the native error envelope).
func isAIOPath(method, path string) bool {
	if rest, ok := strings.CutPrefix(path, "/sandboxes/"); ok {
		i := strings.IndexByte(rest, '/')
		if i < 0 {
			return false
		}
		path = rest[i:] // "/" and what follows the sandbox id
	}
	if !strings.HasPrefix(path, "/v1/") {
		return false
	}
	ns, _, _ := strings.Cut(path[len("/v1/"):], "/")
	for _, tmpl := range aioPathIndex.byNamespace[ns] {
		if matchTemplate(tmpl, path) {
			rt := aioRow(method, tmpl)
			return rt == nil || !rt.RealStatus
		}
	}
	for _, tmpl := range aioPathIndex.anyNamespace {
		if matchTemplate(tmpl, path) {
			rt := aioRow(method, tmpl)
			return rt == nil || !rt.RealStatus
		}
	}
	return false
}

// aioPathIndex is aioPaths grouped by the segment after /v1/ (the AIO
// namespace: shell, file, browser, ...), so a request is matched against
// its namespace's templates only; a template whose namespace segment is
// a parameter would go to anyNamespace (AIO has none).
var aioPathIndex = func() (ix struct {
	byNamespace  map[string][]string
	anyNamespace []string
}) {
	ix.byNamespace = map[string][]string{}
	for _, tmpl := range aioPaths {
		ns, _, _ := strings.Cut(strings.TrimPrefix(tmpl, "/v1/"), "/")
		if strings.HasPrefix(ns, "{") || !strings.HasPrefix(tmpl, "/v1/") {
			ix.anyNamespace = append(ix.anyNamespace, tmpl)
			continue
		}
		ix.byNamespace[ns] = append(ix.byNamespace[ns], tmpl)
	}
	return ix
}()

// matchTemplate matches path against an OpenAPI path template, a {name}
// segment matching any one non-empty segment. It runs for every /v1
// request against every AIO template, so it walks both strings segment by
// segment instead of splitting them (no allocation).
func matchTemplate(tmpl, path string) bool {
	for {
		t, tRest, tMore := strings.Cut(tmpl, "/")
		p, pRest, pMore := strings.Cut(path, "/")
		if len(t) >= 2 && t[0] == '{' && t[len(t)-1] == '}' {
			if p == "" {
				return false
			}
		} else if t != p {
			return false
		}
		if !tMore || !pMore {
			return tMore == pMore
		}
		tmpl, path = tRest, pRest
	}
}

// table is the AIO route table as the server's middleware reads it
// (api.Table): the role check before the body, the media types of a body,
// and the tool-level status rule of AIO's operations.
type table struct{}

func (table) Row(method, pattern string) (api.Row, bool) {
	rt := aioRow(method, pattern)
	if rt == nil {
		return api.Row{}, false
	}
	return api.Row{Method: rt.Method, Tool: rt.Tool, NamedTool: rt.NamedTool, BodyTypes: rt.BodyTypes}, true
}

func (table) ToolLevel(method, path string) func(error) bool {
	if isAIOPath(method, path) {
		return toolLevel
	}
	return nil
}

// toolLevel says whether err, on an AIO operation, is the tool's own failure
// (answered 200 with success:false and data null or a
// FileOperationError): invalid argument values that passed the schema,
// something not found (a file, a session, a watcher — not the sandbox of
// the URL, which is a real 404), a conflict of state (exists, busy, not empty), an
// operation past its deadline, a feature this host lacks, and — for file
// operations, whose errors carry a FileOperationError — a path the
// sensitive-path policy or the file system refuses and a file over a size
// cap. A forbidden without a FileOperationError is a refusal by the
// dispatcher (role, policy, guard, HALT) and keeps 403.
func toolLevel(err error) bool {
	if errors.Is(err, transfer.ErrChanged) || errors.Is(err, sandbox.ErrNoSandbox) {
		// A routing failure (no such sandbox for this key: the same
		// answer for a missing and another key's one; the server answers
		// no route and no method itself), not the tool's.
		return false
	}
	if errors.Is(err, dispatch.ErrHalted) {
		return false // the operator's HALT (409), a Conflict that is not the tool's
	}
	switch fault.KindOf(err) {
	case fault.Invalid, fault.NotFound, fault.Conflict, fault.Timeout, fault.Unsupported:
		return true
	case fault.Forbidden, fault.TooLarge:
		var fe *workspace.FileError
		return errors.As(err, &fe)
	}
	return false
}

// aioPaths are the /v1 path templates of AIO Sandbox's own operations,
// the routes the tool-level status rule applies to: the rows of the AIO
// table that are not sandhold's own additions (Native: archive, extract,
// artifacts, the terminal WebSocket), each path once. A test in
// internal/aiocompat checks them against AIO's document.
var aioPaths = func() []string {
	var out []string
	for _, rt := range aioTable {
		if !rt.Native && !slices.Contains(out, rt.Path) {
			out = append(out, rt.Path)
		}
	}
	return out
}()

// AIOPaths returns a copy of aioPaths (for the conformance test).
func AIOPaths() []string { return slices.Clone(aioPaths) }
