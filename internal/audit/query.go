package audit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sandhold/sandhold/internal/store"
)

// Filter selects records for Query. Zero fields do not filter.
type Filter struct {
	Since    time.Time
	AfterSeq int64
	Actor    string
	// Action matches exactly or as a dotted prefix: "auth" matches every
	// auth.* action.
	Action     string
	Sandbox    string
	Limit      int // capped at store.MaxAuditPage
	Descending bool
}

// categories are the action filters that span several action prefixes:
// an operator asking for "exec" wants every way code ran, whatever route
// or tool started it.
var categories = map[string][]string{
	"auth":    {"auth", "authz"},
	"exec":    {"exec", "shell", "bash", "code", "jupyter"},
	"file":    {"file", "artifact"},
	"network": {"network"},
}

// Query returns matching records. Action matches exactly, as a dotted
// prefix, or as one of the categories above.
func (l *Log) Query(ctx context.Context, f Filter) ([]Record, error) {
	sf := store.AuditFilter{
		Since: f.Since, AfterSeq: f.AfterSeq, Actor: f.Actor, Action: f.Action,
		Sandbox: f.Sandbox, Limit: f.Limit, Descending: f.Descending,
	}
	if more, ok := categories[f.Action]; ok {
		sf.Action, sf.Actions = "", more
	}
	recs, err := l.st.QueryAudit(ctx, sf)
	if err != nil {
		return nil, err
	}
	out := make([]Record, 0, len(recs))
	for _, r := range recs {
		out = append(out, fromStore(r))
	}
	return out, nil
}

// Result is the outcome of Verify.
type Result struct {
	OK bool `json:"ok"`
	// Records is how many records were checked.
	Records int64 `json:"records"`
	// HeadSeq and HeadHash are the chain's last record as verified.
	HeadSeq  int64  `json:"head_seq"`
	HeadHash string `json:"head_hash"`
	// FirstBad is the first seq found wrong (missing, edited, out of
	// order, or cut off), 0 when OK.
	FirstBad int64 `json:"first_bad,omitempty"`
	// Problem says what is wrong, empty when OK.
	Problem string `json:"problem,omitempty"`
}

// Verify walks the whole chain and checks it against the head file. Tampering
// is reported in the Result (OK=false); an error means the check itself could
// not run.
func (l *Log) Verify(ctx context.Context) (Result, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// The head is read first: records appended by another process while
	// we scan are then simply past the head, not a mismatch.
	hd, haveHead, herr := l.readHead(ctx)
	if herr != nil && !errors.Is(herr, errMalformedHead) {
		return Result{}, herr
	}

	var res Result
	prevSeq, prevHash := int64(0), GenesisHash
	headMatched := false
	errStop := errors.New("stop")
	bad := func(seq int64, format string, args ...any) error {
		res.FirstBad, res.Problem = seq, fmt.Sprintf(format, args...)
		return errStop
	}
	err := l.st.ScanAudit(ctx, func(r store.AuditRecord) error {
		want := prevSeq + 1
		switch {
		case r.Seq < want:
			return bad(r.Seq, "record %d is out of order", r.Seq)
		case r.Seq > want:
			return bad(want, "record %d is missing", want)
		}
		if r.PrevHash != prevHash {
			return bad(r.Seq, "record %d does not link to record %d (deleted, reordered or edited)", r.Seq, prevSeq)
		}
		h, err := HashOf(r)
		if err != nil || h != r.Hash {
			return bad(r.Seq, "record %d was modified (hash mismatch)", r.Seq)
		}
		res.Records++
		prevSeq, prevHash = r.Seq, r.Hash
		if haveHead && r.Seq == hd.seq {
			if r.Hash != hd.hash {
				return bad(r.Seq, "record %d does not match the head file", r.Seq)
			}
			headMatched = true
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return Result{}, err
	}
	res.HeadSeq, res.HeadHash = prevSeq, prevHash
	if res.Problem != "" {
		return res, nil
	}
	switch {
	case errors.Is(herr, errMalformedHead):
		res.FirstBad, res.Problem = prevSeq, "the head file is malformed"
	case !haveHead && prevSeq > 0:
		res.FirstBad, res.Problem = prevSeq, "the head file is missing"
	case haveHead && hd.seq > prevSeq:
		res.FirstBad, res.Problem = prevSeq+1, fmt.Sprintf("records %d..%d are missing (log truncated)", prevSeq+1, hd.seq)
	case haveHead && !headMatched:
		res.FirstBad, res.Problem = hd.seq, "the head file does not match the log"
	default:
		res.OK = true
	}
	return res, nil
}
