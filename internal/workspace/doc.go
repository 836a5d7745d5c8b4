// Package workspace is the file API of a sandbox: read, write, replace,
// search, find, grep, glob, list, the str_replace_editor tool and file
// watches, in the shapes of AIO Sandbox's /v1/file routes, each a
// dispatcher tool (file.read, file.write, …).
//
// What it stops: a file call that reaches outside the sandbox's view or
// into a sensitive file. Every path is resolved INSIDE the sandbox by its
// init (internal/agent: the kernel's openat2 with RESOLVE_NO_MAGICLINKS in
// the sandbox's mount namespace, with the sandbox user's filesystem ids),
// never by joining strings on the host. The order of every call is:
//
//  1. validate the path as text (absolute, no NUL, no "." or ".."
//     components, at most PATH_MAX) — before any round trip;
//  2. resolve it in the sandbox (agent.OpResolve): the kernel's name for
//     the file, or for a missing one its resolved parent plus the base name
//     (a dangling symlink is followed by hand);
//  3. check the sensitive-path policy on that resolved name — before the
//     call looks at whether the file exists, so the answer for a forbidden
//     path is the same whether or not it exists;
//  4. act on the resolved name with RESOLVE_NO_SYMLINKS: a symlink swapped
//     into the path after step 2 makes the call fail, it cannot redirect it.
//
// Writes are atomic: a temporary file is created beside the target with
// O_CREAT|O_EXCL, written, fsynced and renamed over the target (and the
// directory fsynced), so a crash leaves the old or the new content, never a
// torn file; renaming replaces the name, so a hard link to the target
// keeps its old content. Reads refuse anything but regular files (a fifo
// swapped in cannot block the init) and hard-linked files in the writable
// trees (a second name for a sensitive file must not launder it).
//
// What it does not stop: the sandbox user reading or writing what that user
// may — the sandbox (namespaces, landlock, the read-only system tree) is the
// boundary; this package adds the policy and the caps on top. The policy
// matches names, so a sensitive file copied under an innocent name (with
// the shell) is not recognised.
package workspace
