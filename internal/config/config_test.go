package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/ratelimit"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestDefaultsMatchArchitecture(t *testing.T) {
	c, err := Load(LoadOptions{LookupEnv: env(map[string]string{"SANDBOX_DATA_DIR": "/tmp/x"})})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	checks := []struct {
		name string
		ok   bool
	}{
		{"listen", c.Listen == "127.0.0.1:8080"},
		{"data dir from env", c.DataDir == "/tmp/x"},
		{"sudo off", !c.EnableSudo},
		{"rate limit on", !c.DisableRateLimit},
		{"network restricted", !c.NetworkUnrestricted},
		{"isolation required", !c.InsecureNoIsolation},
		{"max file size 10MB", c.MaxFileSize == 10_000_000},
		{"max files 100", c.MaxFilesPerRequest == 100},
		{"max memory 1GB", c.MaxMemory == 1_000_000_000},
		{"cpu 30s", c.MaxCPUTime == 30*time.Second},
		{"disk 5GB", c.MaxDisk == 5_000_000_000},
		{"disk over-commit 25", c.DiskOvercommit == 25},
		{"pids 50", c.MaxProcesses == 50},
		{"warm pool 2", c.WarmPool == 2},
		{"spare inits 2", c.SpareInits == 2},
		{"per key 10", c.MaxSandboxesPerKey == 10},
		{"ttl 24h", c.SandboxTTL == 24*time.Hour},
		{"body 16MB", c.MaxBody == 16_000_000},
		{"cors off", len(c.CORSOrigins) == 0},
		{"log info", c.LogLevel == "info"},
	}
	for _, ch := range checks {
		if !ch.ok {
			t.Errorf("default %s wrong: %+v", ch.name, c)
		}
	}
	if l := c.Loosenings(); len(l) != 0 {
		t.Errorf("defaults have loosenings: %v", l)
	}
}

func TestPrecedence(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(f, []byte("listen: 127.0.0.1:1111\nmax_memory: 2GB\nwarm_pool: 5\nrate_limit: false\nallowed_hosts: [a.example, b.example]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(LoadOptions{
		File:      f,
		LookupEnv: env(map[string]string{"SANDBOX_LISTEN": "127.0.0.1:2222", "SANDBOX_MAX_MEMORY": "512MiB", "SANDBOX_DATA_DIR": dir}),
		Flags:     map[string]string{"listen": "127.0.0.1:3333"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:3333" {
		t.Errorf("flag did not win: %s", c.Listen)
	}
	if c.MaxMemory != 512<<20 {
		t.Errorf("env did not beat file: %d", c.MaxMemory)
	}
	if c.WarmPool != 5 || !c.DisableRateLimit {
		t.Errorf("file values lost: %+v", c)
	}
	if strings.Join(c.AllowedHosts, ",") != "a.example,b.example" {
		t.Errorf("allowed hosts = %v", c.AllowedHosts)
	}
}

func TestBadValuesNameTheSetting(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"bad size", map[string]string{"SANDBOX_MAX_MEMORY": "lots"}, "SANDBOX_MAX_MEMORY"},
		{"negative size", map[string]string{"SANDBOX_MAX_DISK": "-5GB"}, "SANDBOX_MAX_DISK"},
		{"bad bool", map[string]string{"SANDBOX_RATE_LIMIT": "maybe"}, "SANDBOX_RATE_LIMIT"},
		{"bad int", map[string]string{"SANDBOX_WARM_POOL": "two"}, "SANDBOX_WARM_POOL"},
		{"bad duration", map[string]string{"SANDBOX_MAX_CPU_TIME": "30"}, "SANDBOX_MAX_CPU_TIME"},
		{"negative idle sleep", map[string]string{"SANDBOX_IDLE_SLEEP": "-5s"}, "SANDBOX_IDLE_SLEEP"},
		{"bad rate limits", map[string]string{"SANDBOX_RATE_LIMITS": "code=lots"}, "SANDBOX_RATE_LIMITS"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(LoadOptions{LookupEnv: env(tc.env)})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want mention of %s", err, tc.want)
			}
		})
	}
}

