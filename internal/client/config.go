// Package client is sandhold's client side: the calls the `sandhold login
// | ls | create | rm | exec | shell | cp | logs | audit` commands make to a
// running server, and what they keep on the user's machine (the login in
// the user config dir, resume state of copies in the user cache dir).
//
// The key is a bearer credential: it is stored 0600 in a 0700 directory,
// sent only in a header (never a URL), never put in an error, and the
// client does not follow redirects (a redirect could carry the header to
// another host).
package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// Environment variables of the client. SANDHOLD_*, not SANDBOX_*: the
// server's SANDBOX_API_KEY is its admin key and must not be picked up by
// a client on the same machine by accident.
const (
	EnvURL     = "SANDHOLD_URL"
	EnvKey     = "SANDHOLD_KEY"
	EnvSandbox = "SANDHOLD_SANDBOX"
)

// maxConfigBytes bounds the login file read: it holds three short strings.
const maxConfigBytes = 64 << 10

// Config is where a client talks to and as whom.
type Config struct {
	URL string `json:"url"`
	Key string `json:"key"`
	// Sandbox is the default sandbox of commands that name none.
	Sandbox string `json:"sandbox,omitempty"`
}

// ErrNotLoggedIn says neither a login file nor the environment names a
// server; commands answer it with "run sandhold login".
var ErrNotLoggedIn = errors.New("not logged in: run `sandhold login URL` (or set SANDHOLD_URL and SANDHOLD_KEY)")

// ConfigPath is the login file: $XDG_CONFIG_HOME/sandhold/client.json (or
// the platform's user config dir).
func ConfigPath() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("find the user config dir: %w", err)
	}
	return filepath.Join(dir, "sandhold", "client.json"), nil
}

// LoadConfig reads the login file, then lets SANDHOLD_URL, SANDHOLD_KEY
// and SANDHOLD_SANDBOX override its fields. A missing file is not an
// error when the environment names both URL and key.
func LoadConfig() (Config, error) {
	c, err := LoadConfigPartial()
	if err != nil {
		return Config{}, err
	}
	if c.URL == "" || c.Key == "" {
		return Config{}, ErrNotLoggedIn
	}
	if _, err := ParseURL(c.URL); err != nil {
		return Config{}, err
	}
	return c, nil
}

// LoadConfigPartial is LoadConfig for a command with defaults of its own
// (sandhold mcp): whatever the login file and the environment name, the
// URL or the key possibly empty. A login file others can read is still
// refused.
func LoadConfigPartial() (Config, error) {
	var c Config
	if p, err := ConfigPath(); err == nil {
		if c, err = readConfig(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return Config{}, err
		}
	}
	if v := os.Getenv(EnvURL); v != "" {
		c.URL = v
	}
	if v := os.Getenv(EnvKey); v != "" {
		c.Key = v
	}
	if v := os.Getenv(EnvSandbox); v != "" {
		c.Sandbox = v
	}
	return c, nil
}

func readConfig(p string) (Config, error) {
	f, err := os.Open(p) // #nosec G304 -- the user's own config file, path from os.UserConfigDir
	if err != nil {
		return Config{}, err
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return Config{}, err
	}
	if st.Mode().Perm()&0o077 != 0 {
		// The key must not be readable by others; refuse rather than use
		// a credential that may already have leaked.
		return Config{}, fmt.Errorf("%s is readable by other users (mode %o): run `chmod 600 %s` and consider a new key", p, st.Mode().Perm(), p)
	}
	var c Config
	dec := json.NewDecoder(io.LimitReader(f, maxConfigBytes))
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("%s is not a valid login file: run `sandhold login URL` again", p)
	}
	return c, nil
}

// SaveConfig writes the login file 0600 in a 0700 directory, atomically
// (a temp file renamed into place), and returns its path.
func SaveConfig(c Config) (string, error) {
	p, err := ConfigPath()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w", filepath.Dir(p), err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return "", err
	}
	if err := writeFileAtomic(p, append(b, '\n')); err != nil {
		return "", err
	}
	return p, nil
}

// writeFileAtomic writes b to p with mode 0600 through a temp file in the
// same directory: a crash leaves the old file or the new one.
func writeFileAtomic(p string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	name := tmp.Name()
	defer func() { _ = os.Remove(name) }()
	if err := tmp.Chmod(0o600); err != nil {
		_ = tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(name, p)
}

// ParseURL checks a server URL: http or https, a host, no credentials,
// query or fragment. The path may carry a prefix (a reverse proxy's).
func ParseURL(s string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q is not a server URL like http://127.0.0.1:8080", s)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, errors.New("the server URL must not carry credentials, a query or a fragment: give the key separately")
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// IsLoopback reports whether u names this machine (where plain http does
// not expose the key on a network).
func IsLoopback(u *url.URL) bool {
	h := u.Hostname()
	return h == "localhost" || h == "::1" || strings.HasPrefix(h, "127.")
}
