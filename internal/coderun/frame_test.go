package coderun

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

const testNonce = "0123456789abcdef0123456789abcdef"

func frame(kind byte, payload string) string {
	return fmt.Sprintf("\x1e%s%c%04x%s\x1f", testNonce, kind, len(payload), payload)
}

// parse feeds input in pieces of size step and returns raw output and
// messages in order ("raw:…" / "msg:…").
func parse(input string, step int) []string {
	p := newFrameParser(testNonce)
	var out []string
	var raw bytes.Buffer
	flush := func() {
		if raw.Len() > 0 {
			out = append(out, "raw:"+raw.String())
			raw.Reset()
		}
	}
	emit := func(e event) {
		switch {
		case e.raw != nil:
			raw.Write(e.raw)
		case e.msg != nil:
			flush()
			out = append(out, "msg:"+string(e.msg))
		case e.oversize:
			flush()
			out = append(out, "oversize")
		}
	}
	for i := 0; i < len(input); i += step {
		p.feed([]byte(input[i:min(i+step, len(input))]), false, emit)
	}
	p.feed(nil, true, emit)
	flush()
	return out
}

func TestFrameParser(t *testing.T) {
	big := strings.Repeat("x", maxFramePayload)
	cases := []struct {
		name  string
		input string
		want  []string
	}{
		{"raw-only", "hello\n", []string{"raw:hello\n"}},
		{"one-message", frame('E', `{"t":"end"}`), []string{`msg:{"t":"end"}`}},
		{"raw-around", "a" + frame('E', "m") + "b", []string{"raw:a", "msg:m", "raw:b"}},
		{"chunked", frame('C', "ab") + frame('C', "cd") + frame('E', "e"), []string{"msg:abcde"}},
		{"raw-between-chunks", frame('C', "ab") + "zz" + frame('E', "c"), []string{"raw:zz", "msg:abc"}},
		{"empty-payload", frame('E', ""), []string{"msg:"}},
		{"max-payload", frame('E', big), []string{"msg:" + big}},
		{"wrong-nonce", "\x1e" + strings.Repeat("f", 32) + "E0001m\x1f", []string{"raw:\x1e" + strings.Repeat("f", 32) + "E0001m\x1f"}},
		{"bad-kind", "\x1e" + testNonce + "X0001m\x1f", []string{"raw:\x1e" + testNonce + "X0001m\x1f"}},
		{"bad-length", "\x1e" + testNonce + "Ezzzzm\x1f", []string{"raw:\x1e" + testNonce + "Ezzzzm\x1f"}},
		{"length-over-cap", "\x1e" + testNonce + "Effff" + "m\x1f", []string{"raw:\x1e" + testNonce + "Effffm\x1f"}},
		{"missing-trailer", "\x1e" + testNonce + "E0001mX", []string{"raw:\x1e" + testNonce + "E0001mX"}},
		// A fake header whose length swallows the real frame: the real
		// one is still found after the fake one fails.
		{"fake-then-real", "\x1e" + testNonce + "E0050" + frame('E', "real"), []string{"raw:\x1e" + testNonce + "E0050", "msg:real"}},
		{"truncated-at-eof", "\x1e" + testNonce + "E00", []string{"raw:\x1e" + testNonce + "E00"}},
		{"start-bytes-in-raw", "\x1e\x1e\x1e", []string{"raw:\x1e\x1e\x1e"}},
	}
	for _, c := range cases {
		for _, step := range []int{1, 3, 37, 1 << 20} {
			got := parse(c.input, step)
			if strings.Join(got, "|") != strings.Join(c.want, "|") {
				t.Errorf("%s (step %d): got %q, want %q", c.name, step, got, c.want)
			}
		}
	}
}

func TestFrameParserOversize(t *testing.T) {
	p := newFrameParser(testNonce)
	chunk := frame('C', strings.Repeat("y", maxFramePayload))
	var n, oversize int
	emit := func(e event) {
		if e.msg != nil {
			n++
		}
		if e.oversize {
			oversize++
		}
	}
	for i := 0; i <= maxMessageBytes/maxFramePayload+1; i++ {
		p.feed([]byte(chunk), false, emit)
	}
	p.feed([]byte(frame('E', "z")+frame('E', "next")), true, emit)
	if oversize != 1 || n != 1 {
		t.Fatalf("oversize %d, messages %d; want 1 and 1 (the next message still parses)", oversize, n)
	}
	if len(p.msg) != 0 || cap(p.buf) > 8*readChunk {
		t.Fatalf("parser kept %d message bytes, buffer cap %d", len(p.msg), cap(p.buf))
	}
}

// FuzzFrameParser: whatever a cell prints, the parser never panics, never
// loses or invents raw bytes outside valid frames, and stays bounded.
func FuzzFrameParser(f *testing.F) {
	f.Add([]byte("plain"), 5)
	f.Add([]byte(frame('C', "a")+"x"+frame('E', "b")), 2)
	f.Add([]byte("\x1e"+testNonce+"E0002a"), 1)
	f.Fuzz(func(t *testing.T, in []byte, step int) {
		if step <= 0 || step > 1<<16 {
			step = 7
		}
		var raw, msgs int
		p := newFrameParser(testNonce)
		emit := func(e event) { raw += len(e.raw); msgs += len(e.msg) }
		for i := 0; i < len(in); i += step {
			p.feed(in[i:min(i+step, len(in))], false, emit)
		}
		p.feed(nil, true, emit)
		if raw > len(in) || msgs > len(in) {
			t.Fatalf("emitted more than given: raw %d msgs %d of %d", raw, msgs, len(in))
		}
		if !bytes.Contains(in, []byte{frameStart}) && raw != len(in) {
			t.Fatalf("raw %d of %d bytes with no frame start", raw, len(in))
		}
	})
}