func TestSecretNotEchoed(t *testing.T) {
	c, err := Load(LoadOptions{LookupEnv: env(map[string]string{"SANDBOX_API_KEY": "short-secret-value", "SANDBOX_DATA_DIR": "/x"})})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Validate()
	if err == nil || strings.Contains(err.Error(), "short-secret-value") || !strings.Contains(err.Error(), "SANDBOX_API_KEY") {
		t.Fatalf("validate = %v", err)
	}
}

func TestValidateChecks(t *testing.T) {
	base := Config{DataDir: "/tmp/d"}.WithDefaults()
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string // "" = valid
	}{
		{"base", func(*Config) {}, ""},
		{"listen no port", func(c *Config) { c.Listen = "127.0.0.1" }, "SANDBOX_LISTEN"},
		{"listen hostname", func(c *Config) { c.Listen = "example.com:80" }, "SANDBOX_LISTEN"},
		{"listen port 0 ok", func(c *Config) { c.Listen = "127.0.0.1:0" }, ""},
		{"negative warm pool", func(c *Config) { c.WarmPool = -1 }, "SANDBOX_WARM_POOL"},
		{"negative spare inits", func(c *Config) { c.SpareInits = -1 }, "SANDBOX_SPARE_INITS"},
		{"too many spare inits", func(c *Config) { c.SpareInits = maxSpareInits + 1 }, "SANDBOX_SPARE_INITS"},
		{"no spare inits ok", func(c *Config) { c.SpareInits = 0 }, ""},
		{"zero processes", func(c *Config) { c.MaxProcesses = 0 }, "SANDBOX_MAX_PROCESSES"},
		{"negative over-commit", func(c *Config) { c.DiskOvercommit = -1 }, "SANDBOX_DISK_OVERCOMMIT"},
		{"huge over-commit", func(c *Config) { c.DiskOvercommit = 5000 }, "SANDBOX_DISK_OVERCOMMIT"},
		{"no over-commit ok", func(c *Config) { c.DiskOvercommit = 1 }, ""},
		{"huge body", func(c *Config) { c.MaxBody = 2 << 30 }, "SANDBOX_MAX_BODY"},
		{"tiny ttl", func(c *Config) { c.SandboxTTL = time.Second }, "SANDBOX_SANDBOX_TTL"},
		{"tiny idle sleep", func(c *Config) { c.IdleSleep = 10 * time.Millisecond }, "SANDBOX_IDLE_SLEEP"},
		{"log level", func(c *Config) { c.LogLevel = "loud" }, "SANDBOX_LOG_LEVEL"},
		{"cors star", func(c *Config) { c.CORSOrigins = []string{"*"} }, "SANDBOX_CORS_ORIGINS"},
		{"cors path", func(c *Config) { c.CORSOrigins = []string{"https://a.example/x"} }, "SANDBOX_CORS_ORIGINS"},
		{"cors ok", func(c *Config) { c.CORSOrigins = []string{"https://a.example"} }, ""},
		{"allowed host wildcard", func(c *Config) { c.AllowedHosts = []string{"*.example"} }, "SANDBOX_ALLOWED_HOSTS"},
		{"api key non-ascii", func(c *Config) { c.APIKey = strings.Repeat("é", 20) }, "SANDBOX_API_KEY"},
		{"api key ok", func(c *Config) { c.APIKey = strings.Repeat("k", 40) }, ""},
		{"empty data dir", func(c *Config) { c.DataDir = "" }, "SANDBOX_DATA_DIR"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.mutate(&c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want mention of %s", err, tc.want)
			}
		})
	}
}

