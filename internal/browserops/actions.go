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

// ActionArgs is one of AIO's actions, told apart by action_type.
type ActionArgs struct {
	dispatch.On
	ActionType string   `json:"action_type" required:"true" enum:"MOVE_TO,MOVE_REL,CLICK,MOUSE_DOWN,MOUSE_UP,RIGHT_CLICK,DOUBLE_CLICK,DRAG_TO,DRAG_REL,SCROLL,TYPING,PRESS,KEY_DOWN,KEY_UP,HOTKEY,WAIT"`
	X          *float64 `json:"x,omitempty"`
	Y          *float64 `json:"y,omitempty"`
	XOffset    *float64 `json:"x_offset,omitempty"`
	YOffset    *float64 `json:"y_offset,omitempty"`
	Button     string   `json:"button,omitempty" enum:"left,right,middle"`
	NumClicks  *int     `json:"num_clicks,omitempty" minimum:"1" maximum:"3"`
	DX         int      `json:"dx,omitempty"`
	DY         int      `json:"dy,omitempty"`
	Text       *string  `json:"text,omitempty"`
	// UseClipboard is accepted for AIO compatibility: text is always
	// inserted directly (there is no clipboard in a headless browser).
	UseClipboard *bool    `json:"use_clipboard,omitempty"`
	Key          *string  `json:"key,omitempty"`
	Keys         []string `json:"keys,omitempty" maxItems:"8"`
	Duration     *float64 `json:"duration,omitempty" doc:"WAIT: seconds, at most 120"`
}

// Validate checks that the action has the fields its type requires.
func (a ActionArgs) Validate() error {
	need := func(ok bool, field string) error {
		if !ok {
			return fault.InvalidField("body."+field, field+" is required for "+a.ActionType)
		}
		return nil
	}
	if _, err := mouseButton(a.Button); err != nil {
		return err
	}
	if a.NumClicks != nil && (*a.NumClicks < 1 || *a.NumClicks > 3) {
		return fault.InvalidField("body.num_clicks", "num_clicks must be between 1 and 3")
	}
	switch a.ActionType {
	case "MOVE_TO", "DRAG_TO":
		if err := need(a.X != nil, "x"); err != nil {
			return err
		}
		return need(a.Y != nil, "y")
	case "MOVE_REL", "DRAG_REL":
		if err := need(a.XOffset != nil, "x_offset"); err != nil {
			return err
		}
		return need(a.YOffset != nil, "y_offset")
	case "CLICK", "RIGHT_CLICK", "DOUBLE_CLICK":
		return need((a.X == nil) == (a.Y == nil), "y")
	case "MOUSE_DOWN", "MOUSE_UP", "SCROLL":
		return nil
	case "TYPING":
		if err := need(a.Text != nil, "text"); err != nil {
			return err
		}
		return capText("body.text", *a.Text)
	case "PRESS", "KEY_DOWN", "KEY_UP":
		if err := need(a.Key != nil, "key"); err != nil {
			return err
		}
		_, err := lookupKey(*a.Key)
		return err
	case "HOTKEY":
		return HotKeyArgs{Keys: a.Keys}.Validate()
	case "WAIT":
		if err := need(a.Duration != nil, "duration"); err != nil {
			return err
		}
		if *a.Duration < 0 || *a.Duration > maxWait.Seconds() {
			return fault.InvalidField("body.duration", "duration must be between 0 and 120 seconds")
		}
		return nil
	}
	return fault.InvalidField("body.action_type", "unknown action_type")
}

// ActionData is AIO's ActionData.
type ActionData struct {
	Status          string `json:"status"`
	ActionPerformed string `json:"action_performed"`
}

