// Package config is sandhold's one configuration value: its fields, their
// defaults, the SANDBOX_* environment names, loading with the precedence
// flags > environment > config file > defaults (koanf), and validation.
//
// It exists so that no other package reads the environment or invents a
// default: every knob is declared once, in the settings table in settings.go,
// with the environment name as a string literal (SECURITY.md's inventory test
// checks that table against the documentation). Boolean fields are named so
// that their zero value is the safe one (DisableRateLimit, not RateLimit), and
// numeric zero values mean "use the default" (see WithDefaults), so a zero
// Config is never looser than the defaults.
package config

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/sandhold/sandhold/internal/ratelimit"
)

// Config is the whole server configuration. It is a plain value: pass it
// down, do not keep a global copy.
type Config struct {
	// Listen is the TCP address the HTTP API binds (SANDBOX_LISTEN,
	// default 127.0.0.1:8080). A non-loopback address is a loosening.
	Listen string
	// DataDir holds the store, workspaces, the audit head and the admin key
	// file (SANDBOX_DATA_DIR). Created 0700.
	DataDir string
	// APIKey is the admin key when set by the operator (SANDBOX_API_KEY);
	// empty means "generate one on first start and keep it in the data dir".
	// Never logged.
	APIKey string

	// EnableSudo allows `sudo: true` executions (uid 0 inside the sandbox's
	// user namespace). Default false (SANDBOX_ENABLE_SUDO).
	EnableSudo bool
	// DisableRateLimit turns per-key rate limits off (SANDBOX_RATE_LIMIT=false).
	DisableRateLimit bool
	// RateLimits are per-category rules over the defaults
	// (SANDBOX_RATE_LIMITS); nil keeps ratelimit.DefaultRules.
	RateLimits ratelimit.Rules
	// NetworkUnrestricted lets sandboxes use network mode "host" and lifts the
	// default egress denial (SANDBOX_NETWORK_RESTRICTED=false).
	NetworkUnrestricted bool
	// InsecureNoIsolation lets the server start when the kernel cannot isolate
	// sandboxes (SANDBOX_INSECURE_NO_ISOLATION, --insecure-no-isolation).
	InsecureNoIsolation bool

	// MaxFileSize caps one file in a JSON file call (SANDBOX_MAX_FILE_SIZE, 10MB).
	MaxFileSize Size
	// MaxFilesPerRequest caps files touched by one request (SANDBOX_MAX_FILES_PER_REQUEST, 100).
	MaxFilesPerRequest int
	// MaxMemory is the per-sandbox memory limit (SANDBOX_MAX_MEMORY, 1GB).
	MaxMemory Size
	// MaxCPUTime is the per-execution CPU time limit (SANDBOX_MAX_CPU_TIME, 30s).
	MaxCPUTime time.Duration
	// MaxDisk is the per-sandbox workspace quota (SANDBOX_MAX_DISK, 5GB).
	MaxDisk Size
	// DiskBudget is what the workspace images may take on the host
	// together (SANDBOX_DISK_BUDGET): the disk guard stops their growth
	// there. 0 (default): DefaultDiskBudgetPercent of the data dir's free
	// space at start, computed by the server.
	DiskBudget Size
	// DiskOvercommit is how many times DiskBudget the workspace quotas may
	// promise together (SANDBOX_DISK_OVERCOMMIT, 25; 1: no over-commit):
	// images are sparse and most workspaces fill a small part of their
	// quota, so promises are admitted beyond the bytes there are, and the
	// guard keeps the bytes actually written within the budget.
	DiskOvercommit int
	// AuditRetention bounds what the audit keeps on this host
	// (SANDBOX_AUDIT_RETENTION; retention.go).
	AuditRetention AuditRetention
	// MaxProcesses is the per-sandbox pids limit (SANDBOX_MAX_PROCESSES, 50).
	MaxProcesses int
	// MaxPTYs caps each sandbox's terminals, its devpts max= (SANDBOX_MAX_PTYS, 64).
	MaxPTYs int
	// OutputBudget caps the command output the server keeps in memory in
	// all (SANDBOX_OUTPUT_BUDGET, 1GB), OutputBudgetPerKey per sandbox
	// owner (SANDBOX_OUTPUT_BUDGET_PER_KEY, 128MB): past them the oldest
	// finished executions' output is evicted.
	OutputBudget       Size
	OutputBudgetPerKey Size
	// WarmPool is the number of pre-started sandboxes kept ready (SANDBOX_WARM_POOL, 2).
	WarmPool int
	// SpareInits is the number of inits cloned ahead for cold creates
	// (SANDBOX_SPARE_INITS, 2; 0 none).
	SpareInits int
	// WarmPools are pre-started sandboxes per template, by the template's
	// public name:tag (SANDBOX_WARM_POOL's name=N entries).
	WarmPools map[string]int
	// Registries are the OCI registries templates may be pulled from
	// (SANDBOX_REGISTRIES, comma separated hosts; default none: pulls are
	// refused).
	Registries []string
	// RegistryAuthFile is a Docker config.json whose "auths" hold the
	// server's credentials for those registries (SANDBOX_REGISTRY_AUTH_FILE);
	// they are never shown to a client or put in a sandbox.
	RegistryAuthFile string
	// TemplateMaxSize caps one template's layers (SANDBOX_TEMPLATE_MAX_SIZE, 8GB).
	TemplateMaxSize Size
	// SnapshotDir keeps snapshots (SANDBOX_SNAPSHOT_DIR; "": the data
	// dir's snapshots/), shared by the nodes of a cluster when they all
	// mount it.
	SnapshotDir string
	// SnapshotBudget bounds one key's snapshots (SANDBOX_SNAPSHOT_BUDGET, 20GB).
	SnapshotBudget Size
	// MaxSandboxesPerKey caps live sandboxes per API key (SANDBOX_MAX_SANDBOXES_PER_KEY, 10).
	MaxSandboxesPerKey int
	// SandboxTTL is the idle time after which a sandbox is reaped (SANDBOX_SANDBOX_TTL, 24h).
	SandboxTTL time.Duration
	// IdleSleep is the quiet period after which an idle sandbox's init
	// sleeps in its one-page keeper (SANDBOX_IDLE_SLEEP, 4s); negative:
	// never (the setting's 0).
	IdleSleep time.Duration
	// MaxBody caps a JSON request body (SANDBOX_MAX_BODY, 16MB).
	MaxBody Size
	// BodyBudget caps the request bodies held in memory at once, all
	// requests together (SANDBOX_BODY_BUDGET, 256MB; a quarter of it for
	// one key). Streamed uploads are not held, so not counted.
	BodyBudget Size

	// AllowedHosts are extra Host header names accepted besides the loopback
	// names and the listen host (SANDBOX_ALLOWED_HOSTS, comma separated).
	AllowedHosts []string
	// CORSOrigins are the browser origins allowed cross-origin access
	// (SANDBOX_CORS_ORIGINS, comma separated). Empty (default) = CORS off.
	CORSOrigins []string
	// LogLevel is debug, info, warn or error (SANDBOX_LOG_LEVEL, info).
	LogLevel string

	// DatabaseURL selects the PostgreSQL store shared by the nodes of a
	// cluster (SANDBOX_DATABASE_URL, postgres://…). Empty (default) = the
	// embedded SQLite database in DataDir. It may carry a password: never
	// logged, audited or echoed in errors.
	DatabaseURL string
	// NodeName names this node in a cluster (SANDBOX_NODE_NAME, default the
	// host name): its sandbox records in the shared store carry it, and it
	// loads only those. Unique per node (a StatefulSet pod name).
	NodeName string
	// NodeAddr is the host:port the other nodes forward this node's
	// sandboxes' requests to (SANDBOX_NODE_ADDR, default the listen
	// address; in Kubernetes the pod IP).
	NodeAddr string
	// NodeCapacity is how many sandboxes this node takes before placement
	// skips it (SANDBOX_NODE_CAPACITY, 0: no limit).
	NodeCapacity int
	// ClusterSecret authenticates node-to-node forwarding
	// (SANDBOX_CLUSTER_SECRET). Without it a node serves only its own
	// sandboxes. Never logged.
	ClusterSecret string
	// ShutdownGrace is how long running requests may finish after SIGTERM
	// (SANDBOX_SHUTDOWN_GRACE, 15s; zero means the default).
	ShutdownGrace time.Duration
	// PreviewPorts are the ports inside a sandbox that its code may bind
	// on its own loopback and that /sandboxes/{id}/proxy/{port}/ reaches
	// (SANDBOX_PREVIEW_PORTS; ports.go).
	PreviewPorts []uint16
	// ContentDomain is the DNS domain of the sandbox-content origin
	// (SANDBOX_CONTENT_DOMAIN): requests for {port}-{id}.<domain> (a
	// wildcard DNS name pointing at this server) are served what the
	// sandbox id controls — the preview of that port, the DevTools relay
	// (9222), the desktop (5900) — on an origin of their own that never
	// sees the console's cookie. Empty: none.
	ContentDomain string
	// ContentListen is the address of a second listener that serves only
	// sandbox content, on the path forms (SANDBOX_CONTENT_LISTEN), for
	// hosts without wildcard DNS. Empty: none.
	ContentListen string
	// MaxConnections bounds the HTTP connections served at once
	// (SANDBOX_MAX_CONNECTIONS; 0: half the process's open-file limit, at
	// most 10000). Beyond it only /healthz and /v1/control are answered,
	// on a small reserve; beyond that a connection gets 503 and is closed.
	MaxConnections int
	// MaxConnectionsPerKey bounds one API key's requests in progress, each
	// holding a connection (SANDBOX_MAX_CONNECTIONS_PER_KEY, 256): beyond
	// it a request is answered 429 and its connection closed.
	MaxConnectionsPerKey int
}

