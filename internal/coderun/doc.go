// Package coderun executes code — python, javascript and bash — inside a
// sandbox, statelessly or in stateful sessions that keep variables between
// calls (AIO Sandbox's /v1/code and /v1/jupyter).
//
// Each execution runs in an interpreter process started with
// sandbox.Spawn, so it sits in an execution cgroup of its own below the
// sandbox's: its whole process tree can be killed and measured. A small
// driver program (drivers/, embedded in the binary and handed to the
// interpreter on its command line, never written to the host's disk) runs
// the cells and speaks a framed protocol on the interpreter's stdin and
// stdout (see frame.go). A stateless call starts an interpreter, runs one
// cell and kills it; a stateful session keeps its interpreter between calls.
//
// What it stops: a cell that runs forever, burns CPU or eats memory holds
// only its own session — the wall timeout, the per-execution CPU time
// (measured on the execution cgroup, so children count) and the memory
// limit kill the interpreter's tree and report that the session's state is
// lost; the next call starts a fresh interpreter under the same id. A key
// sees only its own sessions (others' ids are "not found"), holds at most
// a bounded number of them, and idle sessions expire. Output kept in
// server memory is capped per stream, and messages from the driver are
// capped in size.
//
// What it does not stop: anything the sandbox lets code do. The driver
// runs inside the sandbox as the sandbox user and is not a boundary; code
// that tampers with it can only break its own session.
package coderun
