package initbin

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMemfdIsSealed proves the memfd holds the program and that nothing
// can change it afterwards: writes, growth, shrinking and unsealing all
// fail, and a writable mapping is refused.
func TestMemfdIsSealed(t *testing.T) {
	prog := bytes.Repeat([]byte("\x7fELF-not-really"), 4096)
	f, err := Memfd(prog)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	got, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, prog) {
		t.Fatalf("memfd holds %d bytes, want the %d of the program", len(got), len(prog))
	}
	fd := int(f.Fd())
	if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Errorf("memfd not close-on-exec (flags %#x, %v): every child would inherit it", flags, err)
	}
	attempts := []struct {
		name string
		try  func() error
	}{
		{"pwrite", func() error { _, err := unix.Pwrite(fd, []byte("x"), 0); return err }},
		{"append", func() error { _, err := unix.Pwrite(fd, []byte("x"), int64(len(prog))); return err }},
		{"shrink", func() error { return unix.Ftruncate(fd, 1) }},
		{"grow", func() error { return unix.Ftruncate(fd, int64(len(prog))*2) }},
		{"writable shared mapping", func() error {
			b, err := unix.Mmap(fd, 0, len(prog), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
			if err == nil {
				_ = unix.Munmap(b)
			}
			return err
		}},
		{"remove seals", func() error {
			_, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_FUTURE_WRITE)
			return err
		}},
	}
	for _, a := range attempts {
		if err := a.try(); err == nil {
			t.Errorf("%s succeeded on the sealed memfd", a.name)
		} else if !errors.Is(err, unix.EPERM) {
			t.Logf("%s refused with %v", a.name, err)
		}
	}
}

func TestMemfdRefusesEmptyProgram(t *testing.T) {
	if f, err := Memfd(nil); err == nil {
		_ = f.Close()
		t.Fatal("an empty program was accepted")
	}
}

// TestSelectWithoutTag: a plain build carries no lean init and says so.
func TestSelectWithoutTag(t *testing.T) {
	if Embedded() {
		t.Skip("built with -tags leaninit")
	}
	c, err := Select()
	if err != nil {
		t.Fatal(err)
	}
	if c.Kind != KindReexec || c.File != nil || c.Detail == "" {
		t.Fatalf("choice %+v, want re-exec with a reason", c)
	}
}
