package daemon

import (
	"fmt"
	"net"
	"path/filepath"
)

// announce says what to do next once the server listens, as Caddy and
// Tailscale do: on a terminal a few lines for the person who started it
// (the console's URL, the CLI's login line, where the admin key is), else
// one log record with the same (a journal or a collector reads JSON).
func (d *Daemon) announce() {
	base := "http://" + localAddr(d.addr)
	key := filepath.Join(d.cfg.DataDir, AdminKeyFile)
	if d.cfg.APIKey != "" {
		key = "$SANDBOX_API_KEY"
	}
	if !IsTerminal(d.stderr) {
		d.log.Info("next steps", "console", base+"/", "login", "sandhold login "+base, "admin_key", key, "docs", base+"/docs")
		return
	}
	_, _ = fmt.Fprintf(d.stderr, `
sandhold is ready on %[1]s
  console  %[1]s/              sign in with the admin key (%[2]s)
  CLI      sandhold login %[1]s
           sandhold create --name demo && sandhold exec demo -- uname -a
  API      %[1]s/docs
  stop     Ctrl-C

`, base, key)
}

// localAddr is how this machine reaches a listen address: a wildcard host
// (0.0.0.0, ::) is reached at the loopback address.
func localAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
