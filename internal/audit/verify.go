package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sandhold/sandhold/internal/store"
)

// Result is the outcome of Verify.
type Result struct {
	OK bool `json:"ok"`
	// Records is how many records were checked (the stored ones: those
	// archived by retention are proven by the archive's anchor).
	Records int64 `json:"records"`
	// HeadSeq and HeadHash are the chain's last record as verified.
	HeadSeq  int64  `json:"head_seq"`
	HeadHash string `json:"head_hash"`
	// ArchivedThrough is the last record moved to an archive (0: none);
	// the stored chain starts after it, linked by the archive's anchor.
	ArchivedThrough int64 `json:"archived_through,omitempty"`
	// FirstBad is the first seq found wrong (missing, edited, out of
	// order, or cut off), 0 when OK.
	FirstBad int64 `json:"first_bad,omitempty"`
	// Problem says what is wrong, empty when OK; when an anchor
	// disagrees, it names the anchor.
	Problem string `json:"problem,omitempty"`
	// Anchors are the places that keep the chain's head, as found.
	Anchors []Anchor `json:"anchors"`
}

// Anchor is one place that keeps the chain's head, as Verify found it.
type Anchor struct {
	// Name is AnchorStore or AnchorFile.
	Name string `json:"name"`
	Seq  int64  `json:"seq"`
	Hash string `json:"hash,omitempty"`
	// State is one of the Anchor* states below.
	State string `json:"state"`
	// Guarded (the store's anchor): whether the role the server connects
	// as is kept from deleting or rewinding it; Guard says why (not).
	Guarded *bool  `json:"guarded,omitempty"`
	Guard   string `json:"guard,omitempty"`
}

// Anchor names.
const (
	AnchorStore = "store (audit_head)"
	AnchorFile  = "head file (audit.head)"
)

// Anchor states. Only the first two are good.
const (
	AnchorAgrees = "agrees"
	// AnchorNotYet: a cluster node's head file before the node's first
	// append (it anchors only what the node saw).
	AnchorNotYet    = "not yet written"
	AnchorMissing   = "missing"
	AnchorMalformed = "malformed"
	AnchorAhead     = "ahead of the records"
	AnchorMismatch  = "does not match its record"
	AnchorBehind    = "behind"
)

