// Package pgtest starts a throw-away PostgreSQL server for tests: initdb in
// a fresh temp dir, then the server on a unix socket only (no TCP port, so
// parallel test binaries never collide), run as an unprivileged user when
// the test runs as root (PostgreSQL refuses to run as root). Each test gets
// its own database on the process's one server.
//
// A test binary that uses it wires pgtest.Main into TestMain, which stops
// the server and removes its directory after the tests. The server also
// gets SIGQUIT if the test process dies first (Pdeathsig), so a killed test
// run leaves no postmaster behind.
//
// Where the server binaries are not installed, tests skip and say so
// (`make deps` installs Debian's postgresql package); any other failure to
// start is a test failure.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sandhold/sandhold/internal/testenv"
)

// startTimeout bounds initdb plus the server's start.
const startTimeout = 60 * time.Second

// Server is one running throw-away PostgreSQL.
type Server struct {
	dir    string // temp dir: data/ and the socket
	cmd    *exec.Cmd
	exited chan struct{}
	dbs    atomic.Int64
}

var (
	mu      sync.Mutex
	shared  *Server
	lastErr error
	skipMsg string
)

// Main runs the tests and then stops the shared server, if one started.
// Call it from TestMain: os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	mu.Lock()
	defer mu.Unlock()
	if shared != nil {
		shared.Stop()
		shared = nil
	}
	return code
}

// URL returns the URL of a new, empty database on the process's shared
// server, starting the server on first use. It skips t when PostgreSQL is
// not installed.
func URL(t testing.TB) string {
	t.Helper()
	s := Shared(t)
	u, err := s.NewDatabase(context.Background())
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return u
}

// Shared returns the process's server, starting it on first use.
func Shared(t testing.TB) *Server {
	t.Helper()
	testenv.SkipShort(t, "starts PostgreSQL")
	mu.Lock()
	defer mu.Unlock()
	if skipMsg != "" {
		t.Skip(skipMsg)
	}
	if lastErr != nil {
		t.Fatalf("pgtest: %v", lastErr)
	}
	if shared == nil {
		bin, err := findBinDir()
		if err != nil {
			skipMsg = err.Error()
			t.Skip(skipMsg)
		}
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		if shared, lastErr = Start(ctx, bin); lastErr != nil {
			t.Fatalf("pgtest: %v", lastErr)
		}
	}
	return shared
}

// FindBinDir returns the directory holding initdb and postgres, for a
// program (the cluster benchmark) that starts its own server with Start.
func FindBinDir() (string, error) { return findBinDir() }

// findBinDir finds the directory holding initdb and postgres: Debian's
// versioned directories first (newest version), then $PATH.
func findBinDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgVersion(dirs[i]) > pgVersion(dirs[j]) })
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		d := filepath.Dir(p)
		if isExec(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", errors.New("PostgreSQL server binaries (initdb, postgres) are not installed; `make deps` installs Debian's postgresql package")
}

func pgVersion(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// runAs returns the credential to run PostgreSQL under: none when not root;
// as root, the "postgres" system user if there is one, else nobody.
func runAs() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil || uid == 0 {
			continue
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
	}
	return nil, errors.New("running as root and no unprivileged user (postgres, nobody) to run PostgreSQL as")
}

// StartOption configures Start.
type StartOption func(*startConfig)

type startConfig struct{ durable bool }

// Durable keeps PostgreSQL's flushes on (fsync, synchronous_commit, full
// page writes: the server's defaults), for benchmarks whose point is the
// cost of a durable commit. The default turns them off: the tests' data is
// thrown away.
func Durable() StartOption { return func(c *startConfig) { c.durable = true } }

