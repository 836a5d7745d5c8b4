package daemon

import (
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"path/filepath"

	"github.com/sandhold/sandhold/internal/snapshot"
)

// openSnapshots opens the snapshot store: SANDBOX_SNAPSHOT_DIR, else the
// data dir's snapshots/. Exports are signed with a key kept in the store,
// or — in a cluster, whose nodes must accept each other's exports — one
// derived from SANDBOX_CLUSTER_SECRET.
func (d *Daemon) openSnapshots() (*snapshot.Store, error) {
	dir := d.cfg.SnapshotDir
	if dir == "" {
		dir = filepath.Join(d.cfg.DataDir, "snapshots")
	}
	var key []byte
	if d.cfg.ClusterSecret != "" {
		h := hmac.New(sha256.New, []byte(d.cfg.ClusterSecret))
		h.Write([]byte("sandhold snapshot export key"))
		key = h.Sum(nil)
	}
	st, err := snapshot.Open(dir, key)
	if err != nil {
		return nil, fmt.Errorf("snapshot store: %w", err)
	}
	return st, nil
}
