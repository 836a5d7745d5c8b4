// Package cgroup puts every sandbox, and every execution inside a sandbox,
// into its own control group, with a v1 back end (separately or co-mounted
// hierarchies, as on this project's CI hosts) and a v2 back end (the unified
// hierarchy of Kubernetes nodes), detected at start.
//
// # What it stops
//
// A sandbox's code can try to take the host down by resource exhaustion: a
// fork bomb (pids.max), a memory balloon (memory limit with swap off, so the
// OOM killer acts inside the group instead of the host swapping to death), a
// busy loop on every core (CPU quota). The freezer pauses a sandbox
// atomically (pause/resume, HALT), and group kill ends every process of a
// group, including ones that double-forked and called setsid to leave their
// parent's process group and session: a cgroup cannot be left by forking.
//
// # Why per-execution sub-groups
//
// A sandbox is one long-lived init with many executions under it. Process
// groups, sessions and parent links are all under the control of the
// sandboxed code, so "kill this execution's tree" can only be done reliably
// by membership that the code cannot shed: each execution gets its own
// sub-group (Group.Sub) below the sandbox's group. Killing that sub-group on
// a timeout, a client disconnect or a HALT ends that execution's whole tree,
// setsid'd grandchildren included, and leaves the init and the sandbox's
// other executions running. The sub-group also gives per-execution CPU
// usage, and, where it is a memory group of its own, per-execution OOM
// accounting (sandhold's are not, on v1: see below; an OOM kill is then
// counted in the sandbox's group). Limits are hierarchical: a sub-group
// can never use more than its sandbox.
//
// # The thread-attach trick (v1) and CLONE_INTO_CGROUP (v2)
//
// The init runs as uid 0 of a user namespace, mapped to an unprivileged host
// uid, and cannot normally write the host's cgroup files. To start an
// execution directly inside its sub-group, without a window in which the new
// process runs in the sandbox's group, the server opens the sub-group's
// `tasks` files itself (Group.OpenThreadAttach, opened O_WRONLY by host
// root) and passes the descriptors to the init. The init locks a goroutine
// to its OS thread, writes "0" (the writing thread itself) through each
// descriptor (which moves only that one thread, in every hierarchy),
// forks/execs the command (the child is born in the cgroups of the forking
// thread), then writes "0" to its own group's `tasks` descriptors to move
// the thread back.
//
// This works because cgroup v1 checks the credentials saved when the file
// was OPENED, not those of the writer: kernel/cgroup/cgroup-v1.c
// __cgroup1_procs_write (shared by the `tasks` and `cgroup.procs` writers)
// does
//
//	cred = of->file->f_cred;
//	tcred = get_task_cred(task);
//	if (!uid_eq(cred->euid, GLOBAL_ROOT_UID) && !uid_eq(cred->euid, tcred->uid) && ...)
//		ret = -EACCES;
//
// since commit 1756d7994ad8 ("cgroup: Use open time credentials for process
// migraton perm checks", January 2022, backported to the stable trees; the
// same commit made the v2 writer use the opener's credentials), which closed
// the hole where an unprivileged process wrote through an fd inherited from
// a privileged one. Here we rely on the same rule deliberately: the fd was
// opened by global root, so the write is allowed whoever performs it. A TID
// written would be looked up in the WRITER's pid namespace
// (cgroup_procs_write_start → find_task_by_vpid); "0" names the writing
// thread with no lookup (and, since Linux 5.18, moves it without the global
// threadgroup lock that a TID write takes).
//
// The init must lock the goroutine to its thread (runtime.LockOSThread)
// before moving it: the Go runtime then starts new threads from a
// template thread, never by cloning the locked one, so no runtime thread
// inherits the execution's group (tested: threads started while the
// locked thread sits in a sub-group stay out of it). If moving the thread
// back fails, the goroutine must exit without unlocking, so the thread
// dies instead of returning to the scheduler from inside the sub-group.
//
// On v2 the same is done with clone3(CLONE_INTO_CGROUP) and an O_PATH
// descriptor of the directory the sub-group's processes live in (see the
// v2 layout below); OpenThreadAttach returns that descriptor instead. Unlike v1, v2
// checks the CALLER's permission on the common ancestor's cgroup.procs and
// the caller's cgroup namespace, so on v2 the sandbox group must be
// delegated to the init's mapped root (Group.Delegate).
//
// # What v1 does not protect (read before using it)
//
//   - A descriptor from OpenThreadAttach lets whoever holds it move ANY task
//     it can name in its pid namespace into that group, with host-root
//     authority. The init must keep these descriptors O_CLOEXEC, never pass
//     them to an execution, and close them when done.
//   - v1 has no delegation model. Delegate chowns the directory and its
//     tasks/cgroup.procs so a user-namespace root can create child groups and
//     move its own tasks, but a process running as that root (sudo: true) can
//     also move itself from its execution's sub-group back into the sandbox's
//     group and so escape a per-execution kill. It cannot leave the sandbox's
//     group (limits and sandbox-wide kill still hold) because the directories
//     above are root-owned. Never mount cgroupfs writable inside a sandbox.
//   - Memory is charged to a process's mm owner, not to the thread: while
//     the init's forking thread sits in an execution's group, its allocations
//     still count against the init's group; the forked child (new mm) is
//     charged to the execution's group. pids.current does count the visiting
//     thread, and pids.max never refuses an attach (only a fork).
//   - cgroup.procs in v1 lists a process if ANY of its threads is in the
//     group. Kill therefore skips a process that has live threads outside
//     the group being killed (the init's thread visiting during a fork) and
//     waits for it to leave; it never kills the visitor.
//   - With swappiness 0 and memsw set, a v1 group cannot swap; when the host
//     has no swap accounting (no memory.memsw.* files) the memory limit still
//     holds but global reclaim may swap the group's pages.
//   - The cpuset, devices, blkio, net_cls hierarchies are not used: sandboxes
//     inherit the server's groups there.
//
// # Groups without memory and CPU groups of their own (v1)
//
// Each v1 memory group costs the kernel far more than a group of the other
// controllers: besides its own counters it carries per-shrinker state (a
// shrinker_info of about 1 KB per 64 shrinker ids the host ever
// registered; every mounted file system registers one), so on a host that
// mounts a few file systems per sandbox each new memory group costs more
// than the last. A CPU group carries scheduler state per CPU. Group.
// SubSharingLimits makes a child that is in the pids, cpuacct and freezer
// hierarchies but not in the memory one, nor in a cpu hierarchy of its
// own: its tasks stay in its nearest ancestor's memory and CPU groups,
// which limit them, account them and OOM-kill among them (the limits are
// hierarchical, so nothing is lost: the ancestor's limits already covered
// the child). AddProc on such a group also puts the process in those
// groups, so nothing it holds is charged elsewhere. What is lost is only
// per-child memory figures: the child's Stats leave them zero
// (MemoryShared), and an OOM kill among its tasks is counted in the
// ancestor's oom_kill; CPU time stays per child (cpuacct). This needs the
// memory controller in a hierarchy of its own or with cpu only (the usual
// v1 mounts); a cpu hierarchy co-mounted with cpuacct is kept. Elsewhere
// SubSharingLimits is Sub.
//
// On v2 a child is in every controller its parent's cgroup.subtree_control
// enables, for all its siblings alike. The same cut there would enable
// only pids in the sandbox group's subtree_control, so that neither the
// init's leaf nor user nor the execution groups are memory or CPU groups,
// and the sandbox group's memory.max, cpu.max and memory.events
// (hierarchical on v2) cover them; CPU time per execution would come from
// cpu.stat, which v2 keeps in every group. That is the right shape, but
// it is not built: this project's hosts are v1 and an untested v2 change
// to the sealing step would be a guess. On v2 SubSharingLimits is Sub.
//
// # v2 layout
//
// v2 forbids processes in a group that distributes controllers to its
// children ("no internal processes"). A group therefore starts unsealed:
// its processes live in it directly, so an init cloned into it with
// clone3(CLONE_INTO_CGROUP|CLONE_NEWCGROUP) gets the group itself as its
// cgroup namespace root (kernel/cgroup/cgroup.c cgroup_post_fork sets the
// new namespace's root_cset to the child's final css_set). The first Sub
// seals it: its processes move into a leaf child ".procs" (user names
// cannot contain a dot), then memory, pids and cpu are enabled for its
// children. The init keeps its namespace root, so its execution groups lie
// inside its namespace, as CLONE_INTO_CGROUP from inside requires. If the
// server's own cgroup holds processes and does not yet distribute the
// controllers, New moves those processes into a leaf named "server" first
// (what container runtimes do in a delegated pod cgroup).
//
// On v1 the same flow gives the same view: a child is born in its parent
// thread's cgroups, so the init must enter its group before creating its
// cgroup namespace (unshare after AddProc, or the thread trick on the
// server side before clone with CLONE_NEWCGROUP).
package cgroup