// doAction performs one action at the mouse position the browser keeps.
func (o *op) doAction(ctx context.Context, a ActionArgs) (string, error) {
	s, b := o.page(), o.b
	btn, _ := mouseButton(a.Button)
	at := func() (float64, float64) {
		if a.X != nil && a.Y != nil {
			return *a.X, *a.Y
		}
		return b.mouseX, b.mouseY
	}
	moveTo := func(x, y float64, buttons int64) error {
		if err := mouseMove(ctx, s, x, y, buttons); err != nil {
			return err
		}
		b.mouseX, b.mouseY = x, y
		return nil
	}
	switch a.ActionType {
	case "MOVE_TO":
		return fmt.Sprintf("moved to (%g, %g)", *a.X, *a.Y), moveTo(*a.X, *a.Y, 0)
	case "MOVE_REL":
		x, y := b.mouseX+*a.XOffset, b.mouseY+*a.YOffset
		return fmt.Sprintf("moved to (%g, %g)", x, y), moveTo(x, y, 0)
	case "CLICK", "RIGHT_CLICK", "DOUBLE_CLICK":
		x, y := at()
		n := int64(1)
		if a.NumClicks != nil {
			n = int64(*a.NumClicks)
		}
		switch a.ActionType {
		case "RIGHT_CLICK":
			btn = "right"
		case "DOUBLE_CLICK":
			n = 2
		}
		if err := clickAt(ctx, s, x, y, btn, n); err != nil {
			return "", err
		}
		b.mouseX, b.mouseY = x, y
		return fmt.Sprintf("%s at (%g, %g)", strings.ToLower(a.ActionType), x, y), nil
	case "MOUSE_DOWN", "MOUSE_UP":
		down := a.ActionType == "MOUSE_DOWN"
		return strings.ToLower(a.ActionType), mouseButtonEvent(ctx, s, b.mouseX, b.mouseY, btn, down, 1)
	case "DRAG_TO", "DRAG_REL":
		x, y := 0.0, 0.0
		if a.ActionType == "DRAG_TO" {
			x, y = *a.X, *a.Y
		} else {
			x, y = b.mouseX+*a.XOffset, b.mouseY+*a.YOffset
		}
		if err := mouseButtonEvent(ctx, s, b.mouseX, b.mouseY, btn, true, 1); err != nil {
			return "", err
		}
		// A few steps so pages that track mousemove see a drag.
		const steps = 5
		x0, y0 := b.mouseX, b.mouseY
		for i := 1; i <= steps; i++ {
			f := float64(i) / steps
			if err := moveTo(x0+(x-x0)*f, y0+(y-y0)*f, buttonsMask(btn)); err != nil {
				return "", err
			}
		}
		return fmt.Sprintf("dragged to (%g, %g)", x, y), mouseButtonEvent(ctx, s, x, y, btn, false, 1)
	case "SCROLL":
		return fmt.Sprintf("scrolled (%d, %d)", a.DX, a.DY), wheel(ctx, s, b.mouseX, b.mouseY, float64(a.DX), float64(a.DY))
	case "TYPING":
		return fmt.Sprintf("typed %d characters", len([]rune(*a.Text))), insertText(ctx, s, *a.Text)
	case "PRESS":
		return "pressed " + *a.Key, pressCombo(ctx, s, []string{*a.Key})
	case "KEY_DOWN", "KEY_UP":
		return strings.ToLower(a.ActionType) + " " + *a.Key, keyEvent(ctx, s, *a.Key, a.ActionType == "KEY_DOWN")
	case "HOTKEY":
		return "pressed " + strings.Join(a.Keys, "+"), pressCombo(ctx, s, a.Keys)
	case "WAIT":
		t := time.NewTimer(time.Duration(*a.Duration * float64(time.Second)))
		defer t.Stop()
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-t.C:
		}
		return fmt.Sprintf("waited %gs", *a.Duration), nil
	}
	return "", fault.InvalidField("body.action_type", "unknown action_type")
}

// actionTools are AIO's low-level actions (/v1/browser/actions).
func actionTools(ts *[]dispatch.Tool, s *Service) {
	define(ts, ToolActions, "Perform one of AIO's low-level actions (MOVE_TO, CLICK, DRAG_TO, SCROLL, TYPING, HOTKEY, WAIT …) on the active tab", guard.Medium,
		func(ctx context.Context, c auth.Caller, a ActionArgs) (ActionData, error) {
			return run(ctx, s, c, a.Sandbox, func(o *op) (ActionData, error) {
				what, err := o.doAction(ctx, a)
				if err != nil {
					return ActionData{}, err
				}
				return ActionData{Status: "success", ActionPerformed: what}, nil
			})
		}, func(a ActionArgs) (string, map[string]any) { return a.ActionType, nil })
}
