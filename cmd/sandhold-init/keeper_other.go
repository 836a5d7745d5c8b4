//go:build !amd64

package main

// keeperLinked: the keeper (keeper_amd64.s) exists on amd64 only; here an
// idle init never sleeps and the posture says so.
func keeperLinked() bool { return false }
