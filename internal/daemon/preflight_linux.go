package daemon

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// needCaps are the capabilities serving sandboxes takes, with what for:
// root has them all; a process without them fails at its first sandbox.
var needCaps = []struct {
	bit  int
	name string
}{
	{unix.CAP_SYS_ADMIN, "CAP_SYS_ADMIN"}, // mount each workspace image (a loop device), cgroups
	{unix.CAP_SETUID, "CAP_SETUID"},       // map a sandbox's uids to its own host range
	{unix.CAP_SETGID, "CAP_SETGID"},       // and its gids
	{unix.CAP_SETPCAP, "CAP_SETPCAP"},     // clone each init as its sandbox's host id, keeping the capabilities the maps need (SECBIT_NO_SETUID_FIXUP)
}

// checkPrivileges says, before anything is written, whether this process
// may serve sandboxes, and if not how to run it so that it can. The
// non-root `sandhold serve` of issue 36 generated and saved an admin key
// and then died on a cgroup mkdir.
func checkPrivileges() error {
	have, err := effectiveCaps("/proc/self/status")
	if err != nil {
		return fmt.Errorf("read this process's capabilities: %w", err)
	}
	var missing []string
	for _, c := range needCaps {
		if have&(1<<uint(c.bit)) == 0 {
			missing = append(missing, c.name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("sandhold serve needs root: it mounts each sandbox's workspace, maps each sandbox to its own range of host ids and makes its cgroups, "+
		"and this process (uid %d) lacks %s. Run it as root (`sudo make run`, `sudo sandhold serve`) or as the systemd service in deploy/systemd/; "+
		"in a container see deploy/kubernetes/README.md. Nothing was written",
		os.Geteuid(), strings.Join(missing, ", "))
}

// cgroupHint is added to a failure to make the server's cgroups.
const cgroupHint = "sandhold serve makes a cgroup per sandbox: run it as root, or as the systemd service in deploy/systemd/ " +
	"(on cgroup v2 it makes them below its own cgroup, which the unit delegates: Delegate=yes). Nothing was written"

// effectiveCaps reads the CapEff line of a /proc/PID/status file.
func effectiveCaps(status string) (uint64, error) {
	b, err := os.ReadFile(status) //nolint:gosec // G304: procfs, a fixed path
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, fmt.Errorf("%s has no CapEff line", status)
}
