package layer

import (
	"context"
	"io"
)

// The per-platform variants must offer the same API.
var (
	_ func(context.Context, io.Reader, string, Limits) (Stats, error) = Unpack
	_ func(context.Context, io.Writer, PackSpec) (Stats, error)       = Pack
)
