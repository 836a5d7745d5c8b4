package coderun

import _ "embed"

// The drivers run inside the sandbox; see doc.go and frame.go.
var (
	//go:embed drivers/python.py
	pythonDriver string
	//go:embed drivers/node.js
	nodeDriver string
	//go:embed drivers/bash.sh
	bashDriver string
)

// Languages.
const (
	Python     = "python"
	JavaScript = "javascript"
	Bash       = "bash"
)

// runtime is how one language's interpreter is started inside the sandbox.
type runtime struct {
	exe  string
	argv func(nonce string) []string
	desc string
	env  map[string]string
}

// runtimes is the table of supported languages. The interpreters are the
// host's /usr (mounted read-only into every sandbox).
var runtimes = map[string]runtime{
	Python: {exe: "/usr/bin/python3", desc: "Python 3 (stateful sessions keep variables; matplotlib figures become PNG outputs)",
		env: map[string]string{
			// Agg renders figures without a display; the driver turns
			// open figures into PNG outputs.
			"MPLBACKEND": "Agg",
			// Debian's matplotlib looks for /etc/matplotlibrc, which the
			// sandbox's synthetic /etc does not have; its copy under
			// /usr is the same file.
			"MATPLOTLIBRC": "/usr/share/matplotlib/mpl-data/matplotlibrc",
			// Font caches go to /tmp, not into the workspace.
			"MPLCONFIGDIR": "/tmp/.matplotlib",
			// Output leaves as it is printed (a caller streaming it, as
			// E2B's runCode does, sees each line when it happens).
			"PYTHONUNBUFFERED": "1",
		},
		argv: func(n string) []string { return []string{"/usr/bin/python3", "-c", pythonDriver, n} }},
	JavaScript: {exe: "/usr/bin/node", desc: "Node.js (stateful sessions share one vm context)",
		argv: func(n string) []string { return []string{"/usr/bin/node", "-e", nodeDriver, n} }},
	Bash: {exe: "/bin/bash", desc: "GNU bash (stateful sessions keep variables, functions and the working directory)",
		argv: func(n string) []string { return []string{"/bin/bash", "-c", bashDriver, "sandhold-code", n} }},
}
