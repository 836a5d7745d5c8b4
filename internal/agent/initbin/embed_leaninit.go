//go:build leaninit

package initbin

import _ "embed" // the lean init program

// program is cmd/sandhold-init, built by `make build` into this directory
// before sandhold itself (the file is not in the repository).
//
//go:embed sandhold-init
var program []byte

// archiveProgram is cmd/sandhold-archive, the extractor the init runs for
// each extract or pack, built by `make build` beside it.
//
//go:embed sandhold-archive
var archiveProgram []byte
