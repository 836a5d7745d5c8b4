package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sandhold/sandhold/internal/ratelimit"
)

// setting is one configuration knob: its config-file/flag key, its
// environment name, its default (as text, parsed by set) and how to store a
// value into a Config.
type setting struct {
	key string // config file key and flag override key
	env string // environment variable
	def string // default, parsed like any other value ("" = none)
	doc string
	// secret settings are never echoed in errors.
	secret bool
	set    func(c *Config, v string) error
}

// settings is THE table of SANDBOX_* names: every environment variable the
// server reads is a string literal here and nowhere else in this package
// (SECURITY.md's inventory test parses the tree for such literals). It is a
// read-only table; nothing assigns to it.
var settings = []setting{
	{key: "api_key", env: "SANDBOX_API_KEY", secret: true, doc: "admin key; generated on first start when unset",
		set: func(c *Config, v string) error { c.APIKey = v; return nil }},
	{key: "listen", env: "SANDBOX_LISTEN", def: "127.0.0.1:8080", doc: "listen address",
		set: func(c *Config, v string) error { c.Listen = strings.TrimSpace(v); return nil }},
	{key: "data_dir", env: "SANDBOX_DATA_DIR", doc: "store, workspaces, audit (default: /var/lib/sandhold as root, else $XDG_DATA_HOME/sandhold)",
		set: func(c *Config, v string) error { c.DataDir = strings.TrimSpace(v); return nil }},
	{key: "enable_sudo", env: "SANDBOX_ENABLE_SUDO", def: "false", doc: "allow sudo: true (uid 0 inside the user namespace)",
		set: boolField(func(c *Config, b bool) { c.EnableSudo = b })},
	{key: "rate_limit", env: "SANDBOX_RATE_LIMIT", def: "true", doc: "per-key rate limits on",
		set: boolField(func(c *Config, b bool) { c.DisableRateLimit = !b })},
	{key: "rate_limits", env: "SANDBOX_RATE_LIMITS", def: "code=10/m,command=300/m:60,file=100/m,browser=20/m,read=600/m:120,manage=60/m:30,terminal=5,approvals=20",
		doc: "per-key limits by category (category=N/s|m|h[:burst]; terminal=N and approvals=N concurrent); code = /v1/code, /v1/jupyter, /v1/nodejs; command = exec, shell, bash (and custom tools that call several kinds); read = metadata and status reads; manage = sandbox lifecycle and configuration; approvals = calls waiting at once for an operator (X-Approval-Wait)",
		set: func(c *Config, v string) error {
			r, err := ratelimit.ParseRules(v)
			if err != nil {
				return err
			}
			c.RateLimits = r
			return nil
		}},
	{key: "network_restricted", env: "SANDBOX_NETWORK_RESTRICTED", def: "true", doc: "egress denied unless a sandbox's allowlist permits",
		set: boolField(func(c *Config, b bool) { c.NetworkUnrestricted = !b })},
	{key: "insecure_no_isolation", env: "SANDBOX_INSECURE_NO_ISOLATION", def: "false", doc: "start even when sandboxes cannot be isolated",
		set: boolField(func(c *Config, b bool) { c.InsecureNoIsolation = b })},
	{key: "max_file_size", env: "SANDBOX_MAX_FILE_SIZE", def: "10MB", doc: "largest file in one JSON file call",
		set: sizeField(func(c *Config, s Size) { c.MaxFileSize = s })},
	{key: "max_files_per_request", env: "SANDBOX_MAX_FILES_PER_REQUEST", def: "100", doc: "files touched by one request",
		set: intField(func(c *Config, n int) { c.MaxFilesPerRequest = n })},
	{key: "max_memory", env: "SANDBOX_MAX_MEMORY", def: "1GB", doc: "per sandbox memory",
		set: sizeField(func(c *Config, s Size) { c.MaxMemory = s })},
	{key: "max_cpu_time", env: "SANDBOX_MAX_CPU_TIME", def: "30s", doc: "per execution CPU time",
		set: durationField(func(c *Config, d time.Duration) { c.MaxCPUTime = d })},
	{key: "max_disk", env: "SANDBOX_MAX_DISK", def: "5GB", doc: "per sandbox workspace quota",
		set: sizeField(func(c *Config, s Size) { c.MaxDisk = s })},
	{key: "disk_budget", env: "SANDBOX_DISK_BUDGET", doc: "bytes the workspace images may take on the host together; growth stops there (default: 80% of the data dir's free space at start)",
		set: sizeField(func(c *Config, s Size) { c.DiskBudget = s })},
	{key: "disk_overcommit", env: "SANDBOX_DISK_OVERCOMMIT", def: "25", doc: "workspace quotas may promise this many times the disk budget together (1: no over-commit)",
		set: intField(func(c *Config, n int) { c.DiskOvercommit = n })},
	{key: "audit_retention", env: "SANDBOX_AUDIT_RETENTION", doc: "what the audit keeps on this host: an age (720h, 90d) and/or a size of stored records and archives together (4GB), comma separated; older records and those beyond half the size move to archives (audit-archive/), archives beyond the size are deleted oldest first; off keeps everything (default: a size of 5% of the data dir's free space at start)",
		set: func(c *Config, v string) error {
			r, err := ParseAuditRetention(v)
			c.AuditRetention = r
			return err
		}},
	{key: "max_processes", env: "SANDBOX_MAX_PROCESSES", def: "50", doc: "per sandbox pids",
		set: intField(func(c *Config, n int) { c.MaxProcesses = n })},
	{key: "max_ptys", env: "SANDBOX_MAX_PTYS", def: "64", doc: "per sandbox terminals (its devpts max=): shell sessions and the terminals its programs open",
		set: intField(func(c *Config, n int) { c.MaxPTYs = n })},
	{key: "output_budget", env: "SANDBOX_OUTPUT_BUDGET", def: "1GB", doc: "command output kept in server memory, all keys together; past it the oldest finished executions' output is evicted",
		set: sizeField(func(c *Config, s Size) { c.OutputBudget = s })},
	{key: "output_budget_per_key", env: "SANDBOX_OUTPUT_BUDGET_PER_KEY", def: "128MB", doc: "command output kept in server memory for the sandboxes of one key; past it that key's oldest finished executions' output is evicted",
		set: sizeField(func(c *Config, s Size) { c.OutputBudgetPerKey = s })},
	{key: "warm_pool", env: "SANDBOX_WARM_POOL", def: "2", doc: "pre-started sandboxes kept ready: N of the host template, and name:tag=N per template (\"2,python-data:3.12=1\")",
		set: parseWarmPool},
	{key: "spare_inits", env: "SANDBOX_SPARE_INITS", def: "2", doc: "inits cloned ahead, each with a host id range no sandbox has, and bound to the next cold creates (0: none)",
		set: intField(func(c *Config, n int) { c.SpareInits = n })},
	{key: "registries", env: "SANDBOX_REGISTRIES", doc: "OCI registries templates may be pulled from (comma separated hosts, e.g. registry.example.com; default none: pulls are refused)",
		set: func(c *Config, v string) error { c.Registries = splitList(v); return nil }},
	{key: "registry_auth_file", env: "SANDBOX_REGISTRY_AUTH_FILE", doc: "a Docker config.json with the server's credentials for those registries (never shown to clients or sandboxes)",
		set: func(c *Config, v string) error { c.RegistryAuthFile = strings.TrimSpace(v); return nil }},
	{key: "template_max_size", env: "SANDBOX_TEMPLATE_MAX_SIZE", def: "8GB", doc: "bytes one template's layers may hold unpacked",
		set: sizeField(func(c *Config, s Size) { c.TemplateMaxSize = s })},
	{key: "snapshot_dir", env: "SANDBOX_SNAPSHOT_DIR", doc: "where snapshots (and hibernated sandboxes) are kept; default <data dir>/snapshots; a directory every node mounts makes them shared by a cluster",
		set: func(c *Config, v string) error { c.SnapshotDir = strings.TrimSpace(v); return nil }},
	{key: "snapshot_budget", env: "SANDBOX_SNAPSHOT_BUDGET", def: "20GB", doc: "bytes the snapshots of one key may hold (hibernated sandboxes included); every snapshot also counts against SANDBOX_DISK_BUDGET",
		set: sizeField(func(c *Config, s Size) { c.SnapshotBudget = s })},
	{key: "max_sandboxes_per_key", env: "SANDBOX_MAX_SANDBOXES_PER_KEY", def: "10", doc: "live sandboxes per API key",
		set: intField(func(c *Config, n int) { c.MaxSandboxesPerKey = n })},
	{key: "sandbox_ttl", env: "SANDBOX_SANDBOX_TTL", def: "24h", doc: "idle time after which a sandbox is reaped",
		set: durationField(func(c *Config, d time.Duration) { c.SandboxTTL = d })},
	{key: "idle_sleep", env: "SANDBOX_IDLE_SLEEP", def: "4s", doc: "quiet period after which an idle sandbox's init sleeps in a one-page keeper and wakes on the next call (0: never)",
		set: func(c *Config, v string) error {
			d, err := time.ParseDuration(strings.TrimSpace(v))
			switch {
			case strings.TrimSpace(v) == "0" || (err == nil && d == 0):
				c.IdleSleep = -1 // never; the zero value means "the default"
			case err != nil || d <= 0:
				return fmt.Errorf("want 0 (never) or a duration like 30s or 5m, got %q", v)
			default:
				c.IdleSleep = d
			}
			return nil
		}},
	{key: "max_body", env: "SANDBOX_MAX_BODY", def: "16MB", doc: "JSON request body cap",
		set: sizeField(func(c *Config, s Size) { c.MaxBody = s })},
	{key: "body_budget", env: "SANDBOX_BODY_BUDGET", def: "256MB", doc: "request bodies the server holds in memory at once, all requests together (a quarter for one key); streamed uploads are not held",
		set: sizeField(func(c *Config, s Size) { c.BodyBudget = s })},
	{key: "allowed_hosts", env: "SANDBOX_ALLOWED_HOSTS", doc: "extra Host header names accepted (comma separated)",
		set: func(c *Config, v string) error { c.AllowedHosts = splitList(v); return nil }},
	{key: "cors_origins", env: "SANDBOX_CORS_ORIGINS", doc: "origins allowed cross-origin access (comma separated; default off)",
		set: func(c *Config, v string) error { c.CORSOrigins = splitList(v); return nil }},
	{key: "database_url", env: "SANDBOX_DATABASE_URL", secret: true, doc: "postgres://… for the shared store of a multi-node cluster (default: embedded SQLite in the data dir)",
		set: func(c *Config, v string) error { c.DatabaseURL = strings.TrimSpace(v); return nil }},
	{key: "node_name", env: "SANDBOX_NODE_NAME", doc: "this node's name in a cluster (default: the host name); each node's sandboxes carry it",
		set: func(c *Config, v string) error { c.NodeName = strings.TrimSpace(v); return nil }},
	{key: "node_addr", env: "SANDBOX_NODE_ADDR", doc: "host:port the other nodes of a cluster reach this node at (default: the listen address)",
		set: func(c *Config, v string) error { c.NodeAddr = strings.TrimSpace(v); return nil }},
	{key: "max_connections", env: "SANDBOX_MAX_CONNECTIONS", def: "0", doc: "HTTP connections served at once; beyond it only /healthz and /v1/control answer (0: half the open-file limit, at most 10000)",
		set: intField(func(c *Config, n int) { c.MaxConnections = n })},
	{key: "max_connections_per_key", env: "SANDBOX_MAX_CONNECTIONS_PER_KEY", def: "256", doc: "one API key's requests in progress (each holds a connection); beyond it 429",
		set: intField(func(c *Config, n int) { c.MaxConnectionsPerKey = n })},
	{key: "node_capacity", env: "SANDBOX_NODE_CAPACITY", def: "0", doc: "sandboxes this cluster node takes before placement skips it (0: no limit)",
		set: intField(func(c *Config, n int) { c.NodeCapacity = n })},
	{key: "cluster_secret", env: "SANDBOX_CLUSTER_SECRET", secret: true, doc: "shared secret authenticating node-to-node forwarding (at least 32 characters)",
		set: func(c *Config, v string) error { c.ClusterSecret = v; return nil }},
	{key: "shutdown_grace", env: "SANDBOX_SHUTDOWN_GRACE", def: "15s", doc: "on SIGTERM: how long running requests may finish (a cluster node first stops taking new sandboxes)",
		set: durationField(func(c *Config, d time.Duration) { c.ShutdownGrace = d })},
	{key: "preview_ports", env: "SANDBOX_PREVIEW_PORTS", def: DefaultPreviewPorts, doc: "ports a sandbox's servers may listen on (its own loopback) and the preview proxy reaches: a list of ports and ranges",
		set: func(c *Config, v string) error {
			p, err := ParsePorts(v)
			c.PreviewPorts = p
			return err
		}},
	{key: "content_domain", env: "SANDBOX_CONTENT_DOMAIN", doc: "DNS domain of the sandbox-content origin: {port}-{id}.<domain> serves what that sandbox controls (wildcard DNS to this server)",
		set: func(c *Config, v string) error {
			c.ContentDomain = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(v), "."))
			return nil
		}},
	{key: "content_listen", env: "SANDBOX_CONTENT_LISTEN", doc: "address of a second listener serving only sandbox content (its own origin), for hosts without wildcard DNS",
		set: func(c *Config, v string) error { c.ContentListen = strings.TrimSpace(v); return nil }},
	{key: "log_level", env: "SANDBOX_LOG_LEVEL", def: "info", doc: "debug, info, warn or error",
		set: func(c *Config, v string) error { c.LogLevel = strings.ToLower(strings.TrimSpace(v)); return nil }},
}