// DefaultDiskBudgetPercent is the share of the data dir's free space at
// start (plus what existing workspaces already hold) that the workspace
// quotas may promise when SANDBOX_DISK_BUDGET is unset: the rest stays for
// the store, the audit log and the host.
const DefaultDiskBudgetPercent = 80

// Size is a byte count that parses "10MB", "1GB", "512KiB" or plain bytes.
type Size int64

// ParseSize parses a human size. Decimal units (kB, MB, GB) are powers of
// 1000, binary units (KiB, MiB, GiB) powers of 1024.
func ParseSize(s string) (Size, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty size")
	}
	if strings.HasPrefix(s, "-") {
		return 0, fmt.Errorf("negative size %q", s)
	}
	n, err := humanize.ParseBytes(s)
	if err != nil {
		return 0, fmt.Errorf("bad size %q (want e.g. 10MB, 512KiB)", s)
	}
	if n > 1<<62 {
		return 0, fmt.Errorf("size %q too large", s)
	}
	return Size(n), nil // #nosec G115 -- bounded just above
}

// String renders the size in binary units.
func (s Size) String() string {
	if s < 0 {
		return fmt.Sprintf("%d", int64(s))
	}
	return humanize.IBytes(uint64(s))
}

// Bytes returns the size as an int64.
func (s Size) Bytes() int64 { return int64(s) }

