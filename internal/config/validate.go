package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// check is one named validation rule. Each returns an error naming the
// setting (by environment name) it refuses.
type check struct {
	name string
	fn   func(Config) error
}

// checks run in order; Validate reports all failures, joined.
var checks = []check{
	{"listen address", checkListen},
	{"data dir", checkDataDir},
	{"api key", checkAPIKey},
	{"positive limits", checkPositive},
	{"upper bounds", checkUpperBounds},
	{"log level", checkLogLevel},
	{"allowed hosts", checkAllowedHosts},
	{"cors origins", checkCORSOrigins},
	{"database url", checkDatabaseURL},
	{"node name", checkNodeName},
	{"cluster", checkCluster},
	{"content origin", checkContent},
}

// Validate applies every named check and returns their failures joined, or
// nil. Call it on the result of Load (or of WithDefaults).
func (c Config) Validate() error {
	var errs []error
	for _, ch := range checks {
		if err := ch.fn(c); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func checkListen(c Config) error {
	host, port, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return fmt.Errorf("SANDBOX_LISTEN: %q is not host:port", c.Listen)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("SANDBOX_LISTEN: bad port %q", port)
	}
	if host != "" && host != "localhost" && net.ParseIP(host) == nil {
		return fmt.Errorf("SANDBOX_LISTEN: host %q must be an IP address or localhost", host)
	}
	return nil
}

func checkDataDir(c Config) error {
	if c.DataDir == "" {
		return errors.New("SANDBOX_DATA_DIR: empty")
	}
	if !filepath.IsAbs(c.DataDir) {
		// A relative data dir is resolved against the working directory at
		// start; allowed (make run uses ./.data), but it must be clean.
		if strings.Contains(c.DataDir, "\x00") {
			return errors.New("SANDBOX_DATA_DIR: contains NUL")
		}
	}
	return nil
}

// minAPIKeyLen: an operator-chosen admin key shorter than this is guessable.
const minAPIKeyLen = 32

func checkAPIKey(c Config) error {
	if c.APIKey == "" {
		return nil
	}
	if len(c.APIKey) < minAPIKeyLen {
		return fmt.Errorf("SANDBOX_API_KEY: too short (want at least %d characters)", minAPIKeyLen)
	}
	for i := 0; i < len(c.APIKey); i++ {
		if b := c.APIKey[i]; b <= ' ' || b > '~' {
			return errors.New("SANDBOX_API_KEY: only printable ASCII without spaces is allowed")
		}
	}
	return nil
}

func checkPositive(c Config) error {
	var errs []error
	pos := func(name string, v int64) {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be positive, got %d", name, v))
		}
	}
	pos("SANDBOX_MAX_FILE_SIZE", c.MaxFileSize.Bytes())
	pos("SANDBOX_MAX_FILES_PER_REQUEST", int64(c.MaxFilesPerRequest))
	pos("SANDBOX_MAX_MEMORY", c.MaxMemory.Bytes())
	pos("SANDBOX_MAX_CPU_TIME", int64(c.MaxCPUTime))
	pos("SANDBOX_MAX_DISK", c.MaxDisk.Bytes())
	pos("SANDBOX_DISK_OVERCOMMIT", int64(c.DiskOvercommit))
	pos("SANDBOX_MAX_PROCESSES", int64(c.MaxProcesses))
	pos("SANDBOX_MAX_PTYS", int64(c.MaxPTYs))
	pos("SANDBOX_OUTPUT_BUDGET", c.OutputBudget.Bytes())
	pos("SANDBOX_OUTPUT_BUDGET_PER_KEY", c.OutputBudgetPerKey.Bytes())
	pos("SANDBOX_MAX_SANDBOXES_PER_KEY", int64(c.MaxSandboxesPerKey))
	pos("SANDBOX_SANDBOX_TTL", int64(c.SandboxTTL))
	pos("SANDBOX_MAX_BODY", c.MaxBody.Bytes())
	pos("SANDBOX_BODY_BUDGET", c.BodyBudget.Bytes())
	if c.WarmPool < 0 {
		errs = append(errs, fmt.Errorf("SANDBOX_WARM_POOL: must not be negative, got %d", c.WarmPool))
	}
	for name, n := range c.WarmPools {
		if n < 0 || n > maxWarmPool {
			errs = append(errs, fmt.Errorf("SANDBOX_WARM_POOL: %s=%d is not between 0 and %d", name, n, maxWarmPool))
		}
	}
	pos("SANDBOX_TEMPLATE_MAX_SIZE", c.TemplateMaxSize.Bytes())
	pos("SANDBOX_SNAPSHOT_BUDGET", c.SnapshotBudget.Bytes())
	return errors.Join(errs...)
}

