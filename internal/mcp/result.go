package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
)

// toResult turns a dispatcher outcome into an MCP tool result. Failures
// are tool errors (isError: true) carrying the same public message as the
// HTTP API, so the model sees them and can correct itself; a call waiting
// for an operator says so, with the approval id.
func toResult(v any, err error) *sdk.CallToolResult {
	if err != nil {
		var ar *dispatch.ApprovalRequired
		if errors.As(err, &ar) {
			return approvalResult(ar.ID)
		}
		return errorResult(fault.Public(err))
	}
	if v == nil {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: `{"success":true}`}},
			StructuredContent: json.RawMessage(`{"success":true}`)}
	}
	if img, ok := v.(imageResult); ok {
		// An image (a browser screenshot) travels as image content, which
		// models see; its bytes as JSON text would be noise.
		mime, data := img.MCPImage()
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.ImageContent{Data: data, MIMEType: mime}}}
	}
	b, merr := json.Marshal(v)
	if merr != nil {
		return errorResult("internal error")
	}
	res := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(b)}}}
	// Structured content must be a JSON object for clients of the
	// 2025-06-18 schema (the TypeScript SDK validates it); other values
	// travel as text only.
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) > 0 && t[0] == '{' {
		res.StructuredContent = json.RawMessage(b)
	}
	return res
}

// imageResult is implemented by tool answers that are an image
// (browserops.Image): MIME type and raw bytes.
type imageResult interface {
	MCPImage() (mimeType string, data []byte)
}

// errorResult is a tool error with msg as its text.
func errorResult(msg string) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: msg}}}
}

// approvalResult says that a call waits for an operator. It is a tool
// error (the call has not run) with the id in text and structured form.
func approvalResult(id string) *sdk.CallToolResult {
	text := fmt.Sprintf("approval required: this call needs an operator's approval and has not run (approval id %s); "+
		"its status is at GET /v1/approvals/%s", id, id)
	sc, _ := json.Marshal(map[string]any{"approval_required": true, "approval_id": id, "status": "pending", "message": text})
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: text}},
		StructuredContent: json.RawMessage(sc)}
}
