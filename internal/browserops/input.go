package browserops

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	cdproto "github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"

	"github.com/sandhold/sandhold/internal/browser/cdp"
	"github.com/sandhold/sandhold/internal/fault"
)

// keyDef is what a key event needs: the DOM key and code, the Windows
// virtual key code Chromium maps editing behaviour from, and the text a
// key types.
type keyDef struct {
	key, code string
	vk        int64
	text      string
	modifier  int64 // the modifier bit the key holds down (Alt=1, Ctrl=2, Meta=4, Shift=8)
}

// namedKeys are the keys with names, looked up case-blind (aliases of
// xdotool and Playwright included).
var namedKeys = map[string]keyDef{
	"enter": {"Enter", "Enter", 13, "\r", 0}, "return": {"Enter", "Enter", 13, "\r", 0},
	"tab": {"Tab", "Tab", 9, "", 0}, "backspace": {"Backspace", "Backspace", 8, "", 0},
	"delete": {"Delete", "Delete", 46, "", 0}, "escape": {"Escape", "Escape", 27, "", 0}, "esc": {"Escape", "Escape", 27, "", 0},
	"space": {" ", "Space", 32, " ", 0}, " ": {" ", "Space", 32, " ", 0},
	"arrowleft": {"ArrowLeft", "ArrowLeft", 37, "", 0}, "left": {"ArrowLeft", "ArrowLeft", 37, "", 0},
	"arrowup": {"ArrowUp", "ArrowUp", 38, "", 0}, "up": {"ArrowUp", "ArrowUp", 38, "", 0},
	"arrowright": {"ArrowRight", "ArrowRight", 39, "", 0}, "right": {"ArrowRight", "ArrowRight", 39, "", 0},
	"arrowdown": {"ArrowDown", "ArrowDown", 40, "", 0}, "down": {"ArrowDown", "ArrowDown", 40, "", 0},
	"home": {"Home", "Home", 36, "", 0}, "end": {"End", "End", 35, "", 0},
	"pageup": {"PageUp", "PageUp", 33, "", 0}, "pagedown": {"PageDown", "PageDown", 34, "", 0},
	"insert": {"Insert", "Insert", 45, "", 0},
	"shift":  {"Shift", "ShiftLeft", 16, "", 8}, "control": {"Control", "ControlLeft", 17, "", 2},
	"ctrl": {"Control", "ControlLeft", 17, "", 2}, "alt": {"Alt", "AltLeft", 18, "", 1},
	"meta": {"Meta", "MetaLeft", 91, "", 4}, "cmd": {"Meta", "MetaLeft", 91, "", 4},
	"command": {"Meta", "MetaLeft", 91, "", 4}, "super": {"Meta", "MetaLeft", 91, "", 4},
}

func init() {
	for i := 1; i <= 12; i++ {
		name := fmt.Sprintf("F%d", i)
		namedKeys[strings.ToLower(name)] = keyDef{name, name, int64(111 + i), "", 0}
	}
}

// lookupKey resolves a key name or a single character.
func lookupKey(name string) (keyDef, error) {
	if d, ok := namedKeys[strings.ToLower(name)]; ok {
		return d, nil
	}
	if utf8.RuneCountInString(name) == 1 {
		r, _ := utf8.DecodeRuneInString(name)
		d := keyDef{key: name, text: name}
		switch {
		case r >= 'a' && r <= 'z':
			d.code, d.vk = "Key"+strings.ToUpper(name), int64(r-'a'+'A')
		case r >= 'A' && r <= 'Z':
			d.code, d.vk = "Key"+name, int64(r)
		case r >= '0' && r <= '9':
			d.code, d.vk = "Digit"+name, int64(r)
		}
		return d, nil
	}
	return keyDef{}, fault.InvalidField("body.key", fmt.Sprintf("unknown key %q (use a key name such as Enter, Tab, ArrowDown, Control, F5, or one character)", clipMsg(name)))
}

// splitCombo reads "Control+Shift+a" as keys; a lone "+" is the plus key.
func splitCombo(s string) []string {
	if s == "+" || !strings.Contains(s, "+") {
		return []string{s}
	}
	parts := strings.Split(s, "+")
	out := parts[:0]
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	if strings.HasSuffix(s, "++") {
		out = append(out, "+")
	}
	return out
}

