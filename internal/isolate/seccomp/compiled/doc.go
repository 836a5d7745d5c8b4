// Package compiled holds the sandbox's seccomp filter as the BPF program
// package seccomp compiles its policy table to, and loads it.
//
// Why a second package: the sandbox init (cmd/sandhold-init) must install
// the filter, but compiling it needs github.com/elastic/go-seccomp-bpf,
// whose arch package builds syscall tables for every architecture at
// package initialisation: measured, 190-260 kB of private memory kept for
// the life of each process that links it, and 1-9 ms of the init's
// start-up (BENCHMARKS.md, "The init's memory after use"). Every sandbox
// paid both. This package has the compiled program as a literal instead
// and imports only golang.org/x/sys/unix.
//
// The literal is generated from the policy, never edited by hand: package
// seccomp's TestCompiledProgramIsThePolicy fails when the table and the
// literal differ (regenerate with `go test ./internal/isolate/seccomp -run
// CompiledProgram -update` and review the golden diff beside it).
package compiled
