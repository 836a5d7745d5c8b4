package browserops

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
)

// HTMLArgs is page/html's query.
type HTMLArgs struct {
	dispatch.On
	Outer bool `json:"outer,omitempty" doc:"the whole document (outerHTML of <html>) rather than the body's inner HTML"`
}

// EvaluateArgs is AIO's EvaluateRequest.
type EvaluateArgs struct {
	dispatch.On
	Expression string `json:"expression" required:"true" maxLength:"1048576" doc:"JavaScript evaluated in the page; a promise is awaited"`
}

// Validate caps the expression.
func (a EvaluateArgs) Validate() error {
	if strings.TrimSpace(a.Expression) == "" {
		return fault.InvalidField("body.expression", "expression is empty")
	}
	if len(a.Expression) > 1<<20 {
		return fault.InvalidField("body.expression", "expression is longer than 1 MiB")
	}
	return nil
}

// FindTextArgs is AIO's FindTextRequest.
type FindTextArgs struct {
	dispatch.On
	Keyword string `json:"keyword" required:"true" minLength:"1"`
}

// Validate wants a keyword.
func (a FindTextArgs) Validate() error {
	if a.Keyword == "" {
		return fault.InvalidField("body.keyword", "keyword is empty")
	}
	return nil
}

// PageMarkdown is get_markdown's answer: the page's main content as
// Markdown (markdownJS).
type PageMarkdown struct {
	Title    string `json:"title"`
	URL      string `json:"url"`
	Markdown string `json:"markdown"`
}

// Element is one interactive element of the page (H.describe in js.go);
// its Index is what click and fill take.
type Element struct {
	Index int    `json:"index"`
	Tag   string `json:"tag"`
	Text  string `json:"text"`
	Rect  Rect   `json:"rect"`
	// The element's attributes of these names, where set (500 bytes at most).
	Type        string `json:"type,omitempty"`
	Role        string `json:"role,omitempty"`
	Name        string `json:"name,omitempty"`
	ID          string `json:"id,omitempty"`
	Href        string `json:"href,omitempty"`
	Placeholder string `json:"placeholder,omitempty"`
	// Checked is set for a checkbox or a radio button.
	Checked  *bool `json:"checked,omitempty"`
	Disabled bool  `json:"disabled,omitempty"`
}

// Rect is an element's box in CSS pixels of the viewport, rounded.
type Rect struct {
	X      int `json:"x"`
	Y      int `json:"y"`
	Width  int `json:"width"`
	Height int `json:"height"`
}

// TextMatch is one find_text hit.
type TextMatch struct {
	Index   int            `json:"index"`
	Text    string         `json:"text"`
	Tag     string         `json:"tag"`
	Visible bool           `json:"visible"`
	Rect    map[string]int `json:"rect"`
}

// contentTools read the active page (HTML, text, Markdown, its interactive
// elements, a text search) and run script in it.
func contentTools(ts *[]dispatch.Tool, s *Service) {
	define(ts, ToolHTML, "The active page's HTML (the body's inner HTML, or the whole document with outer)", guard.Safe,
		func(ctx context.Context, c auth.Caller, a HTMLArgs) (string, error) {
			return read[string](ctx, s, c, a.Sandbox, `return a.outer ? document.documentElement.outerHTML : (document.body ? document.body.innerHTML : '');`, map[string]bool{"outer": a.Outer})
		}, nil)
	define(ts, ToolText, "The active page's visible text", guard.Safe,
		func(ctx context.Context, c auth.Caller, a PageArgs) (string, error) {
			return read[string](ctx, s, c, a.Sandbox, `return document.body ? document.body.innerText : '';`, nil)
		}, nil)
	define(ts, ToolMarkdown, "The active page's main content as Markdown", guard.Safe,
		func(ctx context.Context, c auth.Caller, a PageArgs) (PageMarkdown, error) {
			return read[PageMarkdown](ctx, s, c, a.Sandbox, markdownJS, nil)
		}, nil)
	define(ts, ToolElements, "The interactive elements of the active page, with the index click and fill take", guard.Safe,
		func(ctx context.Context, c auth.Caller, a PageArgs) ([]Element, error) {
			out, err := read[[]Element](ctx, s, c, a.Sandbox, `return H.interactive().slice(0, 500).map(H.describe);`, nil)
			if out == nil && err == nil {
				out = []Element{}
			}
			return out, err
		}, nil)
	define(ts, ToolEvaluate, "Run JavaScript in the active page and return its value (arbitrary script: dangerous tier)", guard.Dangerous,
		func(ctx context.Context, c auth.Caller, a EvaluateArgs) (json.RawMessage, error) {
			return run(ctx, s, c, a.Sandbox, func(o *op) (json.RawMessage, error) {
				v, err := evaluate(ctx, o.page(), a.Expression)
				if v == nil && err == nil {
					v = json.RawMessage("null")
				}
				return v, err
			})
		}, func(a EvaluateArgs) (string, map[string]any) {
			sum := sha256.Sum256([]byte(a.Expression))
			return clipAudit(a.Expression), map[string]any{"expression_bytes": len(a.Expression), "expression_sha256": hex.EncodeToString(sum[:])}
		})
	define(ts, ToolFindText, "Find text on the active page", guard.Safe,
		func(ctx context.Context, c auth.Caller, a FindTextArgs) ([]TextMatch, error) {
			out, err := read[[]TextMatch](ctx, s, c, a.Sandbox, findTextJS, map[string]any{"keyword": a.Keyword, "max": maxFindText})
			if out == nil && err == nil {
				out = []TextMatch{}
			}
			return out, err
		}, func(a FindTextArgs) (string, map[string]any) { return clipMsg(a.Keyword), nil })
}
