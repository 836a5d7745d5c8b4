// Package caps strips Linux capabilities from the sandbox init before it
// runs anything on a caller's behalf, on every thread of the process.
//
// What it stops: inside its user namespace the init is root with a full
// capability set over the sandbox's namespaces. Emptying the bounding set
// means no later execve can gain a capability — not a setuid-root binary,
// not file capabilities, not uid 0 with SANDBOX_ENABLE_SUDO — so commands
// cannot mount, change network configuration, load BPF, bypass file
// permissions (CAP_DAC_OVERRIDE) or reach the capability-gated kernel
// interfaces that namespace-root escapes go through. Clearing the ambient set
// stops capabilities being handed down to an unprivileged program; setting
// no_new_privs makes execve unable to grant anything (setuid bits and file
// capabilities are ignored) and is required by the seccomp and landlock
// layers.
//
// What it does NOT protect: the bounding set only limits what execve can
// add. The calling process keeps whatever is in its own permitted and
// effective sets until it drops them (the init does so after its setup, and
// commands start with an empty set once they run as a non-root uid or exec
// under an empty bounding set). Capabilities are relative to the user
// namespace: this package does not change which namespace owns what.
// Descriptors already open keep their access.
package caps