// Verify walks the whole chain and checks it against both anchors.
// Tampering is reported in the Result (OK=false); an error means the check
// itself could not run. Posted records still waiting are committed first.
func (l *Log) Verify(ctx context.Context) (Result, error) {
	l.Flush()
	l.mu.Lock()
	defer l.mu.Unlock()
	// The anchors are read first, the file before the store's (the
	// store's moves first, in the transaction): records appended by
	// another process while we scan are then simply past them.
	fa, haveFile, ferr := l.readHead()
	if ferr != nil && !errors.Is(ferr, errMalformedHead) {
		return Result{}, ferr
	}
	sh, haveStore, err := l.st.AuditHead(ctx)
	if err != nil {
		return Result{}, err
	}
	guard, err := l.st.AuditHeadGuard(ctx)
	if err != nil {
		return Result{}, err
	}
	v := verifier{prevHash: GenesisHash, fileSeq: -1, storeSeq: -1}
	if haveFile && ferr == nil {
		v.fileSeq, v.fileHash = fa.seq, fa.hash
	}
	if haveStore {
		v.storeSeq, v.storeHash = sh.Seq, sh.Hash
	}
	err = l.st.ScanAudit(ctx, v.record)
	if err != nil && !errors.Is(err, errStop) {
		return Result{}, err
	}
	if errors.Is(err, errStop) {
		// The chain breaks before its end: the anchors cannot be
		// checked against it.
		return v.brokenResult(fa, haveFile, ferr, sh, haveStore, guard), nil
	}
	res := v.res
	res.HeadSeq, res.HeadHash = v.prevSeq, v.prevHash
	if v.base > 0 && res.Problem == "" {
		if !v.baseProven {
			res.FirstBad = v.anchoredThrough + 1
			res.Problem = fmt.Sprintf("records %d..%d are missing (no archive anchor in the chain covers them)", v.anchoredThrough+1, v.base)
		}
		res.ArchivedThrough = v.base
	}

	// The store's anchor: it must name the last record (it moves in the
	// append's transaction). One that names an earlier record may only
	// have been passed by appends during the scan: read it again.
	st := Anchor{Name: AnchorStore, Seq: sh.Seq, Hash: sh.Hash, Guarded: &guard.Guarded, Guard: guard.Why}
	switch {
	case !haveStore:
		st.State = AnchorMissing
		res.fail(v.prevSeq, "the store's anchor (audit_head) is missing")
	case (sh.Seq == 0) != (sh.Hash == "") || (sh.Seq > 0 && len(sh.Hash) != 64) || sh.Seq < 0:
		st.State = AnchorMalformed
		res.fail(v.prevSeq, "the store's anchor (audit_head) is malformed")
	case res.judgeEnd(&st, "the store's anchor (audit_head)", v.prevSeq, v.storeMismatch):
	case sh.Seq < v.prevSeq:
		now, ok, err := l.st.AuditHead(ctx)
		if err != nil {
			return Result{}, err
		}
		if ok && now.Seq >= v.prevSeq {
			st.State = AnchorAgrees
			break
		}
		st.State = AnchorBehind
		if sh.Seq == 0 {
			res.fail(1, fmt.Sprintf("the store's anchor (audit_head) was reset to an empty chain, but the chain goes on to record %d", v.prevSeq))
			break
		}
		res.fail(sh.Seq+1, fmt.Sprintf("the store's anchor (audit_head) names record %d, but the chain goes on to record %d (the anchor stopped moving: the chain was changed after record %d)", sh.Seq, v.prevSeq, sh.Seq))
	default:
		st.State = AnchorAgrees
	}

	// The head file: it may lag (a crash before its write; other nodes'
	// appends), never lead.
	fl := Anchor{Name: AnchorFile, Seq: fa.seq, Hash: fa.hash}
	chainEmpty := v.prevSeq == 0
	switch {
	case errors.Is(ferr, errMalformedHead):
		fl.State = AnchorMalformed
		res.fail(v.prevSeq, "the head file is malformed")
	case !haveFile && (chainEmpty || l.shared):
		fl.State = AnchorNotYet
	case !haveFile:
		fl.State = AnchorMissing
		res.fail(v.prevSeq, "the head file is missing")
	case res.judgeEnd(&fl, "the head file", v.prevSeq, v.fileMismatch):
	case haveStore && fa.seq > sh.Seq:
		fl.State = AnchorAgrees
		st.State = AnchorBehind
		res.fail(sh.Seq+1, fmt.Sprintf("the store's anchor (audit_head) names record %d, behind the head file's record %d", sh.Seq, fa.seq))
	case fa.seq <= v.base || v.fileMatched:
		fl.State = AnchorAgrees
	default:
		// Inside the stored range but never met: a gap the scan
		// already reported.
		fl.State = AnchorMismatch
		res.fail(fa.seq, fmt.Sprintf("record %d, named by the head file, is not stored", fa.seq))
	}
	res.Anchors = []Anchor{st, fl}
	res.OK = res.Problem == ""
	return res, nil
}

// judgeEnd judges what both anchors may get wrong alike: naming records
// past the chain's end (truncation), or a record whose hash differs. It
// reports whether it found either.
func (r *Result) judgeEnd(a *Anchor, label string, end int64, mismatch bool) bool {
	switch {
	case a.Seq > end:
		a.State = AnchorAhead
		r.fail(end+1, fmt.Sprintf("records %d..%d are missing (log truncated): %s names record %d", end+1, a.Seq, label, a.Seq))
	case mismatch:
		a.State = AnchorMismatch
		r.fail(a.Seq, fmt.Sprintf("record %d does not match %s", a.Seq, label))
	default:
		return false
	}
	return true
}

// fail records a problem: the one at the lowest seq is reported (the
// first found of those at the same seq).
func (r *Result) fail(seq int64, problem string) {
	seq = max(seq, 1)
	if r.Problem != "" && r.FirstBad <= seq {
		return
	}
	r.FirstBad, r.Problem = seq, problem
}

