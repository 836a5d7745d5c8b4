package config

import (
	"strings"
	"testing"
	"time"
)

func TestDatabaseURL(t *testing.T) {
	const pw = "s3cretpass"
	tests := []struct {
		name string
		url  string
		ok   bool
	}{
		{"unset is sqlite", "", true},
		{"postgres", "postgres://sandhold:" + pw + "@db:5432/sandhold?sslmode=verify-full", true},
		{"postgresql", "postgresql://db/sandhold", true},
		{"mysql refused", "mysql://sandhold:" + pw + "@db/x", false},
		{"bare path refused", "/var/lib/sandhold/db", false},
		{"libpq key=value refused", "host=db password=" + pw, false},
		{"whitespace refused", "postgres://sandhold:" + pw + "@db/x y", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(LoadOptions{LookupEnv: env(map[string]string{"SANDBOX_DATABASE_URL": tc.url, "SANDBOX_DATA_DIR": "/x",
				"SANDBOX_API_KEY": strings.Repeat("k", 40)})})
			if err != nil {
				t.Fatal(err)
			}
			if c.DatabaseURL != tc.url {
				t.Fatalf("DatabaseURL = %q", c.DatabaseURL)
			}
			err = c.Validate()
			if tc.ok != (err == nil) {
				t.Fatalf("validate = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && (strings.Contains(err.Error(), pw) || !strings.Contains(err.Error(), "SANDBOX_DATABASE_URL")) {
				t.Fatalf("error echoes the URL or does not name the setting: %v", err)
			}
		})
	}
}

func TestDatabaseURLNeedsSharedAdminKey(t *testing.T) {
	c := Config{DataDir: "/x", DatabaseURL: "postgres://db/sandhold"}.WithDefaults()
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "SANDBOX_API_KEY") {
		t.Fatalf("validate = %v, want a demand for SANDBOX_API_KEY", err)
	}
}

func TestNodeName(t *testing.T) {
	for name, ok := range map[string]bool{"": true, "sandhold-0": true, "node.a": true, "Node": false, "-a": false, "a b": false, "a/b": false, strings.Repeat("a", 64): false} {
		c := Config{DataDir: "/x", NodeName: name}.WithDefaults()
		if err := c.Validate(); (err == nil) != ok {
			t.Errorf("%q: validate = %v, want ok=%v", name, err, ok)
		}
	}
}

func TestClusterSettings(t *testing.T) {
	base := Config{DataDir: "/x", DatabaseURL: "postgres://db/x", APIKey: strings.Repeat("k", 40)}.WithDefaults()
	tests := []struct {
		name   string
		mutate func(*Config)
		ok     bool
	}{
		{"no secret", func(*Config) {}, true},
		{"secret", func(c *Config) { c.ClusterSecret = strings.Repeat("s", 32) }, true},
		{"short secret", func(c *Config) { c.ClusterSecret = "tooshort-secret" }, false},
		{"secret without a database", func(c *Config) { c.ClusterSecret, c.DatabaseURL = strings.Repeat("s", 32), "" }, false},
		{"node addr", func(c *Config) { c.NodeAddr = "10.0.0.7:8080" }, true},
		{"node addr without port", func(c *Config) { c.NodeAddr = "10.0.0.7" }, false},
		{"grace", func(c *Config) { c.ShutdownGrace = 30 * time.Second }, true},
		{"negative grace", func(c *Config) { c.ShutdownGrace = -time.Second }, false},
		{"endless grace", func(c *Config) { c.ShutdownGrace = time.Hour }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.mutate(&c)
			err := c.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("validate = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && strings.Contains(err.Error(), "tooshort-secret") {
				t.Fatalf("error echoes the secret: %v", err)
			}
		})
	}
}
