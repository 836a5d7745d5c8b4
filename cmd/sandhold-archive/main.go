// Command sandhold-archive is the extractor: the program a sandbox's init
// runs, as its own child and like a command, for each extract or pack
// request (package archive's ChildMain: one request on stdin, the archive
// or pipe at descriptor 3, one reply on stdout). It links the archive
// codecs (tar, zip, gzip, zstd) so that the init does not: every sandbox
// start would pay for them, and archives are rare. It is not installed on
// its own: `make build` embeds it in sandhold (package
// internal/agent/initbin), which hands it to each request as a sealed
// memfd.
package main

import (
	"os"

	"github.com/sandhold/sandhold/internal/archive"
)

func main() { os.Exit(archive.ChildMain()) }
