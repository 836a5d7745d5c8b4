// Command sandhold-init is the lean sandbox init: PID 1 of every sandbox.
// It imports only what PID 1 needs (internal/agent/sandboxinit: the protocol, spawn,
// files, the egress relay), none of the server's HTTP, OpenAPI, metrics,
// store or CLI code and none of the archive codecs (archives are
// extracted and packed by cmd/sandhold-archive, which the init runs as
// its child for each request), so an idle init costs little memory and
// starts fast. It is not installed on its own: `make build` embeds it in
// sandhold (package internal/agent/initbin), which runs it from a sealed
// memfd. Started once as "sandhold-launcher" (argv[0]) it is the launcher
// that clones every init for the server (internal/agent/launcher, chosen by
// sandboxinit.Entry). Linked with
// -ldflags '-E main.keeperEntry' (amd64), its entry point is also the
// keeper an idle init sleeps in (keeper_amd64.s).
package main

import (
	"fmt"
	"os"

	"github.com/sandhold/sandhold/internal/agent/sandboxinit"
)

func main() {
	sandboxinit.SetKeeper(keeperLinked())
	if err := sandboxinit.Entry(); err != nil {
		fmt.Fprintln(os.Stderr, "sandhold init:", err)
		os.Exit(1)
	}
}