// pressCombo presses keys in order and releases them in reverse, the
// modifiers of the earlier keys held for the later ones.
func pressCombo(ctx context.Context, s *cdp.Session, keys []string) error {
	defs := make([]keyDef, 0, len(keys))
	for _, k := range keys {
		d, err := lookupKey(k)
		if err != nil {
			return err
		}
		defs = append(defs, d)
	}
	var mods int64
	for _, d := range defs {
		mods |= d.modifier
		text := d.text
		if mods&^8 != 0 {
			text = "" // a shortcut types nothing
		}
		typ := input.DispatchKeyEventTypeKeyDown
		if text == "" {
			typ = input.DispatchKeyEventTypeRawKeyDown
		}
		if _, err := cdproto.Call(ctx, s, input.DispatchKeyEvent, input.DispatchKeyEventParams{Type: typ, Modifiers: mods,
			Key: d.key, Code: d.code, WindowsVirtualKeyCode: d.vk, NativeVirtualKeyCode: d.vk, Text: text, UnmodifiedText: text}); err != nil {
			return err
		}
	}
	for i := len(defs) - 1; i >= 0; i-- {
		d := defs[i]
		if _, err := cdproto.Call(ctx, s, input.DispatchKeyEvent, input.DispatchKeyEventParams{Type: input.DispatchKeyEventTypeKeyUp, Modifiers: mods,
			Key: d.key, Code: d.code, WindowsVirtualKeyCode: d.vk, NativeVirtualKeyCode: d.vk}); err != nil {
			return err
		}
		mods &^= d.modifier
	}
	return nil
}

// keyEvent sends one key down or up (actions' KEY_DOWN/KEY_UP).
func keyEvent(ctx context.Context, s *cdp.Session, name string, down bool) error {
	d, err := lookupKey(name)
	if err != nil {
		return err
	}
	p := input.DispatchKeyEventParams{Type: input.DispatchKeyEventTypeKeyUp, Key: d.key, Code: d.code, WindowsVirtualKeyCode: d.vk, NativeVirtualKeyCode: d.vk}
	if down {
		p.Type, p.Text = input.DispatchKeyEventTypeKeyDown, d.text
		if d.text == "" {
			p.Type = input.DispatchKeyEventTypeRawKeyDown
		}
	}
	_, err = cdproto.Call(ctx, s, input.DispatchKeyEvent, p)
	return err
}

// mouseButton maps AIO's button names.
func mouseButton(b string) (input.MouseButton, error) {
	switch strings.ToLower(b) {
	case "", "left":
		return input.MouseButtonLeft, nil
	case "right":
		return input.MouseButtonRight, nil
	case "middle":
		return input.MouseButtonMiddle, nil
	}
	return "", fault.InvalidField("body.button", "button must be left, right or middle")
}

func buttonsMask(b input.MouseButton) int64 {
	switch b {
	case input.MouseButtonRight:
		return 2
	case input.MouseButtonMiddle:
		return 4
	}
	return 1
}

func mouseMove(ctx context.Context, s *cdp.Session, x, y float64, buttons int64) error {
	_, err := cdproto.Call(ctx, s, input.DispatchMouseEvent, input.DispatchMouseEventParams{Type: input.DispatchMouseEventTypeMouseMoved, X: x, Y: y, Buttons: buttons})
	return err
}

func mouseButtonEvent(ctx context.Context, s *cdp.Session, x, y float64, b input.MouseButton, down bool, count int64) error {
	typ := input.DispatchMouseEventTypeMouseReleased
	if down {
		typ = input.DispatchMouseEventTypeMousePressed
	}
	_, err := cdproto.Call(ctx, s, input.DispatchMouseEvent, input.DispatchMouseEventParams{Type: typ, X: x, Y: y,
		Button: b, Buttons: buttonsMask(b), ClickCount: count})
	return err
}

// clickAt moves to (x, y) and clicks count times with b.
func clickAt(ctx context.Context, s *cdp.Session, x, y float64, b input.MouseButton, count int64) error {
	if err := mouseMove(ctx, s, x, y, 0); err != nil {
		return err
	}
	for i := int64(1); i <= count; i++ {
		if err := mouseButtonEvent(ctx, s, x, y, b, true, i); err != nil {
			return err
		}
		if err := mouseButtonEvent(ctx, s, x, y, b, false, i); err != nil {
			return err
		}
	}
	return nil
}

func wheel(ctx context.Context, s *cdp.Session, x, y, dx, dy float64) error {
	_, err := cdproto.Call(ctx, s, input.DispatchMouseEvent, input.DispatchMouseEventParams{Type: input.DispatchMouseEventTypeMouseWheel, X: x, Y: y, DeltaX: dx, DeltaY: dy})
	return err
}

func insertText(ctx context.Context, s *cdp.Session, text string) error {
	_, err := cdproto.Call(ctx, s, input.InsertText, input.InsertTextParams{Text: text})
	return err
}