// brokenResult is Verify's answer when the scan stopped at a bad record:
// the anchors are reported as found, not checked.
func (v *verifier) brokenResult(fa head, haveFile bool, ferr error, sh store.AuditHead, haveStore bool, guard store.HeadGuard) Result {
	res := v.res
	res.HeadSeq, res.HeadHash = v.prevSeq, v.prevHash
	unchecked := fmt.Sprintf("not checked: the chain breaks at record %d", res.FirstBad)
	st := Anchor{Name: AnchorStore, Seq: sh.Seq, Hash: sh.Hash, State: unchecked, Guarded: &guard.Guarded, Guard: guard.Why}
	if !haveStore {
		st.State = AnchorMissing
	}
	fl := Anchor{Name: AnchorFile, Seq: fa.seq, Hash: fa.hash, State: unchecked}
	switch {
	case errors.Is(ferr, errMalformedHead):
		fl.State = AnchorMalformed
	case !haveFile:
		fl.State = AnchorMissing
	}
	res.Anchors = []Anchor{st, fl}
	return res
}

// errStop ends a scan at the first bad record.
var errStop = errors.New("stop")

// verifier is Verify's walk over the stored records.
type verifier struct {
	res                         Result
	prevSeq                     int64
	prevHash                    string
	started                     bool
	fileSeq, storeSeq           int64 // -1: none to check
	fileHash, storeHash         string
	fileMatched                 bool
	fileMismatch, storeMismatch bool
	// base is the last archived record (the first stored one's
	// predecessor); baseProven once the chain holds its anchor.
	base, anchoredThrough int64
	baseHash              string
	baseProven            bool
}

func (v *verifier) bad(seq int64, format string, args ...any) error {
	v.res.fail(seq, fmt.Sprintf(format, args...))
	return errStop
}

// record checks one stored record, in seq order.
func (v *verifier) record(r store.AuditRecord) error {
	if !v.started {
		v.started = true
		if r.Seq > 1 {
			// The records before were archived, or deleted: the chain
			// must hold an archive anchor for exactly these.
			v.base, v.baseHash = r.Seq-1, r.PrevHash
			v.prevSeq, v.prevHash = r.Seq-1, r.PrevHash
		}
	}
	want := v.prevSeq + 1
	switch {
	case r.Seq < want:
		return v.bad(r.Seq, "record %d is out of order", r.Seq)
	case r.Seq > want:
		return v.bad(want, "record %d is missing", want)
	}
	if r.PrevHash != v.prevHash {
		return v.bad(r.Seq, "record %d does not link to record %d (deleted, reordered or edited)", r.Seq, v.prevSeq)
	}
	h, err := HashOf(r)
	if err != nil || h != r.Hash {
		return v.bad(r.Seq, "record %d was modified (hash mismatch)", r.Seq)
	}
	v.res.Records++
	v.prevSeq, v.prevHash = r.Seq, r.Hash
	if r.Seq == v.fileSeq {
		v.fileMatched, v.fileMismatch = r.Hash == v.fileHash, r.Hash != v.fileHash
	}
	if r.Seq == v.storeSeq {
		v.storeMismatch = r.Hash != v.storeHash
	}
	if a, ok := archiveAnchorOf(r); ok {
		v.anchoredThrough = max(v.anchoredThrough, a.Through)
		if v.base > 0 && a.Through == v.base && a.ThroughHash == v.baseHash {
			v.baseProven = true
		}
	}
	return nil
}

// archiveAnchorOf decodes r as an archive anchor: an ActionArchive record
// written by retention itself (RoleSystem; Append refuses both to callers).
func archiveAnchorOf(r store.AuditRecord) (ArchiveAnchor, bool) {
	if r.Action != ActionArchive || r.Role != RoleSystem {
		return ArchiveAnchor{}, false
	}
	var a ArchiveAnchor
	if err := json.Unmarshal(r.Detail, &a); err != nil || a.Through < 1 {
		return ArchiveAnchor{}, false
	}
	return a, true
}