// Upper bounds catch unit mistakes (SANDBOX_MAX_MEMORY=1TB, a TTL in years)
// rather than express policy.
const (
	maxWarmPool = 256
	// maxSpareInits bounds the inits cloned ahead: each is an awake init
	// (≈ 1.5 MB) and a host id range.
	maxSpareInits = 16
	// maxOvercommit: past this the budget no longer bounds what a create
	// may promise in any useful way.
	maxOvercommit   = 1000
	maxProcesses    = 1 << 16
	maxPTYs         = 4096 // the kernel's default kernel.pty.max: more than the host's whole pool
	maxSandboxesKey = 10000
	maxBodyCap      = Size(1 << 30)  // 1 GiB for a JSON body is already absurd
	maxCPUTimeCap   = 24 * time.Hour // per execution
	minTTL          = time.Minute    // a shorter TTL reaps sandboxes mid-use
	minIdleSleep    = time.Second    // shorter: an init would sleep and wake between a client's calls
	maxTTL          = 365 * 24 * time.Hour
)

func checkUpperBounds(c Config) error {
	var errs []error
	if c.SpareInits < 0 || c.SpareInits > maxSpareInits {
		errs = append(errs, fmt.Errorf("SANDBOX_SPARE_INITS: between 0 and %d, got %d", maxSpareInits, c.SpareInits))
	}
	if c.WarmPool > maxWarmPool {
		errs = append(errs, fmt.Errorf("SANDBOX_WARM_POOL: at most %d, got %d", maxWarmPool, c.WarmPool))
	}
	if c.DiskOvercommit > maxOvercommit {
		errs = append(errs, fmt.Errorf("SANDBOX_DISK_OVERCOMMIT: at most %d, got %d", maxOvercommit, c.DiskOvercommit))
	}
	if c.MaxProcesses > maxProcesses {
		errs = append(errs, fmt.Errorf("SANDBOX_MAX_PROCESSES: at most %d, got %d", maxProcesses, c.MaxProcesses))
	}
	if c.OutputBudgetPerKey > c.OutputBudget {
		errs = append(errs, fmt.Errorf("SANDBOX_OUTPUT_BUDGET_PER_KEY: at most SANDBOX_OUTPUT_BUDGET (%s), got %s", c.OutputBudget, c.OutputBudgetPerKey))
	}
	if c.MaxPTYs > maxPTYs {
		errs = append(errs, fmt.Errorf("SANDBOX_MAX_PTYS: at most %d, got %d", maxPTYs, c.MaxPTYs))
	}
	if c.MaxSandboxesPerKey > maxSandboxesKey {
		errs = append(errs, fmt.Errorf("SANDBOX_MAX_SANDBOXES_PER_KEY: at most %d, got %d", maxSandboxesKey, c.MaxSandboxesPerKey))
	}
	if c.MaxBody > maxBodyCap {
		errs = append(errs, fmt.Errorf("SANDBOX_MAX_BODY: at most %s, got %s", maxBodyCap, c.MaxBody))
	}
	if c.BodyBudget < c.MaxBody {
		// A body at the cap could never be read.
		errs = append(errs, fmt.Errorf("SANDBOX_BODY_BUDGET: at least SANDBOX_MAX_BODY (%s), got %s", c.MaxBody, c.BodyBudget))
	}
	if c.MaxCPUTime > maxCPUTimeCap {
		errs = append(errs, fmt.Errorf("SANDBOX_MAX_CPU_TIME: at most %s, got %s", maxCPUTimeCap, c.MaxCPUTime))
	}
	if c.IdleSleep > 0 && (c.IdleSleep < minIdleSleep || c.IdleSleep > maxTTL) {
		errs = append(errs, fmt.Errorf("SANDBOX_IDLE_SLEEP: 0 (never) or between %s and %s, got %s", minIdleSleep, maxTTL, c.IdleSleep))
	}
	if c.SandboxTTL > 0 && (c.SandboxTTL < minTTL || c.SandboxTTL > maxTTL) {
		errs = append(errs, fmt.Errorf("SANDBOX_SANDBOX_TTL: between %s and %s, got %s", minTTL, maxTTL, c.SandboxTTL))
	}
	return errors.Join(errs...)
}

