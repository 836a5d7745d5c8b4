package store

// The audit chain's anchors in the store.
//
// Both back ends keep the chain's head (the seq and hash of its last record)
// in a one-row table, audit_head, moved inside the transaction that appends
// the records. The audit package checks it against the chain and against
// the head file in the data dir: the two anchors are kept in different
// places, so emptying the records and one anchor still leaves the other
// naming the lost end.
//
// The head moves only while it agrees with the last record (both empty, or
// the same seq and hash): once records were cut off the end or the head was
// edited, it stays where it was, so later appends cannot hide the damage.
// Triggers refuse to delete the row or move it back (a DELETE, a TRUNCATE
// or an UPDATE to a lower seq fails). On SQLite anyone who can write the
// file can drop them; on PostgreSQL the table and its trigger function can
// belong to a role other than the one sandhold connects as, which then
// cannot remove or rewind the row at all (PostgresAnchorGuard).

// AuditHead is the sealed end of the audit chain as the store keeps it.
// Seq 0 (with an empty Hash) is an empty chain.
type AuditHead struct {
	Seq  int64
	Hash string
}

// headAgrees reports whether a head may move on from the last record:
// it names that record, or both are empty.
func headAgrees(h AuditHead, last AuditRecord, ok bool) bool {
	if !ok {
		return h.Seq == 0 && h.Hash == ""
	}
	return h.Seq == last.Seq && h.Hash == last.Hash
}
