//go:build !linux

package agent

import (
	"errors"
	"os"
)

// Socketpair fails: the protocol socket is a close-on-exec SOCK_SEQPACKET
// pair, which only the Linux build creates atomically.
func Socketpair() (server, init *os.File, err error) {
	return nil, nil, errors.New("sandhold init needs Linux")
}
