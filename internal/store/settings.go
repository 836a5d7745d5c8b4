package store

import (
	"context"
	"fmt"
	"time"
)

// GetSetting returns the value stored under key.
func (s *SQLite) GetSetting(ctx context.Context, key string) ([]byte, error) {
	var v []byte
	if err := s.db.QueryRowContext(ctx, `SELECT value FROM settings WHERE key = ?`, key).Scan(&v); err != nil {
		return nil, notFound(err)
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

// PutSetting stores value under key.
func (s *SQLite) PutSetting(ctx context.Context, key string, value []byte) error {
	if value == nil {
		value = []byte{}
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO settings(key, value, updated_ns) VALUES (?, ?, ?)
		ON CONFLICT(key) DO UPDATE SET value=excluded.value, updated_ns=excluded.updated_ns`,
		key, value, time.Now().UnixNano())
	if err != nil {
		return fmt.Errorf("put setting: %w", err)
	}
	return nil
}
