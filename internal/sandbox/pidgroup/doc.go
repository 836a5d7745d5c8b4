// Package pidgroup pins the processes of a sandbox's execution group by
// pidfd, so that a signal sent from the host reaches only processes still
// in the group: a pid that died and was reused between listing and
// signalling is never hit. It reads each process's host process group and
// its pid inside the sandbox from /proc. Linux only (pidfds).
package pidgroup
