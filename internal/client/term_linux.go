package client

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// IsTerminal reports whether fd is a terminal.
func IsTerminal(fd uintptr) bool {
	_, err := unix.IoctlGetTermios(int(fd), unix.TCGETS) // #nosec G115 -- a file descriptor fits an int
	return err == nil
}

// TermSize is the terminal's size (zero when fd is not one).
func TermSize(fd uintptr) Size {
	ws, err := unix.IoctlGetWinsize(int(fd), unix.TIOCGWINSZ) // #nosec G115 -- a file descriptor fits an int
	if err != nil {
		return Size{}
	}
	return Size{Rows: int(ws.Row), Cols: int(ws.Col)}
}

// MakeRaw puts the terminal fd in raw mode (no echo, no line editing, no
// signals from keys: Ctrl-C is a byte for the sandbox) and returns the
// function that restores it.
func MakeRaw(fd uintptr) (restore func() error, err error) {
	f := int(fd) // #nosec G115 -- a file descriptor fits an int
	old, err := unix.IoctlGetTermios(f, unix.TCGETS)
	if err != nil {
		return nil, fmt.Errorf("read terminal mode: %w", err)
	}
	raw := *old
	// cfmakeraw(3).
	raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	raw.Oflag &^= unix.OPOST
	raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Cflag &^= unix.CSIZE | unix.PARENB
	raw.Cflag |= unix.CS8
	raw.Cc[unix.VMIN] = 1
	raw.Cc[unix.VTIME] = 0
	if err := unix.IoctlSetTermios(f, unix.TCSETS, &raw); err != nil {
		return nil, fmt.Errorf("set raw mode: %w", err)
	}
	return func() error { return unix.IoctlSetTermios(f, unix.TCSETS, old) }, nil
}

// ReadPassword reads a line from the terminal fd without echo. prompt, if
// set, is shown once echo is off, so nothing typed right after the prompt
// appears can be echoed.
func ReadPassword(fd uintptr, prompt func()) ([]byte, error) {
	f := int(fd) // #nosec G115 -- a file descriptor fits an int
	old, err := unix.IoctlGetTermios(f, unix.TCGETS)
	if err != nil {
		return nil, err
	}
	quiet := *old
	quiet.Lflag &^= unix.ECHO
	quiet.Lflag |= unix.ICANON | unix.ISIG
	quiet.Iflag |= unix.ICRNL
	if err := unix.IoctlSetTermios(f, unix.TCSETS, &quiet); err != nil {
		return nil, err
	}
	defer func() { _ = unix.IoctlSetTermios(f, unix.TCSETS, old) }()
	if prompt != nil {
		prompt()
	}
	var line []byte
	buf := make([]byte, 1)
	const maxSecret = 4096 // a key is 47 bytes; anything this long is not one
	for len(line) < maxSecret {
		n, err := unix.Read(f, buf)
		if err != nil {
			return nil, err
		}
		if n == 0 || buf[0] == '\n' {
			break
		}
		line = append(line, buf[0])
	}
	return line, nil
}
