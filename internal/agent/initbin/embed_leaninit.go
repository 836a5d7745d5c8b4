//go:build leaninit

package initbin

import _ "embed" // the lean init program

// program is cmd/sandhold-init, built by `make build` into this directory
// before sandhold itself (the file is not in the repository).
//
//go:embed sandhold-init
var program []byte
