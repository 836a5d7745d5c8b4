package browserops

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
)

// ClickArgs is AIO's ClickRequest.
type ClickArgs struct {
	dispatch.On
	Selector   *string  `json:"selector,omitempty" doc:"CSS selector"`
	Index      *int     `json:"index,omitempty" doc:"index into page/elements"`
	X          *float64 `json:"x,omitempty"`
	Y          *float64 `json:"y,omitempty"`
	Button     string   `json:"button,omitempty" enum:"left,right,middle"`
	ClickCount int      `json:"click_count,omitempty" minimum:"0" maximum:"3"`
}

// Validate checks the button and count.
func (a ClickArgs) Validate() error {
	if _, err := mouseButton(a.Button); err != nil {
		return err
	}
	if a.ClickCount < 0 || a.ClickCount > 3 {
		return fault.InvalidField("body.click_count", "click_count must be between 1 and 3")
	}
	return nil
}

// FillArgs is AIO's FillRequest.
type FillArgs struct {
	dispatch.On
	Selector *string `json:"selector,omitempty"`
	Index    *int    `json:"index,omitempty"`
	Text     string  `json:"text" required:"true" maxLength:"65536"`
}

// Validate caps the text.
func (a FillArgs) Validate() error { return capText("body.text", a.Text) }

func capText(field, s string) error {
	if len(s) > maxTypeText {
		return fault.InvalidField(field, fmt.Sprintf("text is longer than %d bytes", maxTypeText))
	}
	return nil
}

// TypeArgs is AIO's TypeTextRequest.
type TypeArgs struct {
	dispatch.On
	Text  string  `json:"text" required:"true" maxLength:"65536"`
	Delay float64 `json:"delay,omitempty" minimum:"0" doc:"milliseconds between characters"`
}

// Validate caps the text and the time typing takes.
func (a TypeArgs) Validate() error {
	if err := capText("body.text", a.Text); err != nil {
		return err
	}
	if a.Delay < 0 || time.Duration(a.Delay*float64(len([]rune(a.Text))))*time.Millisecond > maxTypeDuration {
		return fault.InvalidField("body.delay", "delay times the text's length must stay within 60 s")
	}
	return nil
}

// KeyArgs is AIO's KeyRequest.
type KeyArgs struct {
	dispatch.On
	Key string `json:"key" required:"true" doc:"a key name (Enter, Tab, ArrowDown, F5 …), one character, or a combination like Control+a"`
}

// Validate checks the key names.
func (a KeyArgs) Validate() error {
	keys := splitCombo(a.Key)
	if len(keys) > maxHotKeys {
		return fault.InvalidField("body.key", "too many keys in one combination")
	}
	for _, k := range keys {
		if _, err := lookupKey(k); err != nil {
			return err
		}
	}
	return nil
}

// HotKeyArgs is AIO's HotKeyRequest.
type HotKeyArgs struct {
	dispatch.On
	Keys []string `json:"keys" required:"true" maxItems:"8" doc:"pressed in order, released in reverse"`
}

// Validate checks the keys.
func (a HotKeyArgs) Validate() error {
	if len(a.Keys) == 0 || len(a.Keys) > maxHotKeys {
		return fault.InvalidField("body.keys", fmt.Sprintf("keys must hold 1 to %d keys", maxHotKeys))
	}
	for _, k := range a.Keys {
		if _, err := lookupKey(k); err != nil {
			return fault.InvalidField("body.keys", fault.Public(err))
		}
	}
	return nil
}

// HoverArgs is AIO's HoverRequest.
type HoverArgs struct {
	dispatch.On
	Selector *string  `json:"selector,omitempty"`
	X        *float64 `json:"x,omitempty"`
	Y        *float64 `json:"y,omitempty"`
}

// SelectArgs is AIO's SelectOptionRequest.
type SelectArgs struct {
	dispatch.On
	Selector string  `json:"selector" required:"true"`
	Value    *string `json:"value,omitempty"`
	Label    *string `json:"label,omitempty"`
	Index    *int    `json:"index,omitempty"`
}

// Validate wants one way to pick the option.
func (a SelectArgs) Validate() error {
	if a.Value == nil && a.Label == nil && a.Index == nil {
		return fault.InvalidField("body", "give value, label or index")
	}
	return nil
}

