// Package shell runs the interactive side of a sandbox: PTY shell sessions
// that keep their working directory and environment between commands (AIO's
// /v1/shell), live terminals over WebSocket, and the bash pipe (AIO's
// /v1/bash): one process per command with separate stdout and stderr read by
// byte offsets.
//
// Every process runs inside a sandbox through sandbox.Spawn, in an execution
// group of its own, so the sandbox's isolation and limits apply; this package
// adds what a terminal needs on top and bounds what the server keeps:
//
//   - Command completion in a PTY session is detected by a marker the shell's
//     PROMPT_COMMAND prints after every command line: an ASCII record
//     separator, a per-session random nonce, the command id, the exit status
//     and the working directory, then a unit separator. Commands are sent as
//     ANSI-C quoted strings made only of printable ASCII (so no control byte of
//     the caller's reaches the terminal's line discipline) and evaluated by
//     the session shell, so cd and export persist. Output is never parsed for
//     anything else.
//   - A command past its hard timeout gets SIGINT and SIGKILL in turn, sent to
//     the terminal's foreground process group (a program that ignores SIGTERM
//     and SIGINT dies all the same; a builtin loop of the shell itself gets
//     SIGINT); if the shell does not report the command ended, the whole
//     session is killed. Signals are sent from the host to pidfds of the
//     execution group's members (see sandbox.Proc.Signal), never to a pid
//     outside it.
//   - Programs start through env --default-signal: the sandbox's init
//     ignores SIGINT, SIGTERM, SIGPIPE and others for itself, and ignored
//     signals would otherwise survive into every program.
//   - Output memory is bounded per session and per command (process.Output
//     keeps a head and a tail and counts the rest).
//   - A live terminal gets output through a small channel that the PTY reader
//     blocks on when it is full: a client that does not read applies
//     backpressure to the PTY (the program in the sandbox blocks on write),
//     never to server memory.
//   - Sessions belong to the key that made them; other keys' sessions are
//     invisible (not found). Idle sessions expire; revoking a key ends its
//     terminals and sessions.
package shell