func checkLogLevel(c Config) error {
	if !validLogLevel(c.LogLevel) {
		return fmt.Errorf("SANDBOX_LOG_LEVEL: want one of %s, got %q", strings.Join(validLogLevels, ", "), c.LogLevel)
	}
	return nil
}

// checkContent: the content domain is a DNS name (never an IP: a
// wildcard of hosts is the point), and the content listener is an address
// of its own.
func checkContent(c Config) error {
	var errs []error
	if d := c.ContentDomain; d != "" {
		if len(d) > 200 || net.ParseIP(d) != nil || !dnsName(d) {
			errs = append(errs, fmt.Errorf("SANDBOX_CONTENT_DOMAIN: %q is not a DNS domain like sandbox.example.com", d))
		}
		for _, h := range c.AllowedHosts {
			if strings.EqualFold(h, d) || strings.HasSuffix(strings.ToLower(h), "."+d) {
				errs = append(errs, fmt.Errorf("SANDBOX_CONTENT_DOMAIN: %q is also an allowed host of the console's origin (SANDBOX_ALLOWED_HOSTS)", h))
			}
		}
	}
	if l := c.ContentListen; l != "" {
		host, port, err := net.SplitHostPort(l)
		p, perr := strconv.Atoi(port)
		switch {
		case err != nil || perr != nil || p < 0 || p > 65535:
			errs = append(errs, fmt.Errorf("SANDBOX_CONTENT_LISTEN: %q is not host:port", l))
		case host != "" && host != "localhost" && net.ParseIP(host) == nil:
			errs = append(errs, fmt.Errorf("SANDBOX_CONTENT_LISTEN: host %q must be an IP address or localhost", host))
		case p != 0 && l == c.Listen:
			errs = append(errs, errors.New("SANDBOX_CONTENT_LISTEN: the content listener needs an address of its own, not SANDBOX_LISTEN's"))
		}
	}
	return errors.Join(errs...)
}

// dnsName reports whether s is a lower-case DNS name of letters, digits
// and hyphens (no wildcard, no port, no trailing dot).
func dnsName(s string) bool {
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			b := label[i]
			if (b < 'a' || b > 'z') && (b < '0' || b > '9') && b != '-' {
				return false
			}
		}
	}
	return true
}

func checkAllowedHosts(c Config) error {
	if len(c.AllowedHosts) > maxListItems {
		return fmt.Errorf("SANDBOX_ALLOWED_HOSTS: at most %d names", maxListItems)
	}
	for _, h := range c.AllowedHosts {
		if h == "*" || strings.ContainsAny(h, "/ *@") {
			return fmt.Errorf("SANDBOX_ALLOWED_HOSTS: %q is not a host name (wildcards are not accepted)", h)
		}
	}
	return nil
}