// SelectorArgs is AIO's CheckRequest and ScrollToElementRequest.
type SelectorArgs struct {
	dispatch.On
	Selector string `json:"selector" required:"true"`
}

// ScrollArgs is AIO's ScrollRequest.
type ScrollArgs struct {
	dispatch.On
	Direction string `json:"direction,omitempty" enum:"up,down,left,right" doc:"down by default"`
	Amount    *int   `json:"amount,omitempty" doc:"pixels; 300 by default"`
}

// Validate checks the direction.
func (a ScrollArgs) Validate() error {
	switch a.Direction {
	case "", "up", "down", "left", "right":
		return nil
	}
	return fault.InvalidField("body.direction", "direction must be up, down, left or right")
}

// ScrollToArgs is AIO's ScrollToRequest.
type ScrollToArgs struct {
	dispatch.On
	X int `json:"x,omitempty"`
	Y int `json:"y,omitempty"`
}

// interactTools act on the page as a person would: click, fill, type, press
// keys, hover, choose options, check boxes and scroll.
func interactTools(ts *[]dispatch.Tool, s *Service) {
	define(ts, ToolClick, "Click an element (CSS selector or index from get_clickable_elements) or a point", guard.Medium,
		func(ctx context.Context, c auth.Caller, a ClickArgs) (Action, error) {
			return act(ctx, s, c, a.Sandbox, "click", func(ctx context.Context, o *op) error {
				x, y, err := point(ctx, o.page(), elementRef{a.Selector, a.Index}, a.X, a.Y)
				if err != nil {
					return err
				}
				b, _ := mouseButton(a.Button)
				return clickAt(ctx, o.page(), x, y, b, int64(max(a.ClickCount, 1)))
			})
		}, func(a ClickArgs) (string, map[string]any) { return selTarget(a.Selector, a.Index), nil })
	define(ts, ToolFill, "Clear a form field and type text into it", guard.Medium,
		func(ctx context.Context, c auth.Caller, a FillArgs) (Action, error) {
			return act(ctx, s, c, a.Sandbox, "fill", func(ctx context.Context, o *op) error {
				return fill(ctx, o.page(), elementRef{a.Selector, a.Index}, a.Text)
			})
		}, func(a FillArgs) (string, map[string]any) {
			// The text may be a password: its length only.
			return selTarget(a.Selector, a.Index), map[string]any{"text_chars": len([]rune(a.Text))}
		})
	define(ts, ToolType, "Type text into the focused element", guard.Medium,
		func(ctx context.Context, c auth.Caller, a TypeArgs) (Action, error) {
			return act(ctx, s, c, a.Sandbox, "type", func(ctx context.Context, o *op) error {
				return typeText(ctx, o.page(), a.Text, time.Duration(a.Delay*float64(time.Millisecond)))
			})
		}, func(a TypeArgs) (string, map[string]any) {
			return "", map[string]any{"text_chars": len([]rune(a.Text))}
		})
	define(ts, ToolPressKey, "Press a key (or a combination like Control+a) in the active tab", guard.Medium,
		func(ctx context.Context, c auth.Caller, a KeyArgs) (Action, error) {
			return act(ctx, s, c, a.Sandbox, "press_key", func(ctx context.Context, o *op) error {
				return pressCombo(ctx, o.page(), splitCombo(a.Key))
			})
		}, func(a KeyArgs) (string, map[string]any) { return clipMsg(a.Key), nil })
	define(ts, ToolHotKey, "Press keys together (pressed in order, released in reverse)", guard.Medium,
		func(ctx context.Context, c auth.Caller, a HotKeyArgs) (Action, error) {
			return act(ctx, s, c, a.Sandbox, "hot_key", func(ctx context.Context, o *op) error {
				return pressCombo(ctx, o.page(), a.Keys)
			})
		}, func(a HotKeyArgs) (string, map[string]any) { return clipMsg(strings.Join(a.Keys, "+")), nil })
	define(ts, ToolHover, "Move the mouse over an element or a point", guard.Medium,
		func(ctx context.Context, c auth.Caller, a HoverArgs) (Action, error) {
			return act(ctx, s, c, a.Sandbox, "hover", func(ctx context.Context, o *op) error {
				x, y, err := point(ctx, o.page(), elementRef{Selector: a.Selector}, a.X, a.Y)
				if err != nil {
					return err
				}
				return mouseMove(ctx, o.page(), x, y, 0)
			})
		}, func(a HoverArgs) (string, map[string]any) { return selTarget(a.Selector, nil), nil })
	define(ts, ToolSelect, "Choose an option of a <select> by value, label or index", guard.Medium,
		func(ctx context.Context, c auth.Caller, a SelectArgs) (Action, error) {
			return act(ctx, s, c, a.Sandbox, "select_option", func(ctx context.Context, o *op) error {
				return callJS(ctx, o.page(), `const el = H.find({selector: a.selector});
if (el.tagName !== 'SELECT') throw new Error('the element is not a select');
const opts = Array.from(el.options);
let i = -1;
if (a.value !== null && a.value !== undefined) i = opts.findIndex(o => o.value === a.value);
else if (a.label !== null && a.label !== undefined) i = opts.findIndex(o => o.label === a.label || o.text.trim() === a.label);
else if (a.index !== null && a.index !== undefined) i = a.index < opts.length ? a.index : -1;
if (i < 0) throw new Error('no such option');
el.selectedIndex = i;
el.dispatchEvent(new Event('input', {bubbles: true}));
el.dispatchEvent(new Event('change', {bubbles: true}));`, map[string]any{"selector": a.Selector, "value": a.Value, "label": a.Label, "index": a.Index}, nil)
			})
		}, func(a SelectArgs) (string, map[string]any) { return clipMsg(a.Selector), nil })
	checkOp := func(name dispatch.Ref[SelectorArgs, Action], desc string, want bool) {
		define(ts, name, desc, guard.Medium, func(ctx context.Context, c auth.Caller, a SelectorArgs) (Action, error) {
			return act(ctx, s, c, a.Sandbox, strings.TrimPrefix(name.Name(), "browser."), func(ctx context.Context, o *op) error {
				return callJS(ctx, o.page(), `const el = H.find({selector: a.selector});
if (!('checked' in el)) throw new Error('the element is not a checkbox or radio button');
if (el.checked !== a.want) el.click();
if (el.checked !== a.want) throw new Error('the element did not change state');`, map[string]any{"selector": a.Selector, "want": want}, nil)
			})
		}, func(a SelectorArgs) (string, map[string]any) { return clipMsg(a.Selector), nil })
	}
	checkOp(ToolCheck, "Check a checkbox or radio button", true)
	checkOp(ToolUncheck, "Uncheck a checkbox", false)
	define(ts, ToolScroll, "Scroll the page up, down, left or right by an amount of pixels", guard.Medium,
		func(ctx context.Context, c auth.Caller, a ScrollArgs) (Action, error) {
			return act(ctx, s, c, a.Sandbox, "scroll", func(ctx context.Context, o *op) error {
				amount := defaultScrollAmount
				if a.Amount != nil {
					amount = *a.Amount
				}
				dx, dy := 0, amount
				switch a.Direction {
				case "up":
					dy = -amount
				case "left":
					dx, dy = -amount, 0
				case "right":
					dx, dy = amount, 0
				}
				return callJS(ctx, o.page(), `window.scrollBy(a.dx, a.dy);`, map[string]int{"dx": dx, "dy": dy}, nil)
			})
		}, func(a ScrollArgs) (string, map[string]any) { return a.Direction, nil })
	define(ts, ToolScrollTo, "Scroll the page to a position", guard.Medium,
		func(ctx context.Context, c auth.Caller, a ScrollToArgs) (Action, error) {
			return act(ctx, s, c, a.Sandbox, "scroll_to", func(ctx context.Context, o *op) error {
				return callJS(ctx, o.page(), `window.scrollTo(a.x, a.y);`, map[string]int{"x": a.X, "y": a.Y}, nil)
			})
		}, nil)
	define(ts, ToolScrollToElement, "Scroll an element into view", guard.Medium,
		func(ctx context.Context, c auth.Caller, a SelectorArgs) (Action, error) {
			return act(ctx, s, c, a.Sandbox, "scroll_to_element", func(ctx context.Context, o *op) error {
				return callJS(ctx, o.page(), `H.find({selector: a.selector}).scrollIntoView({block: 'center'});`, map[string]any{"selector": a.Selector}, nil)
			})
		}, func(a SelectorArgs) (string, map[string]any) { return clipMsg(a.Selector), nil })
}