// Setting describes one knob for documentation and `sandhold serve --help`.
type Setting struct {
	Key, Env, Default, Doc string
}

// Settings lists every knob in table order.
func Settings() []Setting {
	out := make([]Setting, 0, len(settings))
	for _, s := range settings {
		out = append(out, Setting{Key: s.key, Env: s.env, Default: s.def, Doc: s.doc})
	}
	return out
}

// parseWarmPool reads SANDBOX_WARM_POOL: a number for the host template,
// and name:tag=N entries per template.
func parseWarmPool(c *Config, v string) error {
	c.WarmPool, c.WarmPools = 0, nil
	for _, p := range splitList(v) {
		name, n, per := strings.Cut(p, "=")
		if !per {
			n = name
		}
		k, err := strconv.Atoi(strings.TrimSpace(n))
		if err != nil {
			return fmt.Errorf("want N or name:tag=N entries, got %q", p)
		}
		if !per {
			c.WarmPool = k
			continue
		}
		if c.WarmPools == nil {
			c.WarmPools = map[string]int{}
		}
		c.WarmPools[strings.TrimSpace(name)] = k
	}
	return nil
}

func boolField(f func(*Config, bool)) func(*Config, string) error {
	return func(c *Config, v string) error {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("want true or false, got %q", v)
		}
		f(c, b)
		return nil
	}
}

func intField(f func(*Config, int)) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("want an integer, got %q", v)
		}
		f(c, n)
		return nil
	}
}

func sizeField(f func(*Config, Size)) func(*Config, string) error {
	return func(c *Config, v string) error {
		s, err := ParseSize(v)
		if err != nil {
			return err
		}
		f(c, s)
		return nil
	}
}

func durationField(f func(*Config, time.Duration)) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("want a duration like 30s or 24h, got %q", v)
		}
		f(c, d)
		return nil
	}
}

// maxListItems caps comma-separated lists so a pasted blob cannot blow up
// every Host check.
const maxListItems = 64

func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
