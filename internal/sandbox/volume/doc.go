// Package volume holds a sandbox's workspace file system: the ext4 image
// of exactly its quota's size (made from a pre-formatted template of that
// size, else by mkfs.ext4), attached to a loop device and mounted detached;
// the read-only lower and the id-mapped overlay of a layered fork; and the
// image operations of snapshots (clones, id shifts). It knows nothing of
// sandboxes: package sandbox passes it paths, sizes and ids.
//
// The workspace quota (SANDBOX_MAX_DISK, a sandbox's limits.disk) is
// enforced by the kernel: every sandbox's /workspace is its own ext4 file
// system, made in a sparse image file of exactly the quota's size inside the
// sandbox's (root-only) workspace directory on the host, attached to a loop
// device and mounted DETACHED (fsopen/fsmount): the mount never appears in
// the host's mount namespace. The server holds the mount's descriptor for the
// sandbox's life and hands each init start a clone of it (open_tree), which
// the init attaches at /workspace. No write, by any path — uploads, archive
// extraction, a shell's `dd` — can exceed the file system's size, and no
// accounting can be raced: a full disk is ENOSPC from the kernel.
//
// Lifetime: the loop device is configured with LO_FLAGS_AUTOCLEAR, so it
// detaches by itself when the last user of the file system goes away; the
// server's descriptor and the inits' mount namespaces are the only users, so
// when the server exits (or crashes) the kernel unmounts and detaches
// everything — no mount or loop device can outlive the server. The image is
// mounted once per server run (never once per init start), because two
// superblocks on one image would corrupt it; at start the manager checks that
// no loop device from a previous run still holds an image (reapVolumes).
//
// The file system has no journal (no jbd2 thread per sandbox; a host crash
// may leave it unclean, and an unclean image is checked with e2fsck -p
// before its next mount), no reserved blocks, lazily initialised inode
// tables that are never zeroed (the image is sparse, so they read as zero),
// and is mounted nosuid,nodev with online discard, so deleted files give
// their blocks back to the host, and without the prefetch of every block
// group's bitmap (memory an idle sandbox would keep).
package volume