func checkCORSOrigins(c Config) error {
	if len(c.CORSOrigins) > maxListItems {
		return fmt.Errorf("SANDBOX_CORS_ORIGINS: at most %d origins", maxListItems)
	}
	for _, o := range c.CORSOrigins {
		if o == "*" {
			return errors.New("SANDBOX_CORS_ORIGINS: \"*\" is refused; list the origins")
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.User != nil {
			return fmt.Errorf("SANDBOX_CORS_ORIGINS: %q is not an origin like https://app.example", o)
		}
	}
	return nil
}

// checkDatabaseURL accepts only PostgreSQL URLs: a typo (mysql://, a bare
// path) must not silently fall back to the single-host SQLite store while
// the operator believes the nodes share state. The value is never echoed.
func checkDatabaseURL(c Config) error {
	if c.DatabaseURL == "" {
		return nil
	}
	if !strings.HasPrefix(c.DatabaseURL, "postgres://") && !strings.HasPrefix(c.DatabaseURL, "postgresql://") {
		return errors.New("SANDBOX_DATABASE_URL: must be a postgres:// or postgresql:// URL")
	}
	if _, err := url.Parse(c.DatabaseURL); err != nil || strings.ContainsAny(c.DatabaseURL, " \t\n") {
		return errors.New("SANDBOX_DATABASE_URL: not a valid URL")
	}
	// Nodes sharing a database share the admin key row: a key generated per
	// node would overwrite the others' and lock them out.
	if c.APIKey == "" {
		return errors.New("SANDBOX_DATABASE_URL: needs SANDBOX_API_KEY set (the same admin key on every node)")
	}
	return nil
}

// maxNodeName: node names are DNS labels (Kubernetes pod names), at most 63.
const maxNodeName = 63

func checkNodeName(c Config) error {
	n := c.NodeName
	if n == "" {
		return nil
	}
	if len(n) > maxNodeName {
		return fmt.Errorf("SANDBOX_NODE_NAME: at most %d characters", maxNodeName)
	}
	for i, r := range n {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || (r == '-' || r == '.') && i > 0 && i < len(n)-1
		if !ok {
			return fmt.Errorf("SANDBOX_NODE_NAME: %q is not a lower-case DNS name", n)
		}
	}
	return nil
}

// minClusterSecret: the secret signs node-to-node requests; shorter is
// guessable offline from one captured signature.
const minClusterSecret = 32

// maxShutdownGrace: Kubernetes' own grace period is rarely longer; a longer
// one only delays a stuck node's replacement.
const maxShutdownGrace = 10 * time.Minute

func checkCluster(c Config) error {
	if c.ClusterSecret != "" && len(c.ClusterSecret) < minClusterSecret {
		return fmt.Errorf("SANDBOX_CLUSTER_SECRET: at least %d characters", minClusterSecret)
	}
	if c.ClusterSecret != "" && c.DatabaseURL == "" {
		return errors.New("SANDBOX_CLUSTER_SECRET: only meaningful with SANDBOX_DATABASE_URL (a cluster)")
	}
	if c.ShutdownGrace < 0 || c.ShutdownGrace > maxShutdownGrace {
		return fmt.Errorf("SANDBOX_SHUTDOWN_GRACE: between 0 and %v", maxShutdownGrace)
	}
	if c.NodeCapacity < 0 {
		return errors.New("SANDBOX_NODE_CAPACITY: must not be negative")
	}
	if c.MaxConnections < 0 || c.MaxConnectionsPerKey < 0 {
		return errors.New("SANDBOX_MAX_CONNECTIONS and SANDBOX_MAX_CONNECTIONS_PER_KEY: must not be negative")
	}
	if c.NodeAddr != "" {
		if _, _, err := net.SplitHostPort(c.NodeAddr); err != nil {
			return fmt.Errorf("SANDBOX_NODE_ADDR: %q is not host:port", c.NodeAddr)
		}
	}
	return nil
}
