package sandbox

import (
	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/sandbox/hostids"
)

// hostIDFiles are the local files that name host ids (hostids.Files).
var hostIDFiles = hostids.Files

// checkHostIDs refuses a host where a local account, group or subordinate
// range falls among the sandboxes' host ids [idBase, idBase +
// maxSlots·IDRange) (hostids.Check).
func checkHostIDs(files []string) error {
	return hostids.Check(files, uint64(idBase), uint64(idBase)+uint64(maxSlots)*agent.IDRange)
}
