package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// fdatasync is the sync SQLite's commit makes here (store.useFdatasync).
func fdatasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
