//go:build !leaninit

package initbin

// program is empty without the "leaninit" build tag: the server then
// re-executes itself as its sandboxes' init.
var program []byte
