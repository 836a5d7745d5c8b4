//go:build !linux

package snapkeep

// CollectLowers: no lower layers outside Linux.
func (k *Keep) CollectLowers() {}

// LowerUsage: no lower layers outside Linux.
func (k *Keep) LowerUsage() int64 { return 0 }
