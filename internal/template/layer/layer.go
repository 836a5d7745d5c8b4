// Package layer turns an OCI image layer (an uncompressed tar stream) into a
// directory of the template store, in the on-disk form an overlay root
// stacks (internal/isolate/rootfs), and an overlay's upper directory back
// into a layer (a sandbox's commit).
//
// What it stops, with the server's privileges on the other side (it runs in
// the server, as root, on content a tenant chose): an entry written outside
// the layer's directory (`../` names, absolute names, a symlink planted by
// an earlier entry and written through, a hardlink to a file outside the
// layer), a device node, fifo or socket reaching the store, a setuid or
// setgid binary or a file capability (xattrs are never applied: neither
// security.capability nor user.overlay.* can be forged), owners outside the
// id range a sandbox maps, and exhaustion: entry counts, actual bytes
// written (counted, never taken from headers, and refused up front when a
// header already claims more), path depth and length. Every name is
// resolved below the layer's directory descriptor with openat2
// (RESOLVE_BENEATH, no symlinks, no mount crossings), so no name is ever
// joined onto a host path.
//
// Whiteouts are honoured: an OCI `.wh.NAME` entry becomes an overlay
// whiteout (a 0/0 character device, made by the server, the only device in
// the store) and `.wh..wh..opq` marks its directory opaque
// (user.overlay.opaque, what an overlay mounted with userxattr reads).
// A whiteout and the name it hides in the same layer is refused.
//
// What it does not do: symlink targets are stored as the image has them
// (absolute ones included); they are resolved only inside a sandbox, whose
// root is the overlay. Duplicate names are refused, but names equal up to
// case are not (Linux images have them: terminfo's E and e).
package layer

import (
	"github.com/sandhold/sandhold/internal/archive/spec"
)

// Limits are the caps of one layer. The zero value allows nothing.
type Limits struct {
	// MaxEntries caps the entries that create something (a file, a
	// directory, a link, a whiteout), directories implied by paths
	// included.
	MaxEntries int
	// MaxBytes caps the actual content bytes written.
	MaxBytes int64
	// MaxDepth and MaxPathLen cap a name's components and bytes (and a
	// link target's bytes).
	MaxDepth, MaxPathLen int
}

// DefaultLimits are generous for real images (a Debian root with Python
// is ≈ 10,000 entries and 150 MB) and refuse the bombs: 100,000 tiny
// files, a 10 GB sparse file.
func DefaultLimits() Limits {
	return Limits{MaxEntries: 65_536, MaxBytes: 4 << 30, MaxDepth: 64, MaxPathLen: 4096}
}

// Stats count what a layer holds.
type Stats struct {
	Entries   int   `json:"entries"`
	Bytes     int64 `json:"bytes"`
	Whiteouts int   `json:"whiteouts,omitempty"`
	// Stripped counts files whose setuid or setgid bit was removed.
	Stripped int `json:"stripped,omitempty"`
	// Skipped counts what a commit left out (sockets, fifos, the
	// workspace mount point).
	Skipped int `json:"skipped,omitempty"`
}

// IDRange is the range of ids a layer's owners may use: what a sandbox's
// user namespace maps (agent.IDRange). An owner outside it is stored as
// Nobody.
const IDRange = 65536

// Nobody is the owner given to files whose owner a sandbox cannot map.
const Nobody = 65534

// Names of the OCI whiteout forms.
const (
	whiteoutPrefix = ".wh."
	opaqueMarker   = ".wh..wh..opq"
	// OpaqueXattr marks an opaque directory in the store and in an
	// overlay's upper directory (userxattr mounts).
	OpaqueXattr = "user.overlay.opaque"
)

func refuse(entry, reason string, kind spec.Kind, detail string) *spec.Error {
	return &spec.Error{Entry: entry, Reason: reason, Kind: kind, Detail: detail}
}
