#include "textflag.h"

// keeperEntry is the program's ELF entry point when it is linked with
// -ldflags '-E main.keeperEntry' (the Makefile does on amd64). It runs
// before the Go runtime, on the stack the kernel built: argc at 0(SP),
// argv from 8(SP), then envp.
//
// Started as "sandhold-keeper" (argv[0]) it is the sleeping sandbox init
// (internal/agent/sleep_linux.go): it makes itself non-dumpable, asks for
// SIGKILL when its parent dies, names itself, and waits in ppoll, with no
// timeout, on the protocol socket (descriptor 3) and, as
// "sandhold-keeper+", on the egress listener (descriptor 4). On any event
// on either (a message, a connection, the server hanging up) it executes
// descriptor 5, the init's own sealed memfd, with argv[1:] and the same
// environment: the Go init resumes and reads what woke it. The resumed
// init's state (a sealed memfd, the descriptor argv[2] names) is only
// carried across. Anything that fails ends the process with status 127:
// the server then sees its init die (fail closed).
//
// Any other argv[0] is the Go program: the entry marks that it ran
// (goEntered, so the init knows a keeper is linked) and jumps to the Go
// runtime's usual start.
TEXT ·keeperEntry(SB),NOSPLIT|NOFRAME,$0
	MOVQ	0(SP), R12		// argc
	CMPQ	R12, $2
	JLT	gort
	MOVQ	8(SP), SI		// argv[0]
	LEAQ	keeperName<>(SB), DI
	MOVQ	$15, CX
cmp:
	MOVB	(SI), AX
	MOVB	(DI), BX
	CMPB	AX, BX
	JNE	gort
	INCQ	SI
	INCQ	DI
	DECQ	CX
	JNZ	cmp
	MOVQ	$-1, R15		// the second descriptor: none (ppoll skips it)
	MOVB	(SI), AX
	CMPB	AX, $0
	JEQ	keep
	CMPB	AX, $'+'
	JNE	gort
	MOVB	1(SI), AX
	CMPB	AX, $0
	JNE	gort
	MOVQ	$4, R15			// the egress listener
keep:
	// prctl(PR_SET_DUMPABLE, 0): execve made the process dumpable again.
	MOVQ	$157, AX
	MOVQ	$4, DI
	XORQ	SI, SI
	XORQ	DX, DX
	XORQ	R10, R10
	XORQ	R8, R8
	SYSCALL
	CMPQ	AX, $0
	JNE	fail
	// prctl(PR_SET_PDEATHSIG, SIGKILL): the exec ran on a thread other
	// than the one the launcher set it on.
	MOVQ	$157, AX
	MOVQ	$1, DI
	MOVQ	$9, SI
	SYSCALL
	CMPQ	AX, $0
	JNE	fail
	// prctl(PR_SET_NAME, argv[0]): ps says what it is (truncated to 15).
	MOVQ	$157, AX
	MOVQ	$15, DI
	MOVQ	8(SP), SI
	SYSCALL
	// struct pollfd {int fd; short events, revents} × 2, below SP.
	MOVL	$3, -16(SP)
	MOVL	$0x19, -12(SP)		// POLLIN|POLLERR|POLLHUP, revents 0
	MOVL	R15, -8(SP)
	MOVL	$0x19, -4(SP)
poll:
	// ppoll(fds, 2, NULL, NULL, 8): no timeout, no mask change.
	MOVQ	$271, AX
	LEAQ	-16(SP), DI
	MOVQ	$2, SI
	XORQ	DX, DX
	XORQ	R10, R10
	MOVQ	$8, R8
	SYSCALL
	CMPQ	AX, $-4			// EINTR
	JEQ	poll
	CMPQ	AX, $0
	JLE	fail
	// execveat(5, "", argv+1, envp, AT_EMPTY_PATH)
	MOVQ	$322, AX
	MOVQ	$5, DI
	LEAQ	keeperName<>+15(SB), SI	// the name's NUL: an empty path
	LEAQ	16(SP), DX
	LEAQ	16(SP)(R12*8), R10	// envp = argv + argc + 1
	MOVQ	$0x1000, R8
	SYSCALL
fail:
	MOVQ	$231, AX		// exit_group(127)
	MOVQ	$127, DI
	SYSCALL
	JMP	fail
gort:
	MOVB	$1, ·goEntered(SB)
	JMP	_rt0_amd64_linux(SB)

DATA	keeperName<>+0(SB)/8, $"sandhold"
DATA	keeperName<>+8(SB)/8, $"-keeper\x00"
GLOBL	keeperName<>(SB), RODATA, $16