// UnmarshalText lets a Size be decoded from text (flags, JSON).
func (s *Size) UnmarshalText(b []byte) error {
	v, err := ParseSize(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// Default returns the defaults of ARCHITECTURE.md §2.2, with DataDir
// resolved for the current user (see DefaultDataDir).
func Default() Config {
	var c Config
	for _, s := range settings {
		if s.def == "" {
			continue
		}
		if err := s.set(&c, s.def); err != nil {
			panic(fmt.Sprintf("config: bad built-in default for %s: %v", s.env, err))
		}
	}
	c.DataDir = DefaultDataDir(os.Getenv)
	return c
}

// WithDefaults returns c with every zero numeric/size/duration/string field
// replaced by its default, so a partially filled Config (as tests build) is
// complete. Booleans are untouched: their zero value is already the safe one.
func (c Config) WithDefaults() Config {
	d := Default()
	if c.Listen == "" {
		c.Listen = d.Listen
	}
	if c.DataDir == "" {
		c.DataDir = d.DataDir
	}
	if c.MaxFileSize == 0 {
		c.MaxFileSize = d.MaxFileSize
	}
	if c.MaxFilesPerRequest == 0 {
		c.MaxFilesPerRequest = d.MaxFilesPerRequest
	}
	if c.MaxMemory == 0 {
		c.MaxMemory = d.MaxMemory
	}
	if c.MaxCPUTime == 0 {
		c.MaxCPUTime = d.MaxCPUTime
	}
	if c.MaxDisk == 0 {
		c.MaxDisk = d.MaxDisk
	}
	if c.DiskOvercommit == 0 {
		c.DiskOvercommit = d.DiskOvercommit
	}
	if c.MaxProcesses == 0 {
		c.MaxProcesses = d.MaxProcesses
	}
	if c.MaxPTYs == 0 {
		c.MaxPTYs = d.MaxPTYs
	}
	if c.OutputBudget == 0 {
		c.OutputBudget = d.OutputBudget
	}
	if c.OutputBudgetPerKey == 0 {
		c.OutputBudgetPerKey = d.OutputBudgetPerKey
	}
	if c.MaxSandboxesPerKey == 0 {
		c.MaxSandboxesPerKey = d.MaxSandboxesPerKey
	}
	if c.SandboxTTL == 0 {
		c.SandboxTTL = d.SandboxTTL
	}
	if c.IdleSleep == 0 {
		c.IdleSleep = d.IdleSleep
	}
	if c.MaxBody == 0 {
		c.MaxBody = d.MaxBody
	}
	if c.BodyBudget == 0 {
		c.BodyBudget = d.BodyBudget
	}
	if c.TemplateMaxSize == 0 {
		c.TemplateMaxSize = d.TemplateMaxSize
	}
	if c.SnapshotBudget == 0 {
		c.SnapshotBudget = d.SnapshotBudget
	}
	if c.MaxConnectionsPerKey == 0 {
		c.MaxConnectionsPerKey = d.MaxConnectionsPerKey
	}
	if c.LogLevel == "" {
		c.LogLevel = d.LogLevel
	}
	// WarmPool and SpareInits: 0 is a legitimate choice (none), so they
	// keep their values.
	return c
}

// DefaultDataDir returns ARCHITECTURE.md §2.1's data dir: $SANDBOX_DATA_DIR,
// else /var/lib/sandhold as root, else $XDG_DATA_HOME/sandhold, else
// ~/.local/share/sandhold. getenv is os.Getenv outside tests.
func DefaultDataDir(getenv func(string) string) string {
	if d := getenv("SANDBOX_DATA_DIR"); d != "" {
		return d
	}
	if os.Geteuid() == 0 {
		return "/var/lib/sandhold"
	}
	if x := getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "sandhold")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share", "sandhold")
	}
	return filepath.Join(os.TempDir(), "sandhold-"+fmt.Sprint(os.Geteuid()))
}

