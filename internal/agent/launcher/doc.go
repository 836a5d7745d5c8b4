// Package launcher is the launcher: the small process that clones every
// sandbox's init for the server, and how an init is cloned (SysProcAttr,
// AsOwner), which the server also uses when it clones one itself. It is
// the init program started in another mode (argv[0] Name); it links no
// server code and none of the init's (TestEachSideLinksOnlyItsOwn).
//
// Why it exists: an init is started in a new user namespace, so Go's
// fork/exec cannot share the parent's memory (CLONE_VM|CLONE_VFORK): the
// parent writes the id maps while the child waits. Done by the server,
// every cold create copied the whole server's page tables under its mm
// lock, and every page either side wrote afterwards faulted again. The
// launcher is a small process (the init program in another mode, started
// once) that does that clone instead; copying its few pages is cheap.
//
// Supervision stays with the server: the launcher clones with
// CLONE_PARENT, so each init is the server's child (its real parent is the
// one server thread that started the launcher), the server reaps it and
// sees its exit status, and the init's Pdeathsig fires when that thread —
// or the server — ends. The thread is locked for the launcher's life and
// only ends when the launcher is closed, so it never ends by accident. The
// launcher itself dies with the server (its own Pdeathsig) and is started
// again on the next launch if it died. Only the server can talk to it: its
// one socket is inherited, it has no path. It keeps no descriptor of a
// sandbox once the launch is answered.
//
// A launch that fails after the clone (the child's exec failed, the
// launcher died mid-request) would leave an exited child the server never
// learned about; after every failed launch the server kills and reaps each
// child of its launcher thread that is neither a launcher nor a known init
// (sweep), so no zombie or stray init outlives a failure.
//
// The server's side (the Launcher type, starting the process, the sweep,
// supervising inits through their pidfds) is package agent's.
package launcher
