package outbuf

import (
	"bytes"
	"strings"
	"testing"
)

func TestOutputKeepsHeadAndTail(t *testing.T) {
	cases := []struct {
		name      string
		limit     int
		writes    []string
		want      string
		truncated bool
	}{
		{"empty", 10, nil, "", false},
		{"fits", 10, []string{"hello"}, "hello", false},
		{"exactly", 10, []string{"0123456789"}, "0123456789", false},
		{"one over", 10, []string{"0123456789x"}, "01234\n... [1 bytes truncated] ...\n6789x", true},
		{"many small writes", 6, []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"}, "abc\n... [3 bytes truncated] ...\nghi", true},
		{"huge single write", 4, []string{strings.Repeat("x", 1000) + "END"}, "xx\n... [999 bytes truncated] ...\nND", true},
		{"ring wraps", 4, []string{"ab", "cde", "fgh", "ij"}, "ab\n... [6 bytes truncated] ...\nij", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOutput(tc.limit)
			for _, w := range tc.writes {
				if n, err := o.Write([]byte(w)); err != nil || n != len(w) {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			got, tr := o.Text()
			if got != tc.want || tr != tc.truncated {
				t.Fatalf("Text = %q, %v; want %q, %v", got, tr, tc.want, tc.truncated)
			}
			if o.Truncated() != tc.truncated {
				t.Fatalf("Truncated = %v", o.Truncated())
			}
		})
	}
}

func TestOutputReadAtOffsets(t *testing.T) {
	o := NewOutput(8) // head 4, tail 4
	_, _ = o.Write([]byte("0123456789ABCDEF"))
	cases := []struct {
		name    string
		offset  int64
		max     int
		want    string
		next    int64
		dropped int64
	}{
		{"head", 0, 100, "0123", 4, 0},
		{"head partial", 1, 2, "12", 3, 0},
		{"gap jumps to tail", 4, 100, "CDEF", 16, 8},
		{"inside tail", 14, 100, "EF", 16, 0},
		{"at end", 16, 100, "", 16, 0},
		{"past end", 40, 100, "", 40, 0},
		{"negative", -5, 2, "01", 2, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data, next, dropped := o.ReadAt(tc.offset, tc.max)
			if string(data) != tc.want || next != tc.next || dropped != tc.dropped {
				t.Fatalf("ReadAt(%d,%d) = %q,%d,%d; want %q,%d,%d", tc.offset, tc.max, data, next, dropped, tc.want, tc.next, tc.dropped)
			}
		})
	}
}

func TestOutputMemoryBoundedUnderFlood(t *testing.T) {
	o := NewOutput(1024)
	chunk := bytes.Repeat([]byte("y"), 64<<10)
	for range 1000 { // 64 MB through a 1 KiB buffer
		_, _ = o.Write(chunk)
	}
	if len(o.head)+len(o.tail) > 1024 || cap(o.tail) > 1024 {
		t.Fatalf("kept %d+%d bytes (cap %d), want at most 1024", len(o.head), len(o.tail), cap(o.tail))
	}
	if o.Total() != 1000*64<<10 {
		t.Fatalf("Total = %d", o.Total())
	}
}

func TestOutputWaitWakes(t *testing.T) {
	o := NewOutput(16)
	ch, closed := o.Wait()
	if closed {
		t.Fatal("new output reports closed")
	}
	_, _ = o.Write([]byte("x"))
	select {
	case <-ch:
	default:
		t.Fatal("write did not wake the waiter")
	}
	ch, _ = o.Wait()
	o.Close()
	select {
	case <-ch:
	default:
		t.Fatal("close did not wake the waiter")
	}
	if _, closed := o.Wait(); !closed {
		t.Fatal("closed output reports open")
	}
}
