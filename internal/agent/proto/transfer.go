package proto

import "github.com/sandhold/sandhold/internal/archive/spec"

// The transfer ops (sandboxinit/extract_linux.go): archives are unpacked and packed
// inside the sandbox, by the extractor program the init runs as its child
// for each request (like a command, as the sandbox user), so the archive
// code only ever sees the sandbox's view through an *os.Root, and the
// init itself links no archive code. Archive bytes travel as descriptors:
// the archive to extract is attached to the request (a regular file, read
// twice), and the pipe a packed archive is written to likewise; the
// extractor program (Extractor) is attached after it.
const (
	// OpExtract unpacks the attached archive into Transfer.Path.
	OpExtract Op = "extract"
	// OpPack writes the tree under Transfer.Path to the attached pipe.
	OpPack Op = "pack"
	// OpStatFS reports the size and free space of the file system holding
	// Transfer.Path (the workspace quota).
	OpStatFS Op = "statfs"
)

// TransferReq is the argument of the transfer ops.
type TransferReq struct {
	// Path is the destination directory (extract), the directory to pack,
	// or any path on the file system to measure (statfs).
	Path   string      `json:"path"`
	Format spec.Format `json:"format,omitempty"`
	// Limits are the caps; for extract, MaxTotalBytes is lowered further
	// by the init to the free space of the destination's file system.
	Limits spec.Limits `json:"limits"`
	// Deny is the sensitive-path policy: pack refuses a tree holding a
	// denied name (it would otherwise carry the file out).
	Deny Deny `json:"deny"`
	// CgroupFDs and HomeFDs (extract, pack) count the execution group's
	// and the sandbox's own cgroup files attached after the archive and
	// the program, as SpawnReq's: the extractor then starts in that
	// execution group like a command; with none it stays in the
	// sandbox's own groups. Set by ExtractIn and PackIn.
	CgroupFDs int `json:"cgroup_fds,omitempty"`
	HomeFDs   int `json:"home_fds,omitempty"`
}

// Refusal is an archive refusal as it crosses the protocol.
type Refusal struct {
	Entry  string    `json:"entry,omitempty"`
	Reason string    `json:"reason"`
	Kind   spec.Kind `json:"kind"`
	Detail string    `json:"detail,omitempty"`
}

// TransferResp is the reply to a transfer op.
type TransferResp struct {
	Result spec.Result `json:"result"`
	// Refused is set when the archive code refused (nothing was written).
	Refused *Refusal `json:"refused,omitempty"`
	// Total and Free are statfs's answer in bytes (free: available to the
	// sandbox user).
	Total int64 `json:"total,omitempty"`
	Free  int64 `json:"free,omitempty"`
}
