package sandboxinit

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/sandhold/sandhold/internal/agent/launcher"
	"github.com/sandhold/sandhold/internal/archive/spec"
)

// Entry is the main of every program that can serve as a sandbox's init
// (cmd/sandhold-init, "sandhold init", a test binary): it runs the
// launcher when the process was started as one (argv[0] launcher.Name),
// the extractor when started as that, else the init (Main).
func Entry() error {
	if filepath.Base(os.Args[0]) == launcher.Name {
		return launcher.Serve()
	}
	if len(os.Args) > 0 && os.Args[0] == spec.ChildName {
		// The extractor, run by an init from a binary that links package
		// archive (the server or a test binary in place of
		// cmd/sandhold-archive); the lean init has no spec.Child.
		if spec.Child == nil {
			return errors.New("this program carries no extractor")
		}
		os.Exit(spec.Child())
	}
	return Main()
}
