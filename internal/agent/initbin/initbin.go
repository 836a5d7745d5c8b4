// Package initbin carries the lean sandbox init (cmd/sandhold-init) inside
// the sandhold binary and hands it to the launcher as a sealed memfd.
//
// Why a memfd and not a file: the init must be exactly the program this
// server was built with. A second file on disk could be replaced or
// rewritten between start and exec (and /proc/self/exe of a re-executed
// server is the server binary, the CVE-2019-5736 target). A memfd sealed
// against write, grow and shrink (and against further sealing changes)
// cannot change after the check, and exec needs no path lookup.
//
// The program is embedded only when the binary is built with the build tag
// "leaninit" (the Makefile builds cmd/sandhold-init into this directory
// first, then sandhold with the tag). A plain `go build` or `go test`
// embeds nothing and the server re-executes itself as "sandhold init";
// both run the same sandboxinit.Main.
package initbin

import (
	"fmt"
	"os"
)

// Init kinds, as reported by the security posture and `sandhold doctor`.
const (
	// KindLean is cmd/sandhold-init, executed from a sealed memfd.
	KindLean = "lean"
	// KindReexec is the server binary re-executed as "sandhold init".
	KindReexec = "reexec"
)

// ReportName names the row of the security report (and of `sandhold
// doctor`) that says which init the sandboxes run as PID 1.
const ReportName = "sandbox init"

// Embedded reports whether this binary carries the lean init.
func Embedded() bool { return len(program) > 0 }

// Choice is the init a server starts its sandboxes with.
type Choice struct {
	// File is the sealed memfd of the lean init; nil for KindReexec.
	File *os.File
	Kind string
	// Detail says why, for the posture report and the log.
	Detail string
}

// Close releases the memfd (the running inits keep their own mapping).
func (c Choice) Close() error {
	if c.File == nil {
		return nil
	}
	return c.File.Close()
}

// Select returns the lean init in a sealed memfd when this binary carries
// one, else the re-exec of the server binary. A binary that carries the
// lean init but cannot seal it into a memfd returns an error: the operator
// built the lean init and should not get the heavier one silently.
func Select() (Choice, error) {
	if !Embedded() {
		return Choice{Kind: KindReexec, Detail: "server binary re-executed as init (built without the lean init; `make build` embeds it)"}, nil
	}
	f, err := Memfd(program)
	if err != nil {
		return Choice{}, fmt.Errorf("lean init: %w", err)
	}
	return Choice{File: f, Kind: KindLean, Detail: fmt.Sprintf("lean init (%d KiB) executed from a sealed memfd", len(program)>>10)}, nil
}

// ArchiveEmbedded reports whether the extractor program (cmd/sandhold-archive)
// was built in.
func ArchiveEmbedded() bool { return len(archiveProgram) > 0 }

// MemfdNamed is Memfd with the memfd's name (seen in /proc/*/maps).
func MemfdNamed(name string, program []byte) (*os.File, error) { return memfd(name, program) }

// ArchiveMemfd returns the embedded extractor program in a new sealed
// memfd, like the init's (Memfd).
func ArchiveMemfd() (*os.File, error) {
	f, err := memfd("sandhold-archive", archiveProgram)
	if err != nil {
		return nil, fmt.Errorf("extractor: %w", err)
	}
	return f, nil
}
