package sandbox

import (
	"testing"
)

func TestNetEnv(t *testing.T) {
	s := &Sandbox{rec: Record{Spec: Spec{Network: Network{Mode: NetworkProxy}}}}
	env := s.netEnv(map[string]string{"HTTPS_PROXY": "http://mine:1"})
	if env["HTTP_PROXY"] != "http://127.0.0.1:3128" || env["https_proxy"] != "http://127.0.0.1:3128" ||
		env["HTTPS_PROXY"] != "http://mine:1" || env["NO_PROXY"] != "localhost,127.0.0.1,::1" {
		t.Fatalf("proxy env: %v", env)
	}
	none := &Sandbox{rec: Record{Spec: Spec{Network: Network{Mode: NetworkNone}}}}
	if env := none.netEnv(map[string]string{"A": "b"}); len(env) != 1 {
		t.Fatalf("none sandbox env: %v", env)
	}
}
