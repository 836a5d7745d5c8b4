package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
)

type versionCmd struct{}

func (versionCmd) Run(_ context.Context) error {
	_, err := fmt.Fprintf(os.Stdout, "sandhold %s (commit %s, %s, %s/%s)\n", version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return err
}
