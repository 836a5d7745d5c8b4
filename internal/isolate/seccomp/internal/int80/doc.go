// Package int80 makes a system call through the 32-bit entry (int $0x80)
// from 64-bit code. It exists so the seccomp tests can show that this
// other syscall table, whose numbers mean different calls (20 is getpid
// there but writev on x86-64), is refused by the filter's architecture
// check. Test use only.
package int80
