package config

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"
)

// LoadOptions says where Load finds values besides the defaults.
type LoadOptions struct {
	// File is a YAML config file with flat keys (listen: ..., max_memory: 2GB);
	// empty means none.
	File string
	// Flags are command-line overrides by setting key ("listen",
	// "data_dir", "insecure_no_isolation"), only for flags the user set.
	Flags map[string]string
	// LookupEnv reads the environment; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
}

// Load builds a Config: defaults, then the config file, then SANDBOX_*
// environment variables, then flags, each layer overriding the one before.
// It does not validate; call Validate. An unparsable value is an error naming
// the setting's environment name and key.
func Load(opts LoadOptions) (Config, error) {
	lookup := opts.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	k := koanf.New(".")

	defaults := map[string]any{}
	for _, s := range settings {
		if s.def != "" {
			defaults[s.key] = s.def
		}
	}
	if err := k.Load(confmap.Provider(defaults, "."), nil); err != nil {
		return Config{}, fmt.Errorf("load defaults: %w", err)
	}

	if opts.File != "" {
		fk := koanf.New(".")
		if err := fk.Load(file.Provider(opts.File), yaml.Parser()); err != nil {
			return Config{}, fmt.Errorf("read config file: %w", err)
		}
		for _, key := range fk.Keys() {
			if !knownKey(key) {
				return Config{}, fmt.Errorf("config file: unknown setting %q", key)
			}
		}
		if err := k.Merge(fk); err != nil {
			return Config{}, fmt.Errorf("merge config file: %w", err)
		}
	}

	env := map[string]any{}
	for _, s := range settings {
		if v, ok := lookup(s.env); ok {
			env[s.key] = v
		}
	}
	if err := k.Load(confmap.Provider(env, "."), nil); err != nil {
		return Config{}, fmt.Errorf("load environment: %w", err)
	}

	flags := map[string]any{}
	for key, v := range opts.Flags {
		if !knownKey(key) {
			return Config{}, fmt.Errorf("unknown flag setting %q", key)
		}
		flags[key] = v
	}
	if err := k.Load(confmap.Provider(flags, "."), nil); err != nil {
		return Config{}, fmt.Errorf("load flags: %w", err)
	}

	var c Config
	for _, s := range settings {
		raw := k.Get(s.key)
		if raw == nil {
			continue
		}
		v, err := asText(raw)
		if err == nil {
			err = s.set(&c, v)
		}
		if err != nil {
			if s.secret {
				return Config{}, fmt.Errorf("setting %s (%s): invalid value", s.env, s.key)
			}
			return Config{}, fmt.Errorf("setting %s (%s): %w", s.env, s.key, err)
		}
	}
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir(func(name string) string { v, _ := lookup(name); return v })
	}
	return c, nil
}

func knownKey(key string) bool {
	for _, s := range settings {
		if s.key == key {
			return true
		}
	}
	return false
}

// asText renders a value from any layer (YAML gives bools, ints and lists)
// as the text the setting parsers take.
func asText(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case int:
		return strconv.Itoa(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case uint64:
		return strconv.FormatUint(x, 10), nil
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	case []any:
		if len(x) > maxListItems {
			return "", fmt.Errorf("list longer than %d items", maxListItems)
		}
		parts := make([]string, 0, len(x))
		for _, e := range x {
			s, err := asText(e)
			if err != nil {
				return "", err
			}
			if strings.Contains(s, ",") {
				return "", errors.New("list item contains a comma")
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, ","), nil
	default:
		return "", fmt.Errorf("unsupported value of type %T", v)
	}
}
