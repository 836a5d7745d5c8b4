//go:build !leaninit

package initbin

// program is empty without the "leaninit" build tag: the server then
// re-executes itself as its sandboxes' init.
var program []byte

// archiveProgram is empty too: the server's own binary (it links package
// archive) is then the extractor.
var archiveProgram []byte