// Loosenings lists, one line each, every setting that is weaker than the
// default. The daemon logs each loudly and writes a config.loosen audit record.
func (c Config) Loosenings() []string {
	var out []string
	if c.EnableSudo {
		out = append(out, "SANDBOX_ENABLE_SUDO=true: sandboxes may run as uid 0 inside their user namespace")
	}
	if c.DisableRateLimit {
		out = append(out, "SANDBOX_RATE_LIMIT=false: per-key rate limits are off")
	}
	if c.NetworkUnrestricted {
		out = append(out, "SANDBOX_NETWORK_RESTRICTED=false: sandboxes may be given unrestricted (host) network access")
	}
	if c.InsecureNoIsolation {
		out = append(out, "SANDBOX_INSECURE_NO_ISOLATION=true: the server runs even when sandboxes cannot be isolated")
	}
	if c.Listen != "" && !IsLoopbackListen(c.Listen) {
		out = append(out, fmt.Sprintf("SANDBOX_LISTEN=%s: the API is reachable from other hosts; put TLS (a reverse proxy) in front", c.Listen))
	}
	if len(c.CORSOrigins) > 0 {
		out = append(out, fmt.Sprintf("SANDBOX_CORS_ORIGINS=%s: browsers on these origins may call the API", strings.Join(c.CORSOrigins, ",")))
	}
	if c.AuditRetention.Off {
		out = append(out, "SANDBOX_AUDIT_RETENTION=off: the audit log grows without a bound on the data dir's disk")
	}
	if len(c.AllowedHosts) > 0 {
		out = append(out, fmt.Sprintf("SANDBOX_ALLOWED_HOSTS=%s: extra Host names are accepted", strings.Join(c.AllowedHosts, ",")))
	}
	if c.ContentListen != "" && !IsLoopbackListen(c.ContentListen) {
		out = append(out, fmt.Sprintf("SANDBOX_CONTENT_LISTEN=%s: sandbox content is reachable from other hosts; put TLS (a reverse proxy) in front", c.ContentListen))
	}
	return out
}

// IsLoopbackListen reports whether a listen address binds only loopback.
// "localhost" counts; an empty host (":8080") or 0.0.0.0 does not.
func IsLoopbackListen(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// validLogLevels are the slog levels LogLevel accepts.
var validLogLevels = []string{"debug", "info", "warn", "error"}

func validLogLevel(s string) bool { return slices.Contains(validLogLevels, strings.ToLower(s)) }
