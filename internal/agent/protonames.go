package agent

import (
	"github.com/sandhold/sandhold/internal/agent/launcher"
	"github.com/sandhold/sandhold/internal/agent/proto"
)

// The protocol's names that the server's packages use through package
// agent. The messages live in package proto, shared with the in-sandbox
// init; these keep the callers' spelling while they move to proto (a
// caller that names proto directly needs none of them).

type (
	Deny         = proto.Deny
	Error        = proto.Error
	Exit         = proto.Exit
	FileReq      = proto.FileReq
	FileResp     = proto.FileResp
	GrepReq      = proto.GrepReq
	KernelLimits = proto.KernelLimits
	Layer        = proto.Layer
	Limits       = proto.Limits
	Op           = proto.Op
	RootSetup    = proto.RootSetup
	Setup        = proto.Setup
	SpawnReq     = proto.SpawnReq
	Stat         = proto.Stat
	TransferReq  = proto.TransferReq
	WalkReq      = proto.WalkReq
	WalkResp     = proto.WalkResp
)

const (
	CodeInvalid             = proto.CodeInvalid
	CodeNotRegular          = proto.CodeNotRegular
	CodePTYHost             = proto.CodePTYHost
	CodePTYLimit            = proto.CodePTYLimit
	DefaultInotifyInstances = proto.DefaultInotifyInstances
	DefaultMaxPTYs          = proto.DefaultMaxPTYs
	DefaultSigPending       = proto.DefaultSigPending
	EgressPort              = proto.EgressPort
	MaxGrepContext          = proto.MaxGrepContext
	MaxPath                 = proto.MaxPath
	MaxPatternLen           = proto.MaxPatternLen
	MaxWalkDepth            = proto.MaxWalkDepth
	MaxWalkResults          = proto.MaxWalkResults
	OpDial                  = proto.OpDial
	OpGrep                  = proto.OpGrep
	OpMkdir                 = proto.OpMkdir
	OpOpen                  = proto.OpOpen
	OpOpenRead              = proto.OpOpenRead
	OpReadDir               = proto.OpReadDir
	OpReadlink              = proto.OpReadlink
	OpRemove                = proto.OpRemove
	OpRename                = proto.OpRename
	OpResolve               = proto.OpResolve
	OpStat                  = proto.OpStat
	OpSymlink               = proto.OpSymlink
	OpWalk                  = proto.OpWalk
)

// IDRange is the size of each sandbox's user and group id mapping: ids
// 0..IDRange-1 inside map to LaunchSpec.HostUID.. on the host.
const IDRange = launcher.IDRange

// CheckPath is proto.CheckPath.
func CheckPath(p string) error { return proto.CheckPath(p) }

// CheckPatterns is proto.CheckPatterns.
func CheckPatterns(lists ...[]string) error { return proto.CheckPatterns(lists...) }

// HardLinked is proto.HardLinked.
func HardLinked(p string, mode uint32, nlink uint64) bool { return proto.HardLinked(p, mode, nlink) }

// MatchName is proto.MatchName.
func MatchName(globs []string, name, rel string) bool { return proto.MatchName(globs, name, rel) }

// WritableTree is proto.WritableTree.
func WritableTree(p string) string { return proto.WritableTree(p) }
