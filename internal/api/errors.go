package api

import "github.com/sandhold/sandhold/internal/fault"

// Errors for routes that do not exist.
var (
	errNotFound = fault.New(fault.NotFound, "no such route")
	errMethod   = fault.New(fault.MethodNotAllowed, "method not allowed on this route")
)