func TestLoosenings(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"sudo", func(c *Config) { c.EnableSudo = true }, "SANDBOX_ENABLE_SUDO"},
		{"rate", func(c *Config) { c.DisableRateLimit = true }, "SANDBOX_RATE_LIMIT"},
		{"network", func(c *Config) { c.NetworkUnrestricted = true }, "SANDBOX_NETWORK_RESTRICTED"},
		{"isolation", func(c *Config) { c.InsecureNoIsolation = true }, "SANDBOX_INSECURE_NO_ISOLATION"},
		{"all interfaces", func(c *Config) { c.Listen = ":8080" }, "SANDBOX_LISTEN"},
		{"public ip", func(c *Config) { c.Listen = "0.0.0.0:8080" }, "SANDBOX_LISTEN"},
		{"cors", func(c *Config) { c.CORSOrigins = []string{"https://a.example"} }, "SANDBOX_CORS_ORIGINS"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{DataDir: "/d"}.WithDefaults()
			tc.mutate(&c)
			l := c.Loosenings()
			if len(l) != 1 || !strings.Contains(l[0], tc.want) {
				t.Fatalf("loosenings = %v", l)
			}
		})
	}
	for _, l := range []string{"127.0.0.1:1", "[::1]:1", "localhost:1", "127.9.9.9:1"} {
		if !IsLoopbackListen(l) {
			t.Errorf("%s not loopback", l)
		}
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want Size
		ok   bool
	}{
		{"10MB", 10_000_000, true},
		{"1GB", 1_000_000_000, true},
		{"512KiB", 512 << 10, true},
		{"42", 42, true},
		{"", 0, false},
		{"-1", 0, false},
		{"ten", 0, false},
		{"99999999999EB", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseSize(tc.in)
			if (err == nil) != tc.ok || got != tc.want {
				t.Fatalf("ParseSize(%q) = %d, %v", tc.in, got, err)
			}
		})
	}
}

func TestUnknownFileKeyRefused(t *testing.T) {
	f := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(f, []byte("lisen: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(LoadOptions{File: f, LookupEnv: env(nil)}); err == nil || !strings.Contains(err.Error(), "lisen") {
		t.Fatalf("err = %v", err)
	}
}

// TestRateLimitsSetting: SANDBOX_RATE_LIMITS reaches the config as rules,
// and the default names the documented numbers.
func TestRateLimitsSetting(t *testing.T) {
	c, err := Load(LoadOptions{LookupEnv: env(map[string]string{"SANDBOX_RATE_LIMITS": "code=20/m,command=5/s:10"})})
	if err != nil {
		t.Fatal(err)
	}
	if r := c.RateLimits[ratelimit.Exec]; r.PerMinute != 20 || r.Burst != 20 {
		t.Errorf("code: %+v", r)
	}
	if r := c.RateLimits[ratelimit.Command]; r.PerMinute != 300 || r.Burst != 10 {
		t.Errorf("command: %+v", r)
	}
	d, err := Load(LoadOptions{LookupEnv: env(nil)})
	if err != nil {
		t.Fatal(err)
	}
	want := ratelimit.DefaultRules()
	for _, cat := range []ratelimit.Category{ratelimit.Exec, ratelimit.File, ratelimit.Browser, ratelimit.Terminal, ratelimit.Command} {
		if d.RateLimits[cat] != want[cat] {
			t.Errorf("default %s: %+v, want %+v", cat, d.RateLimits[cat], want[cat])
		}
	}
}

// SANDBOX_IDLE_SLEEP: unset is the 4 s default, "0" is never (a negative
// period, as the sandbox manager reads it), a duration is that period.
func TestIdleSleepSetting(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want time.Duration
	}{
		{map[string]string{}, 4 * time.Second},
		{map[string]string{"SANDBOX_IDLE_SLEEP": "0"}, -1},
		{map[string]string{"SANDBOX_IDLE_SLEEP": "0s"}, -1},
		{map[string]string{"SANDBOX_IDLE_SLEEP": "2m"}, 2 * time.Minute},
	} {
		tc.env["SANDBOX_DATA_DIR"] = t.TempDir()
		c, err := Load(LoadOptions{LookupEnv: env(tc.env)})
		if err != nil {
			t.Fatalf("%v: %v", tc.env, err)
		}
		if c.IdleSleep != tc.want {
			t.Errorf("%v: IdleSleep %v, want %v", tc.env, c.IdleSleep, tc.want)
		}
	}
}
