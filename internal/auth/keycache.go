package auth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
)

// The key cache keeps the Caller of a key that authenticated, so a request
// does not pay a store query (on the embedded SQLite store ≈0.1–0.3 ms of
// CPU: statement parse, a read transaction, and a page cache that every
// audit append invalidates) to learn what the previous request learnt.
//
// What it must not do is let a revoked key in. Revocation is a write to the
// store by some process — this server, or `sandhold keys revoke` run beside
// it on the same data dir — and must refuse the very next request. So every
// process that changes a key (RevokeKey, EnsureAdmin) writes a fresh random
// value into the epoch file after its store write, and the cache answers
// only while the file still holds the value it held when the cached row was
// read:
//
//   - a hit reads the epoch file (one pread of 8 bytes) and serves the entry
//     only when the value equals the value the entries were read under;
//   - a miss reads the epoch first and the store second, so a row in the
//     cache was read after the file showed its value. A revocation stored
//     after that read changes the file before RevokeKey returns, and the
//     next request misses. (A request that arrives while RevokeKey is
//     between its two writes is ordered before the revocation, as if it had
//     come a moment earlier.)
//   - random values, not a counter: two writers need no lock, and any write
//     differs from the cached value except with probability 2^-64.
//
// Only successes are cached (an unknown, revoked or malformed key always
// reaches the store, and a key created meanwhile is simply a miss). Any
// error reading the file turns the cache off for that request: fail closed
// to the store. A store shared by several servers (PostgreSQL) has no
// shared epoch file, so the daemon does not enable the cache there.
//
// What the epoch file does not cover: a process that writes the keys table
// without going through Service (an operator editing the database by hand)
// or replaces the file. WatchRevocations' poll clears the cache whenever it
// sees a revocation it did not know and reopens a replaced file, which
// bounds such a change to one poll interval.

// KeyEpochFile is the epoch file's name in the data dir: the daemon and
// the CLI pass filepath.Join(dataDir, KeyEpochFile) to WithKeyCache.
const KeyEpochFile = "keys.epoch"

// maxCachedKeys bounds the cache; a server with more active keys than this
// starts over (the entries are refilled from the store on the next miss).
const maxCachedKeys = 4096

// epochSize is the size of the value in the epoch file.
const epochSize = 8

type keyCache struct {
	path string

	mu    sync.RWMutex
	f     *os.File // the epoch file, read with ReadAt; nil: cache off
	off   bool     // closed for good (close): reopen does nothing
	at    uint64   // the epoch value the entries were read under
	valid bool     // at holds a value read from the file
	m     map[[32]byte]cachedKey
}

// cachedKey is a key that authenticated: its hash (compared in constant
// time on a hit, as the store's row is) and its Caller.
type cachedKey struct {
	hash   [32]byte
	caller Caller
}

// openKeyCache opens (creating, 0600) the epoch file at path.
func openKeyCache(path string) (*keyCache, error) {
	c := &keyCache{path: path, m: map[[32]byte]cachedKey{}}
	if err := c.reopen(); err != nil {
		return nil, err
	}
	return c, nil
}

// reopen (re)opens the epoch file at c.path, replacing c.f, and forgets
// every entry. It is how a replaced file is picked up.
func (c *keyCache) reopen() error {
	c.mu.RLock()
	off := c.off
	c.mu.RUnlock()
	if off {
		return nil
	}
	f, err := os.OpenFile(c.path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600) // #nosec G304 -- the data dir's own epoch file, a path the daemon builds
	if err != nil {
		return fmt.Errorf("open key epoch file: %w", err)
	}
	c.mu.Lock()
	if c.off {
		c.mu.Unlock()
		_ = f.Close()
		return nil
	}
	old := c.f
	c.f = f
	c.valid = false
	clear(c.m)
	c.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
	return nil
}

// replaced reports whether the file at c.path is no longer the one c holds
// open (deleted, or another file put in its place).
func (c *keyCache) replaced() bool {
	c.mu.RLock()
	f, off := c.f, c.off
	c.mu.RUnlock()
	if off {
		return false
	}
	if f == nil {
		return true
	}
	held, err1 := f.Stat()
	now, err2 := os.Stat(c.path)
	return err1 != nil || err2 != nil || !os.SameFile(held, now)
}

// epoch reads the current value of the epoch file. A short file (never
// written) reads as 0.
func (c *keyCache) epoch(f *os.File) (uint64, error) {
	var b [epochSize]byte
	n, err := f.ReadAt(b[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	if n < epochSize {
		clear(b[n:])
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

// get returns the cached Caller of hash when the epoch file still shows the
// value it was read under. e is the epoch read now (pass it to put after a
// store lookup); ok is false when e could not be read (do not put).
func (c *keyCache) get(hash [32]byte) (caller Caller, hit bool, e uint64, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.f == nil {
		return Caller{}, false, 0, false
	}
	e, err := c.epoch(c.f)
	if err != nil {
		return Caller{}, false, 0, false
	}
	if c.valid && c.at == e {
		if k, found := c.m[hash]; found && subtle.ConstantTimeCompare(k.hash[:], hash[:]) == 1 {
			return k.caller, true, e, true
		}
	}
	return Caller{}, false, e, true
}

// put caches caller for hash, read from the store after the epoch file
// showed e. Entries read under another value are dropped first.
func (c *keyCache) put(hash [32]byte, caller Caller, e uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f == nil {
		return
	}
	if !c.valid || c.at != e {
		clear(c.m)
		c.at, c.valid = e, true
	}
	if len(c.m) >= maxCachedKeys {
		clear(c.m)
	}
	caller.Addr = ""
	c.m[hash] = cachedKey{hash: hash, caller: caller}
}

// forget drops every entry (this process changed a key).
func (c *keyCache) forget() {
	c.mu.Lock()
	clear(c.m)
	c.valid = false
	c.mu.Unlock()
}

// bump tells every process that caches keys over this data dir that a key
// changed: a fresh random value in the epoch file, written through the
// file this cache holds. Called after the store write; the caller drops
// its own entries (forget) or, when bump fails, turns the cache off.
func (c *keyCache) bump() error {
	var b [epochSize]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("random: %w", err)
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.f == nil {
		return errors.New("key cache closed")
	}
	if _, err := c.f.WriteAt(b[:], 0); err != nil {
		return fmt.Errorf("write key epoch file: %w", err)
	}
	return nil
}

// close turns the cache off for good and releases the file.
func (c *keyCache) close() {
	c.mu.Lock()
	f := c.f
	c.f, c.off = nil, true
	clear(c.m)
	c.mu.Unlock()
	if f != nil {
		_ = f.Close()
	}
}
