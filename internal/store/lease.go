package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// A server holds its node while it runs (Store.HoldNode), so two servers
// never act as one node: with the same SANDBOX_NODE_NAME on one
// PostgreSQL, the second would list the first's running sandboxes as
// stopped and start a second copy of one on an exec; on one data dir, it
// would reap the first's cgroups and mount its workspaces twice.
//
//   - The data dir: an exclusive flock on its server.lock (both stores),
//     which the kernel drops when the process ends, crash or not. Tools
//     that open the store beside a running server (`sandhold keys`) do not
//     take it.
//   - The node name, in a cluster (PostgreSQL): a row in node_leases with
//     the holder and an expiry on the database's clock; the holder renews
//     it (Lease.Renew) well within its TTL, and another server may take the
//     name only once it has expired — or at once when it runs on the same
//     data dir (its id, DirIDFile, is in the row): holding that dir's lock
//     proves the previous holder is gone, so a restarted node does not wait
//     out its own lease. A holder that could not renew for a TTL and finds
//     the name taken (ErrNodeLost) must stop serving. One host (SQLite) has
//     one node: the data dir lock is its lease.

// Sentinels of the node lease.
var (
	// ErrNodeHeld: another live server holds the node (or the data
	// dir); the error says which. The server must not start.
	ErrNodeHeld = errors.New("held by another live server")
	// ErrNodeLost: another server took the node name after this one's
	// lease expired; this one must stop serving.
	ErrNodeLost = errors.New("the node name was taken over by another server")
)

// LockFile is the data dir's server lock; DirIDFile names the data dir
// (random, made once) in a node's lease.
const (
	LockFile  = "server.lock"
	DirIDFile = "node.id"
)

// maxHolderInfo bounds the holder description read from a lock file or a
// lease row (it is only shown in a message).
const maxHolderInfo = 4096

// Holder describes the server taking a node, for the message another one
// prints when it is refused.
type Holder struct {
	// ID is random per server run: the lease's owner.
	ID      string    `json:"id"`
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
}

func (h Holder) String() string {
	return fmt.Sprintf("pid %d on host %s, started %s", h.PID, h.Host, h.Started.UTC().Format(time.RFC3339))
}

// Lease is a server's hold on its node (Store.HoldNode).
type Lease interface {
	// Renew extends the hold by its TTL; ErrNodeLost if another server
	// took the node meanwhile.
	Renew(ctx context.Context) error
	// Release gives the node up (a clean stop); calling it again does
	// nothing.
	Release(ctx context.Context) error
}

// lockDataDir takes the data dir's server lock for h, or answers
// ErrNodeHeld naming the server that holds it, and returns the data dir's
// id (DirIDFile). unlock releases the lock.
func lockDataDir(dir string, h Holder) (unlock func(), dirID string, err error) {
	p := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600) //nolint:gosec // G304: the server's own data dir
	if err != nil {
		return nil, "", fmt.Errorf("open the data dir's server lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		info, _ := io.ReadAll(io.LimitReader(f, maxHolderInfo))
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			var other Holder
			who := "another sandhold server"
			if json.Unmarshal(info, &other) == nil && other.PID > 0 {
				who += " (" + other.String() + ")"
			}
			return nil, "", fmt.Errorf("the data dir %s is %w: %s serves it; stop it, or give this server a data dir of its own (SANDBOX_DATA_DIR)", dir, ErrNodeHeld, who)
		}
		return nil, "", fmt.Errorf("lock the data dir: %w", err)
	}
	unlock = func() {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		_ = f.Close()
	}
	if dirID, err = readDirID(dir); err != nil {
		unlock()
		return nil, "", err
	}
	// Who holds it, for the next one's message; the lock is what counts.
	if b, err := json.Marshal(h); err == nil {
		_ = f.Truncate(0)
		_, _ = f.WriteAt(b, 0)
	}
	return unlock, dirID, nil
}

// dirIDLen is the length of a data dir's id: 16 random bytes in hex.
const dirIDLen = 32

// readDirID returns the data dir's id, making it on first use (the caller
// holds the dir's lock, so no other server makes it at the same time).
func readDirID(dir string) (string, error) {
	p := filepath.Join(dir, DirIDFile)
	b, err := os.ReadFile(p) //nolint:gosec // G304: the server's own data dir
	if err == nil && len(b) == dirIDLen {
		return string(b), nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read the data dir's id: %w", err)
	}
	var raw [dirIDLen / 2]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("make the data dir's id: %w", err)
	}
	id := hex.EncodeToString(raw[:])
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(id), 0o600); err != nil {
		return "", fmt.Errorf("write the data dir's id: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return "", fmt.Errorf("write the data dir's id: %w", err)
	}
	return id, nil
}

// dirLease is a lease that is only the data dir's lock (SQLite: one node).
type dirLease struct{ unlock func() }

func (l *dirLease) Renew(context.Context) error { return nil }

func (l *dirLease) Release(context.Context) error {
	if l.unlock != nil {
		l.unlock()
		l.unlock = nil
	}
	return nil
}

// HoldNode takes the data dir's lock: one server per data dir, the whole
// of a single host's node. The TTL is not needed: the kernel drops the
// lock with the process.
func (s *SQLite) HoldNode(_ context.Context, h Holder, _ time.Duration) (Lease, error) {
	unlock, _, err := lockDataDir(filepath.Dir(s.path), h)
	if err != nil {
		return nil, err
	}
	return &dirLease{unlock: unlock}, nil
}
