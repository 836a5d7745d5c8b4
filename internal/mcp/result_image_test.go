package mcp

import (
	"bytes"
	"encoding/json"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

type testImage struct{ data []byte }

func (i testImage) MCPImage() (string, []byte) { return "image/png", i.data }

// A tool answer that is an image (a browser screenshot) is image content
// with the raw bytes, base64 on the wire — not a JSON text of them.
func TestImageAnswerIsImageContent(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\nrest")
	res := toResult(testImage{data: png}, nil)
	if res.IsError || len(res.Content) != 1 {
		t.Fatalf("result: %+v", res)
	}
	img, ok := res.Content[0].(*sdk.ImageContent)
	if !ok {
		t.Fatalf("content is %T, want image", res.Content[0])
	}
	if img.MIMEType != "image/png" || !bytes.Equal(img.Data, png) {
		t.Fatalf("image content: %s %q", img.MIMEType, img.Data)
	}
	wire, err := json.Marshal(img)
	if err != nil {
		t.Fatal(err)
	}
	var w struct{ Type, Data, MimeType string }
	if err := json.Unmarshal(wire, &w); err != nil || w.Type != "image" || w.MimeType != "image/png" || w.Data != "iVBORw0KGgpyZXN0" {
		t.Fatalf("wire: %s", wire)
	}
}
