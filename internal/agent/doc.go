// Package agent is the server's side of a sandbox's init: it starts inits
// (Launch: cloned by this process, or by the launcher process through its
// handle Launcher) and talks to them (Client: spawn, files, transfers,
// dial, holds). It runs in the server.
//
// The other processes have packages of their own, named by where they
// run: the in-sandbox init is package sandboxinit (its doc tells the
// init's story: why an init, the protocol, cgroups, descriptors), the
// process that clones inits is package launcher, and the messages all of
// them share are package proto; package fds keeps descriptors from
// crossing an exec in each of them. None of those links this package.
package agent
