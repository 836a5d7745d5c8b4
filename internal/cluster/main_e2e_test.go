package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/agent/agenttest"
	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/daemon"
	"github.com/sandhold/sandhold/internal/store/pgtest"
)

// TestMain lets the test binary serve as the sandboxes' init and as a
// node in a process of its own ("cluster-node": the 3-node test kills one
// with SIGKILL), and stops the throw-away PostgreSQL.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "init" {
		agenttest.Main(m) // runs the init and exits
	}
	if len(os.Args) > 1 && os.Args[1] == "cluster-node" {
		os.Exit(serveNode())
	}
	os.Exit(pgtest.Main(m))
}

// nodeConfigEnv carries a child node's configuration (JSON).
const nodeConfigEnv = "SANDHOLD_TEST_NODE_CONFIG"

// nodeConfig is what a child node's configuration may set (the rest
// takes the defaults).
type nodeConfig struct {
	DataDir, DatabaseURL, APIKey, NodeName, ClusterSecret string
	WarmPool                                              int
	MaxDisk                                               int64
	// LogFile receives the node's log (debug level) and its stderr,
	// appended: the test reads it for secrets.
	LogFile string
}

func childConfig(c config.Config) nodeConfig {
	return nodeConfig{DataDir: c.DataDir, DatabaseURL: c.DatabaseURL, APIKey: c.APIKey, NodeName: c.NodeName,
		ClusterSecret: c.ClusterSecret, WarmPool: c.WarmPool, MaxDisk: c.MaxDisk.Bytes()}
}

// serveNode runs one daemon with the configuration in nodeConfigEnv until
// SIGTERM, and writes its address to <data dir>/addr once it listens.
func serveNode() int {
	var nc nodeConfig
	if err := json.Unmarshal([]byte(os.Getenv(nodeConfigEnv)), &nc); err != nil {
		fmt.Fprintln(os.Stderr, "cluster-node:", err)
		return 2
	}
	cfg := config.Config{Listen: "127.0.0.1:0", DisableRateLimit: true, DataDir: nc.DataDir, DatabaseURL: nc.DatabaseURL,
		APIKey: nc.APIKey, NodeName: nc.NodeName, ClusterSecret: nc.ClusterSecret, WarmPool: nc.WarmPool,
		MaxDisk: config.Size(nc.MaxDisk)}
	logw := io.Discard
	if nc.LogFile != "" {
		f, err := os.OpenFile(nc.LogFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			fmt.Fprintln(os.Stderr, "cluster-node:", err)
			return 2
		}
		defer func() { _ = f.Close() }()
		logw = f
	}
	d, err := daemon.New(cfg, daemon.WithLogger(daemon.NewLogger(logw, "debug")), daemon.WithStderr(logw))
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster-node:", err)
		return 1
	}
	go func() {
		<-d.Ready()
		_ = os.WriteFile(filepath.Join(cfg.DataDir, "addr"), []byte(d.Addr()), 0o600)
	}()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := d.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "cluster-node:", err)
		return 1
	}
	return 0
}

// childNode is a node in a process of its own.
type childNode struct {
	node
	cmd    *exec.Cmd
	exited <-chan struct{}
}

// startChildNode starts a node process on cfg and waits until it listens;
// its log goes to logFile (appended) when that is set.
func startChildNode(t *testing.T, cfg config.Config, logFile string) childNode {
	t.Helper()
	nc := childConfig(cfg)
	nc.LogFile = logFile
	b, err := json.Marshal(nc) // #nosec G117 -- the test's own fixed key, to its own child process
	if err != nil {
		t.Fatal(err)
	}
	addrFile := filepath.Join(cfg.DataDir, "addr")
	_ = os.Remove(addrFile)
	cmd := exec.Command("/proc/self/exe", "cluster-node")
	cmd.Env = append(os.Environ(), nodeConfigEnv+"="+string(b))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	for start := time.Now(); time.Since(start) < 60*time.Second; time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(addrFile); err == nil && len(b) > 0 {
			return childNode{node: node{t: t, base: "http://" + string(b)}, cmd: cmd, exited: exited}
		}
		select {
		case <-exited:
			t.Fatalf("node %s exited before it listened", cfg.NodeName)
		default:
		}
	}
	t.Fatalf("node %s did not come up", cfg.NodeName)
	return childNode{}
}
