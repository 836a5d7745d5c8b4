package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// dbNowNS is the database's clock in nanoseconds: every node's lease is
// judged by the one clock they share, not by their own.
const dbNowNS = `(extract(epoch from clock_timestamp()) * 1000000000)::bigint`

// WithDataDir names the node's data dir: HoldNode locks it too (two
// servers on one data dir would share cgroups and workspaces whatever
// their node names).
func WithDataDir(dir string) PostgresOption { return func(s *Postgres) { s.dataDir = dir } }

// HoldNode takes this handle's node name (WithNode) for h until ttl
// passes without a Renew, and the data dir's lock (WithDataDir): ErrNodeHeld,
// naming the holder, while another server's lease on the name has not
// expired.
func (s *Postgres) HoldNode(ctx context.Context, h Holder, ttl time.Duration) (Lease, error) {
	if s.node == "" {
		return nil, errors.New("hold node: this store handle has no node name")
	}
	l := &pgLease{s: s, holder: h.ID, ttl: ttl}
	dirID := ""
	if s.dataDir != "" {
		unlock, id, err := lockDataDir(s.dataDir, h)
		if err != nil {
			return nil, err
		}
		l.unlock, dirID = unlock, id
	}
	info, _ := json.Marshal(h)
	var got string
	// Taken when the lease expired, or at once by a server on the data dir
	// of the last holder: this one holds that dir's lock, so the last
	// holder is gone (a restart).
	err := s.pool.QueryRow(ctx, `INSERT INTO node_leases(name, holder, dir_id, info, expires_ns) VALUES ($1, $2, $3, $4, `+dbNowNS+` + $5)
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, dir_id = excluded.dir_id, info = excluded.info, expires_ns = excluded.expires_ns
		WHERE node_leases.expires_ns < `+dbNowNS+` OR node_leases.holder = excluded.holder
			OR (excluded.dir_id <> '' AND node_leases.dir_id = excluded.dir_id)
		RETURNING holder`, s.node, h.ID, dirID, string(info), ttl.Nanoseconds()).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) {
		err = s.heldBy(ctx)
	}
	if err != nil {
		l.unlockDir()
		return nil, err
	}
	return l, nil
}

// heldBy is the ErrNodeHeld of a name whose lease another server holds.
func (s *Postgres) heldBy(ctx context.Context) error {
	var info string
	var left int64
	if err := s.pool.QueryRow(ctx, `SELECT info, expires_ns - `+dbNowNS+` FROM node_leases WHERE name = $1`, s.node).Scan(&info, &left); err != nil {
		return fmt.Errorf("hold node %q: %w", s.node, err)
	}
	who := "another sandhold server"
	var other Holder
	if len(info) <= maxHolderInfo && json.Unmarshal([]byte(info), &other) == nil && other.PID > 0 {
		who += " (" + other.String() + ")"
	}
	return fmt.Errorf("node name %q is %w: %s holds it (its lease runs %s more unless renewed); "+
		"give each node a name of its own (SANDBOX_NODE_NAME, e.g. a StatefulSet pod name), or stop the other server",
		s.node, ErrNodeHeld, who, time.Duration(max(left, 0)).Round(time.Millisecond))
}

// pgLease is a node name held in node_leases.
type pgLease struct {
	s      *Postgres
	holder string
	ttl    time.Duration

	mu     sync.Mutex
	unlock func()
}

func (l *pgLease) Renew(ctx context.Context) error {
	tag, err := l.s.pool.Exec(ctx, `UPDATE node_leases SET expires_ns = `+dbNowNS+` + $3 WHERE name = $1 AND holder = $2`,
		l.s.node, l.holder, l.ttl.Nanoseconds())
	if err != nil {
		return fmt.Errorf("renew node lease: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("node %q: %w", l.s.node, ErrNodeLost)
	}
	return nil
}

func (l *pgLease) Release(ctx context.Context) error {
	defer l.unlockDir()
	if _, err := l.s.pool.Exec(ctx, `DELETE FROM node_leases WHERE name = $1 AND holder = $2`, l.s.node, l.holder); err != nil {
		return fmt.Errorf("release node lease: %w", err)
	}
	return nil
}

func (l *pgLease) unlockDir() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.unlock != nil {
		l.unlock()
		l.unlock = nil
	}
}
