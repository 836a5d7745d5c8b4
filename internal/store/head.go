package store

import "context"

// AuditHeadStore is a Store that keeps the audit chain's head (the seq and
// hash of the last sealed record) itself, moved inside the AppendAudit
// transaction, instead of leaving that to a file beside the database. The
// audit package uses it when the store offers it; the PostgreSQL back end
// does, because several nodes share one chain and no node's data dir can hold
// its head.
//
// The head moves only while it agrees with the last record (both empty, or
// the same seq and hash): once records were cut off the end or the head was
// edited, it stays where it was, so later appends cannot hide the damage.
type AuditHeadStore interface {
	Store
	// AuditHead returns the head as stored. ok=false when there is none:
	// an empty chain, or the head was removed.
	AuditHead(ctx context.Context) (h AuditHead, ok bool, err error)
}

// AuditHead is the sealed end of the audit chain.
type AuditHead struct {
	Seq  int64
	Hash string
}
