package main

// keeperEntry is the ELF entry point with -ldflags '-E main.keeperEntry'
// (keeper_amd64.s): the sleeping init's loop, or the Go runtime's start.
func keeperEntry()

// The linker keeps keeperEntry only as the entry (-E); this names it for
// the linters.
var _ = keeperEntry

// goEntered is set by keeperEntry before it starts the Go runtime: the
// program was linked with keeperEntry as its entry, so it can sleep.
var goEntered uint8

func keeperLinked() bool { return goEntered == 1 }