// Start runs initdb in a new temp dir and starts the server from binDir.
func Start(ctx context.Context, binDir string, opts ...StartOption) (*Server, error) {
	var cfg startConfig
	for _, o := range opts {
		o(&cfg)
	}
	cred, err := runAs()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "sandhold-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, exited: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			s.Stop()
		}
	}()
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	// #nosec G204 -- binDir is a fixed system directory found above, not input
	initdb := exec.CommandContext(ctx, filepath.Join(binDir, "initdb"), "-D", data, "-U", "sandhold",
		"--auth=trust", "--encoding=UTF8", "--no-locale", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w: %s", err, tail(out))
	}
	args := []string{"-D", data,
		"-c", "listen_addresses=",
		"-c", "unix_socket_directories=" + dir,
		"-c", "max_connections=300",
		"-c", "shared_buffers=32MB",
		"-c", "log_min_messages=warning",
	}
	if !cfg.durable {
		// Durability is off: this database is thrown away after the tests.
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	// #nosec G204 -- as above
	s.cmd = exec.Command(filepath.Join(binDir, "postgres"), args...)
	s.cmd.Dir = dir
	s.cmd.SysProcAttr = procAttr(cred)
	logf, err := os.OpenFile(filepath.Join(dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600) // #nosec G304 -- our own temp dir
	if err != nil {
		return nil, err
	}
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	// Started from a thread held for the server's life: its Pdeathsig
	// follows that thread (testenv.StartHeld says why).
	waited, err := testenv.StartHeld(s.cmd)
	if err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	go func() { <-waited; _ = logf.Close(); close(s.exited) }()
	for {
		c, err := pgx.Connect(ctx, s.url("postgres"))
		if err == nil {
			_ = c.Close(ctx)
			break
		}
		select {
		case <-s.exited:
			b, _ := os.ReadFile(filepath.Join(dir, "server.log")) // #nosec G304 -- our own temp dir
			return nil, fmt.Errorf("postgres exited: %s", tail(b))
		case <-ctx.Done():
			return nil, fmt.Errorf("postgres did not accept connections: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	ok = true
	return s, nil
}

// Dir is the server's temp dir (its socket lives there).
func (s *Server) Dir() string { return s.dir }

func (s *Server) url(db string) string {
	q := url.Values{"host": {s.dir}, "sslmode": {"disable"}}
	return "postgres://sandhold@/" + db + "?" + q.Encode()
}

// NewDatabase creates an empty database and returns its URL.
func (s *Server) NewDatabase(ctx context.Context) (string, error) {
	c, err := pgx.Connect(ctx, s.url("postgres"))
	if err != nil {
		return "", err
	}
	defer func() { _ = c.Close(ctx) }()
	name := fmt.Sprintf("t%d_%d", os.Getpid(), s.dbs.Add(1))
	if _, err := c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database: %w", err)
	}
	return s.url(name), nil
}

// RoleURLs returns the URLs of a new, empty database owned by a new login
// role that is no superuser (nor CREATEROLE, nor BYPASSRLS): app connects
// as that role, as a deployment that does not hand sandhold an
// administrator would; admin connects to the same database as the
// server's superuser. It skips t when PostgreSQL is not installed.
func RoleURLs(t testing.TB) (app, admin string) {
	t.Helper()
	s := Shared(t)
	app, admin, err := s.NewRoleDatabase(context.Background())
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return app, admin
}

// NewRoleDatabase is RoleURLs on s.
func (s *Server) NewRoleDatabase(ctx context.Context) (app, admin string, err error) {
	c, err := pgx.Connect(ctx, s.url("postgres"))
	if err != nil {
		return "", "", err
	}
	defer func() { _ = c.Close(ctx) }()
	n := s.dbs.Add(1)
	role := fmt.Sprintf("app%d_%d", os.Getpid(), n)
	name := fmt.Sprintf("r%d_%d", os.Getpid(), n)
	for _, q := range []string{
		"CREATE ROLE " + pgx.Identifier{role}.Sanitize() + " LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB NOBYPASSRLS",
		"CREATE DATABASE " + pgx.Identifier{name}.Sanitize() + " OWNER " + pgx.Identifier{role}.Sanitize(),
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			return "", "", fmt.Errorf("%s: %w", q, err)
		}
	}
	q := url.Values{"host": {s.dir}, "sslmode": {"disable"}}
	return "postgres://" + url.PathEscape(role) + "@/" + name + "?" + q.Encode(), s.url(name), nil
}

// Stop shuts the server down (fast shutdown, then kill) and removes its dir.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
	}
	_ = os.RemoveAll(s.dir)
}

func tail(b []byte) string {
	const n = 2000
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
