package browserops

import (
	"context"
	"encoding/json"
	"fmt"

	cdproto "github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/runtime"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/browser/cdp"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
)

// UploadArgs is AIO's UploadFileRequest.
type UploadArgs struct {
	dispatch.On
	Selector string   `json:"selector" required:"true"`
	Files    []string `json:"files" required:"true" maxItems:"20" doc:"workspace paths (relative ones are under /workspace)"`
}

// Validate wants files.
func (a UploadArgs) Validate() error {
	if len(a.Files) == 0 || len(a.Files) > maxUploadFiles {
		return fault.InvalidField("body.files", fmt.Sprintf("files must hold 1 to %d paths", maxUploadFiles))
	}
	for _, f := range a.Files {
		if err := needPath("body.files", f); err != nil {
			return err
		}
	}
	return nil
}

// FillFormArgs is AIO's FormFillRequest.
type FillFormArgs struct {
	dispatch.On
	Items []map[string]any `json:"items" required:"true" maxItems:"100" doc:"each {selector or index, value (text, true/false for a checkbox, an option for a select)}"`
}

// Validate checks each item.
func (a FillFormArgs) Validate() error {
	if len(a.Items) == 0 || len(a.Items) > maxFormItems {
		return fault.InvalidField("body.items", fmt.Sprintf("items must hold 1 to %d fields", maxFormItems))
	}
	for i, it := range a.Items {
		_, sel := it["selector"].(string)
		_, idx := it["index"].(float64)
		if !sel && !idx {
			return fault.InvalidField(fmt.Sprintf("body.items[%d]", i), "an item needs a selector or an index")
		}
		if _, ok := it["value"]; !ok {
			if _, ok := it["text"]; !ok {
				return fault.InvalidField(fmt.Sprintf("body.items[%d].value", i), "an item needs a value")
			}
		}
	}
	return nil
}

// formTools set files on file inputs and fill several fields at once.
func formTools(ts *[]dispatch.Tool, s *Service) {
	define(ts, ToolUploadFile, "Set workspace files on a file input", guard.Medium,
		func(ctx context.Context, c auth.Caller, a UploadArgs) (Action, error) { return s.UploadFile(ctx, c, a) },
		func(a UploadArgs) (string, map[string]any) {
			return clipMsg(a.Selector), map[string]any{"files": a.Files}
		})
	define(ts, ToolFillForm, "Fill several form fields at once (text, checkboxes, selects)", guard.Medium,
		func(ctx context.Context, c auth.Caller, a FillFormArgs) (Action, error) { return s.FillForm(ctx, c, a) },
		func(a FillFormArgs) (string, map[string]any) { return "", map[string]any{"items": len(a.Items)} })
}

// UploadFile sets workspace files on a file input. Each file is read
// through the workspace first, so the workspace's policy (sensitive
// paths, the sandbox's own view) decides what may be uploaded; the
// browser, inside the sandbox, then opens the same path.
func (s *Service) UploadFile(ctx context.Context, c auth.Caller, a UploadArgs) (Action, error) {
	id, err := s.filesFor(ctx, c, a.Sandbox)
	if err != nil {
		return Action{}, err
	}
	paths := make([]string, 0, len(a.Files))
	for _, f := range a.Files {
		p := workspacePath(f)
		if _, err := s.cfg.Files.ReadFile(ctx, c, id, p); err != nil {
			return Action{}, err
		}
		paths = append(paths, p)
	}
	return act(ctx, s, c, id, "upload_file", func(ctx context.Context, o *op) error {
		objID, err := elementObject(ctx, o.page(), a.Selector)
		if err != nil {
			return err
		}
		defer func() {
			_, _ = cdproto.Call(ctx, o.page(), runtime.ReleaseObject, runtime.ReleaseObjectParams{ObjectID: objID})
		}()
		_, err = cdproto.Call(ctx, o.page(), dom.SetFileInputFiles, dom.SetFileInputFilesParams{Files: paths, ObjectID: objID})
		return err
	})
}

// elementObject finds a file input by selector and returns its object id.
func elementObject(ctx context.Context, s *cdp.Session, selector string) (runtime.RemoteObjectID, error) {
	arg, _ := json.Marshal(selector)
	res, err := cdproto.Call(ctx, s, runtime.Evaluate, runtime.EvaluateParams{Expression: `(() => {
const el = document.querySelector(` + string(arg) + `);
if (!el) throw new Error('no element matches the selector');
if (el.tagName !== 'INPUT' || el.type !== 'file') throw new Error('the element is not a file input');
return el; })()`})
	if err != nil {
		return "", err
	}
	if d := res.ExceptionDetails; d != nil {
		msg := d.Text
		if d.Exception != nil && d.Exception.Description != "" {
			msg = d.Exception.Description
		}
		return "", pageError(msg)
	}
	if res.Result == nil || res.Result.ObjectID == "" {
		return "", fault.New(fault.NotFound, "page: the selector did not yield an element")
	}
	return res.Result.ObjectID, nil
}

// FillForm fills each item in order.
func (s *Service) FillForm(ctx context.Context, c auth.Caller, a FillFormArgs) (Action, error) {
	return act(ctx, s, c, a.Sandbox, "fill_form", func(ctx context.Context, o *op) error {
		for i, it := range a.Items {
			v, ok := it["value"]
			if !ok {
				v = it["text"]
			}
			ref := elementRef{}
			if sel, ok := it["selector"].(string); ok {
				ref.Selector = &sel
			} else if f, ok := it["index"].(float64); ok {
				n := int(f)
				ref.Index = &n
			}
			var kind string
			if err := callJS(ctx, o.page(), `const el = H.find(a);
if (el.tagName === 'SELECT') return 'select';
if (el.type === 'checkbox' || el.type === 'radio') return 'check';
return 'text';`, ref, &kind); err != nil {
				return fmt.Errorf("item %d: %w", i, err)
			}
			var err error
			switch kind {
			case "select":
				err = callJS(ctx, o.page(), `const el = H.find(a.ref);
const i = Array.from(el.options).findIndex(o => o.value === String(a.v) || o.text.trim() === String(a.v));
if (i < 0) throw new Error('no such option');
el.selectedIndex = i;
el.dispatchEvent(new Event('input', {bubbles: true}));
el.dispatchEvent(new Event('change', {bubbles: true}));`, map[string]any{"ref": ref, "v": v}, nil)
			case "check":
				err = callJS(ctx, o.page(), `const el = H.find(a.ref);
const want = a.v === true || a.v === 'true' || a.v === 'on' || a.v === 1;
if (el.checked !== want) el.click();`, map[string]any{"ref": ref, "v": v}, nil)
			default:
				err = fill(ctx, o.page(), ref, fmt.Sprint(v))
			}
			if err != nil {
				return fault.Wrap(fault.KindOf(err), err, fmt.Sprintf("item %d: %s", i, fault.Public(err)))
			}
		}
		return nil
	})
}
