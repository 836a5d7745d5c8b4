package guard

import (
	"path"
	"slices"
	"strings"
)

// Rule ids reported in Verdict.Rules. The argv rules are matched by the table
// argvRules below; the structural ones by the walker (walk.go).
const (
	RuleUnparseable    = "unparseable"          // the parser rejected the line (bash would too, or we disagree with bash)
	RuleInternal       = "internal-error"       // the guard itself failed (a recovered panic): fail closed
	RuleTooComplex     = "too-complex"          // a cap on size, steps or wrappers was hit
	RuleDepthExceeded  = "depth-exceeded"       // strings inside strings nested deeper than Config.MaxDepth
	RuleDynamicCommand = "dynamic-command"      // the command name is built at run time ($x, $(…), ${x:-rm})
	RuleDynamicCode    = "dynamic-code"         // program text built at run time (eval "$x", bash -c "$x", alias x="$y")
	RulePipeToShell    = "pipe-to-shell"        // a shell or interpreter reads its program from a pipe
	RuleSourceDynamic  = "source-dynamic"       // source/. or a shell runs <(…), /dev/stdin or a non-literal file
	RuleDownloadExec   = "download-exec"        // downloaded content is executed (curl | sh, wget -O x; sh x)
	RuleDecodeExec     = "decode-exec"          // decoded content is executed (base64 -d | sh)
	RuleForkBomb       = "fork-bomb"            // a function that calls itself in a pipeline or in the background
	RuleRmRfRoot       = "rm-rf-root"           // recursive rm of /, ~, *, /* or a top-level system directory
	RuleMoveRoot       = "mv-root"              // mv of /, ~, /etc … (a delete in disguise)
	RuleMkfs           = "mkfs"                 // making or wiping a file system
	RuleDDDevice       = "dd-device"            // dd of=/dev/<disk>
	RuleDeviceWrite    = "device-write"         // a write or redirect to a raw disk, /dev/mem or a kernel knob (/proc/sys, /sys)
	RulePower          = "power"                // shutdown, reboot, halt, poweroff, init 0/6
	RuleKillAll        = "kill-all"             // kill -1 / kill 1: every process, or the sandbox's init
	RuleChmodRoot      = "chmod-recursive-root" // chmod -R on / or a system directory
	RuleChownRoot      = "chown-recursive-root" // chown/chgrp -R on / or a system directory
	RuleFindDeleteRoot = "find-delete-root"     // find / -delete (rm -rf / in disguise)
	RuleReverseShell   = "reverse-shell"        // nc -e, socat exec:, /dev/tcp redirects, socket one-liners
	RuleCredentialRead = "credential-read"      //nolint:gosec // G101: a rule name, not a credential. Reading SSH keys, /etc/shadow, cloud and registry credentials
	RuleNamespaceTool  = "namespace-tool"       // chroot, nsenter, unshare: the sandbox's own machinery
	RulePrivileged     = "privileged-command"   // kernel modules, mounts, kexec
	RuleConfigured     = "configured-dangerous" // a name listed in Config.Dangerous
	RuleInlineProgram  = "inline-program"       // python -c, perl -e …: a program the guard only skims (Medium)
	RuleScriptFile     = "script-file"          // runs or sources a file whose content the guard cannot see (Medium)
	RuleLoaderEnv      = "loader-env"           // LD_PRELOAD, BASH_ENV, PATH … changed for a command (Medium)
)

// call is one simple command after wrappers were peeled off.
type call struct {
	name string  // base name of args[0]: /usr/bin/rm → rm
	args []field // the arguments after the name
}

// rule is one entry of the argv rule table.
type rule struct {
	id    string
	risk  Risk
	match func(c *call) (reason string, ok bool)
}

// argvRules is matched against every simple command (after unwrapping), in
// this order. It is read-only; the rules never look at anything but argv.
var argvRules = [...]rule{
	// rm -rf /, rm -fr ~, rm -r -f *, rm --recursive --force /*, rm -rf
	// --no-preserve-root /, rm -rf /usr … Force is not required: -r alone
	// deletes just as well where nothing is write-protected.
	{RuleRmRfRoot, Dangerous, matchRmRoot},
	// mv / /tmp/x, mv ~ /dev/null, mv /etc /tmp: the source is gone.
	{RuleMoveRoot, Dangerous, matchMoveRoot},
	// mkfs, mkfs.ext4, mke2fs, mkswap, wipefs, blkdiscard.
	{RuleMkfs, Dangerous, matchMkfs},
	// dd of=/dev/sda (but not of=/dev/null).
	{RuleDDDevice, Dangerous, matchDD},
	// tee /dev/sda, cp img /dev/nvme0n1, shred /dev/sdb, fdisk /dev/sda.
	{RuleDeviceWrite, Dangerous, matchDeviceArg},
	// shutdown, reboot, halt, poweroff; init/telinit 0|6; systemctl reboot.
	{RulePower, Dangerous, matchPower},
	// kill -9 -1 (all processes), kill 1 (the sandbox init: kills the sandbox).
	{RuleKillAll, Dangerous, matchKillAll},
	// chmod -R 777 /, chmod --recursive a+w /etc.
	{RuleChmodRoot, Dangerous, matchChmodRoot},
	// chown -R nobody /, chgrp -R x /usr.
	{RuleChownRoot, Dangerous, matchChownRoot},
	// find / -delete, find ~ -delete.
	{RuleFindDeleteRoot, Dangerous, matchFindDeleteRoot},
	// nc -e /bin/sh, ncat --sh-exec, socat tcp:… exec:bash.
	{RuleReverseShell, Dangerous, matchReverseShellArgv},
	// cat ~/.ssh/id_rsa, cp /etc/shadow x, tar cz ~/.aws, base64 ~/.netrc …
	{RuleCredentialRead, Dangerous, matchCredentialArgs},
	// chroot, nsenter, unshare: they exist to change namespaces and roots,
	// which is the sandbox's boundary; an agent has no routine need for them.
	{RuleNamespaceTool, Dangerous, matchNames(namespaceTools)},
	// insmod, modprobe, mount … would only fail inside a correct sandbox;
	// trying is a signal worth a human's look.
	{RulePrivileged, Dangerous, matchNames(privilegedCommands)},
}

var namespaceTools = map[string]bool{"chroot": true, "nsenter": true, "unshare": true}

var privilegedCommands = map[string]bool{
	"insmod": true, "rmmod": true, "modprobe": true, "kexec": true,
	"mount": true, "umount": true, "pivot_root": true, "swapon": true, "swapoff": true,
	"sysctl": true, "setenforce": true, "iptables": true, "ip6tables": true, "nft": true,
}

// tiers is the command-tier table: the risk of running a command by itself,
// before rules. Names not listed are Medium (unknown programs and most
// writers). Wrappers are listed with their own tier; what they run is
// classified separately.
var tiers = map[string]Risk{
	// Inspecting the file system and text: read-only, output only.
	"ls": Safe, "ll": Safe, "dir": Safe, "tree": Safe, "pwd": Safe, "cat": Safe, "tac": Safe,
	"less": Safe, "more": Safe, "head": Safe, "tail": Safe, "wc": Safe, "nl": Safe,
	"grep": Safe, "egrep": Safe, "fgrep": Safe, "rg": Safe, "ag": Safe,
	"file": Safe, "stat": Safe, "du": Safe, "df": Safe, "realpath": Safe, "readlink": Safe,
	"basename": Safe, "dirname": Safe, "diff": Safe, "cmp": Safe, "comm": Safe,
	"cut": Safe, "tr": Safe, "uniq": Safe, "column": Safe, "fold": Safe, "fmt": Safe,
	"paste": Safe, "join": Safe, "expand": Safe, "unexpand": Safe, "rev": Safe,
	"od": Safe, "xxd": Safe, "hexdump": Safe, "strings": Safe, "jq": Safe, "yq": Safe,
	"md5sum": Safe, "sha1sum": Safe, "sha256sum": Safe, "sha512sum": Safe, "cksum": Safe, "b2sum": Safe,
	"base64": Safe, "base32": Safe, // decoding is only dangerous when executed (decode-exec)
	"sort": Safe, // sort -o FILE writes: see tierOf
	"sed":  Safe, // only print/substitute scripts without -i, w or e: see tierOf
	"find": Safe, // -delete/-exec…: see tierOf
	"git":  Safe, // read-only subcommands only: see tierOf
	// Printing and shell builtins without effects outside the shell.
	"echo": Safe, "printf": Safe, "true": Safe, "false": Safe, ":": Safe, "test": Safe, "[": Safe,
	"cd": Safe, "pushd": Safe, "popd": Safe, "dirs": Safe, "type": Safe, "which": Safe, "whereis": Safe,
	"hash": Safe, "help": Safe, "history": Safe, "jobs": Safe, "wait": Safe, "sleep": Safe,
	"seq": Safe, "yes": Safe, "shift": Safe, "return": Safe, "exit": Safe, "break": Safe, "continue": Safe,
	"read": Safe, "set": Safe, "shopt": Safe, "unset": Safe, "export": Safe, "declare": Safe,
	"local": Safe, "readonly": Safe, "typeset": Safe, "getopts": Safe, "umask": Safe, "trap": Safe,
	"unalias": Safe, "let": Safe,
	// Information about the system and the user.
	"date": Safe, "cal": Safe, "uname": Safe, "hostname": Safe, "whoami": Safe, "id": Safe,
	"groups": Safe, "uptime": Safe, "ps": Safe, "pgrep": Safe, "free": Safe, "nproc": Safe,
	"lscpu": Safe, "lsblk": Safe, "printenv": Safe, "locale": Safe, "tty": Safe,
	"man": Safe, "info": Safe,
	// Wrappers that only change how the inner command runs (the inner command
	// is classified on its own).
	"env": Safe, "nohup": Safe, "timeout": Safe, "nice": Safe, "ionice": Safe, "xargs": Safe,
	"setsid": Safe, "stdbuf": Safe, "time": Safe, "command": Safe, "builtin": Safe, "exec": Safe,
	"busybox": Safe, "toybox": Safe, "flock": Safe, "watch": Safe, "taskset": Safe, "chrt": Safe,
	"eval": Safe, "source": Safe, ".": Safe, "alias": Safe,
	// awk's program is skimmed (see walker.awk): Safe unless it can run or write.
	"awk": Safe, "gawk": Safe, "mawk": Safe, "nawk": Safe,
	// Privilege changes: medium even when the inner command is safe.
	"sudo": Medium, "doas": Medium, "su": Medium, "runuser": Medium,
	// chroot, nsenter, unshare and the privileged commands are Dangerous by
	// rule (argvRules), not by tier, so the verdict names the rule.
}

// rootDirs are the targets of a recursive rm/chmod/chown that wreck the
// system or everything the user owns. /workspace is the user's persistent
// data in a sandhold sandbox.
var rootDirs = map[string]bool{
	"/": true, "/*": true, "/.*": true, "~": true, "~/*": true, "~/.*": true, "*": true, ".*": true,
	"/bin": true, "/boot": true, "/dev": true, "/etc": true, "/home": true, "/lib": true,
	"/lib32": true, "/lib64": true, "/opt": true, "/proc": true, "/root": true, "/run": true,
	"/sbin": true, "/srv": true, "/sys": true, "/usr": true, "/var": true, "/workspace": true,
}

// isRootTarget reports whether v names /, ~, *, /* or a top-level system
// directory (or all of its entries), in any spelling path.Clean agrees on.
func isRootTarget(v string) bool {
	if v == "" || strings.Contains(v, runtimeMark) {
		return false
	}
	p := path.Clean(v)
	if rootDirs[p] {
		return true
	}
	if p[0] == '~' && !strings.Contains(strings.TrimSuffix(p, "/*"), "/") {
		return true // ~user, ~user/*: someone's home
	}
	if dir, ok := strings.CutSuffix(p, "/*"); ok && rootDirs[dir] {
		return true
	}
	return false
}

// isRawDevice reports whether p is a block device or kernel memory.
func isRawDevice(p string) bool {
	p = path.Clean(p)
	switch p {
	case "/dev/mem", "/dev/kmem", "/dev/port":
		return true
	}
	for _, pre := range [...]string{"/dev/sd", "/dev/hd", "/dev/vd", "/dev/xvd", "/dev/nvme",
		"/dev/mmcblk", "/dev/loop", "/dev/dm-", "/dev/md", "/dev/mapper/", "/dev/disk/", "/dev/sr"} {
		if strings.HasPrefix(p, pre) {
			return true
		}
	}
	return false
}

// isKernelKnob reports a file whose write changes the running kernel
// (echo c > /proc/sysrq-trigger crashes the machine where it is writable).
func isKernelKnob(p string) bool {
	p = path.Clean(p)
	return p == "/proc/sysrq-trigger" || strings.HasPrefix(p, "/proc/sys/") || strings.HasPrefix(p, "/sys/") ||
		p == "/proc/kcore" || strings.HasPrefix(p, "/sys/kernel/")
}

// isNetDevice reports a bash /dev/tcp or /dev/udp pseudo-path.
func isNetDevice(p string) bool {
	return strings.HasPrefix(p, "/dev/tcp/") || strings.HasPrefix(p, "/dev/udp/")
}

// credentialFiles are exact secret files (after ~ or any prefix directory).
var credentialFiles = [...]string{
	"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers",
	".aws/credentials", ".aws/config", ".netrc", ".git-credentials", ".docker/config.json",
	".kube/config", ".pgpass", ".config/gh/hosts.yml", ".pypirc", ".npmrc",
}

// credentialDirs are directories whose whole content is secret (tar, cp -r, zip).
var credentialDirs = map[string]bool{".ssh": true, ".aws": true, ".gnupg": true, ".kube": true, ".docker": true}

// sshKeyNames are private-key file names, wherever they are.
var sshKeyNames = map[string]bool{
	"id_rsa": true, "id_dsa": true, "id_ecdsa": true, "id_ed25519": true, "id_ecdsa_sk": true, "id_ed25519_sk": true,
}

// globProbes are concrete secrets a glob argument is tried against
// (cat /etc/sha*, cat ~/.ssh/id*).
var globProbes = [...]string{"/etc/shadow", "~/.ssh/id_rsa", "~/.ssh/id_ed25519", "~/.aws/credentials", "~/.netrc", "~/.git-credentials"}

// isCredentialPath reports whether a path argument names a secret.
func isCredentialPath(v string) bool {
	if v == "" || strings.Contains(v, runtimeMark) {
		return false
	}
	p := path.Clean(v)
	base := path.Base(p)
	if sshKeyNames[base] || credentialDirs[base] {
		return true
	}
	if !strings.ContainsAny(p, "/.") {
		return false
	}
	if i := strings.Index(p, ".ssh/"); i >= 0 && (strings.HasPrefix(base, "id_") || strings.ContainsAny(base, "*?[")) && !strings.HasSuffix(base, ".pub") {
		return true
	}
	if strings.Contains(p, "/.gnupg/") || strings.HasPrefix(p, ".gnupg/") {
		return true
	}
	for _, f := range credentialFiles {
		if p == f || strings.HasSuffix(p, "/"+strings.TrimPrefix(f, "/")) || (f[0] == '/' && strings.HasSuffix(p, f)) {
			return true
		}
	}
	if strings.ContainsAny(p, "*?[") {
		for _, probe := range globProbes {
			if ok, _ := path.Match(p, probe); ok {
				return true
			}
		}
	}
	return false
}

// credentialText reports whether program text mentions a secret file.
func credentialText(s string) bool {
	for _, f := range [...]string{"/etc/shadow", ".ssh/id_", ".aws/credentials", ".netrc", ".git-credentials", ".docker/config.json", ".kube/config"} {
		if strings.Contains(s, f) {
			return true
		}
	}
	return false
}

// nonReaders take paths without reading the file's content, so a secret
// path as their argument is not a credential read.
var nonReaders = map[string]bool{
	"ls": true, "stat": true, "test": true, "[": true, "echo": true, "printf": true, "mkdir": true,
	"chmod": true, "chown": true, "chgrp": true, "touch": true, "rm": true, "find": true, "which": true,
	"realpath": true, "readlink": true, "basename": true, "dirname": true, "ssh-keygen": true,
	"ssh-add": true, "ssh": true, "cd": true, "du": true, "pushd": true, "type": true, "file": true,
}

// --- matchers ---

// flagSet parses short clusters and long flags, stopping at "--". It returns
// the set of short flag letters, long flags and the positional arguments.
func flagSet(args []field) (short map[byte]bool, long map[string]bool, pos []field) {
	short, long = map[byte]bool{}, map[string]bool{}
	for i, a := range args {
		switch {
		case a.val == "--":
			return short, long, append(pos, args[i+1:]...)
		case strings.HasPrefix(a.val, "--"):
			name, _, _ := strings.Cut(a.val[2:], "=")
			long[name] = true
		case len(a.val) > 1 && a.val[0] == '-':
			for j := 1; j < len(a.val); j++ {
				short[a.val[j]] = true
			}
		default:
			pos = append(pos, a)
		}
	}
	return short, long, pos
}

func matchRmRoot(c *call) (string, bool) {
	if c.name != "rm" {
		return "", false
	}
	short, long, pos := flagSet(c.args)
	if !short['r'] && !short['R'] && !long["recursive"] {
		return "", false
	}
	for _, p := range pos {
		if isRootTarget(p.val) {
			return "recursive rm of " + printable(p.val), true
		}
	}
	return "", false
}

func matchMoveRoot(c *call) (string, bool) {
	if c.name != "mv" {
		return "", false
	}
	_, long, pos := flagSet(c.args)
	srcs := pos
	if !long["target-directory"] && len(pos) > 0 {
		srcs = pos[:len(pos)-1] // the last operand is the destination
	}
	for _, p := range srcs {
		if isRootTarget(p.val) {
			return "mv moves " + printable(p.val) + " away", true
		}
	}
	return "", false
}

func matchMkfs(c *call) (string, bool) {
	switch {
	case strings.HasPrefix(c.name, "mkfs"), c.name == "mke2fs", c.name == "mkswap", c.name == "wipefs", c.name == "blkdiscard":
		return c.name + " creates or wipes a file system", true
	}
	return "", false
}

// harmlessDevices are /dev files dd may write to.
var harmlessDevices = map[string]bool{"/dev/null": true, "/dev/zero": true, "/dev/stdout": true, "/dev/stderr": true, "/dev/tty": true}

func matchDD(c *call) (string, bool) {
	if c.name != "dd" {
		return "", false
	}
	for _, a := range c.args {
		if of, ok := strings.CutPrefix(a.val, "of="); ok && strings.HasPrefix(of, "/dev/") && !harmlessDevices[path.Clean(of)] && !strings.HasPrefix(of, "/dev/fd/") && !strings.HasPrefix(of, "/dev/shm/") {
			return "dd writes to device " + printable(of), true
		}
	}
	return "", false
}

// deviceWriters take a path they write to (or partition).
var deviceWriters = map[string]bool{
	"tee": true, "cp": true, "mv": true, "install": true, "shred": true, "truncate": true, "rsync": true,
	"fdisk": true, "sfdisk": true, "cfdisk": true, "parted": true, "sgdisk": true, "gdisk": true,
}

func matchDeviceArg(c *call) (string, bool) {
	if !deviceWriters[c.name] {
		return "", false
	}
	for _, a := range c.args {
		if isRawDevice(a.val) || isKernelKnob(a.val) {
			return c.name + " writes to device " + printable(a.val), true
		}
	}
	return "", false
}

func matchPower(c *call) (string, bool) {
	switch c.name {
	case "shutdown", "reboot", "halt", "poweroff":
		return c.name + " stops the machine", true
	case "init", "telinit":
		for _, a := range c.args {
			if a.val == "0" || a.val == "6" {
				return c.name + " " + a.val + " stops the machine", true
			}
		}
	case "systemctl", "loginctl":
		for _, a := range c.args {
			switch a.val {
			case "poweroff", "reboot", "halt", "kexec", "emergency", "rescue", "suspend", "hibernate":
				return c.name + " " + a.val + " stops the machine", true
			}
		}
	}
	return "", false
}

func matchKillAll(c *call) (string, bool) {
	if c.name != "kill" {
		return "", false
	}
	args := c.args
	// kill [-s SIG | -n NUM | -SIG] [--] pid…: the first option is the signal.
	if len(args) > 0 && (args[0].val == "-s" || args[0].val == "-n") {
		args = args[min(2, len(args)):]
	} else if len(args) > 0 && strings.HasPrefix(args[0].val, "-") && args[0].val != "--" {
		args = args[1:]
	}
	for _, a := range args {
		if a.val == "-1" || a.val == "1" {
			return "kill " + a.val + " kills every process or the sandbox's init", true
		}
	}
	return "", false
}

func matchChmodRoot(c *call) (string, bool) {
	if c.name != "chmod" {
		return "", false
	}
	return recursiveOnRoot(c)
}

func matchChownRoot(c *call) (string, bool) {
	if c.name != "chown" && c.name != "chgrp" {
		return "", false
	}
	return recursiveOnRoot(c)
}

// recursiveOnRoot matches chmod/chown -R (capital only: chmod -r removes the
// read bit) with a root target.
func recursiveOnRoot(c *call) (string, bool) {
	short, long, pos := flagSet(c.args)
	if !short['R'] && !long["recursive"] {
		return "", false
	}
	for _, p := range pos {
		if isRootTarget(p.val) {
			return c.name + " -R on " + printable(p.val), true
		}
	}
	return "", false
}

func matchFindDeleteRoot(c *call) (string, bool) {
	if c.name != "find" {
		return "", false
	}
	del := false
	for _, a := range c.args {
		if a.val == "-delete" {
			del = true
		}
	}
	if !del {
		return "", false
	}
	// find's start points are the arguments before the first expression.
	for _, a := range c.args {
		if strings.HasPrefix(a.val, "-") || a.val == "(" || a.val == "!" {
			break
		}
		if isRootTarget(a.val) {
			return "find -delete under " + printable(a.val), true
		}
	}
	return "", false
}

var netcats = map[string]bool{"nc": true, "ncat": true, "netcat": true, "nc.traditional": true, "nc.openbsd": true, "pwncat": true}

func matchReverseShellArgv(c *call) (string, bool) {
	switch {
	case netcats[c.name]:
		for _, a := range c.args {
			v := a.val
			if strings.HasPrefix(v, "--exec") || strings.HasPrefix(v, "--sh-exec") || strings.HasPrefix(v, "--lua-exec") {
				return c.name + " " + v + " serves a shell over the network", true
			}
			if len(v) > 1 && v[0] == '-' && v[1] != '-' && strings.ContainsAny(v[1:], "ec") {
				return c.name + " " + v + " serves a shell over the network", true
			}
		}
	case c.name == "socat":
		for _, a := range c.args {
			l := strings.ToLower(a.val)
			if strings.Contains(l, "exec:") || strings.Contains(l, "system:") {
				return "socat connects a program to a socket", true
			}
		}
	}
	return "", false
}

// grepLike take a pattern as their first positional argument.
var grepLike = map[string]bool{"grep": true, "egrep": true, "fgrep": true, "rg": true, "ag": true}

func matchCredentialArgs(c *call) (string, bool) {
	if nonReaders[c.name] {
		return "", false
	}
	skipPattern := grepLike[c.name]
	for _, a := range c.args {
		v := a.val
		if strings.HasPrefix(v, "-") {
			if skipPattern && (v == "-e" || v == "-f") {
				skipPattern = false
			}
			_, after, ok := strings.Cut(v, "=")
			if !ok {
				continue
			}
			v = after
		} else if skipPattern {
			skipPattern = false
			continue
		}
		v = strings.TrimPrefix(v, "@") // curl -d @file
		if _, after, ok := strings.Cut(v, ":"); ok && !strings.HasPrefix(v, "/") {
			v = after // scp host:path, docker cp c:path
		}
		if isCredentialPath(v) {
			return c.name + " reads secret " + printable(v), true
		}
	}
	return "", false
}

func matchNames(set map[string]bool) func(c *call) (string, bool) {
	return func(c *call) (string, bool) {
		if set[c.name] {
			return c.name + " is not something an agent needs inside a sandbox", true
		}
		return "", false
	}
}

// tierOf is the tier of one command by name and arguments, before rules.
func (g *Guard) tierOf(c *call) (Risk, string) {
	if g.safe[c.name] {
		return Safe, ""
	}
	t, ok := tiers[c.name]
	if !ok {
		if _, _, interp := interpreter(c.name); interp || shells[c.name] {
			// What a shell or interpreter runs is classified on its own
			// (-c code, script-file, stdin); running one adds nothing.
			return Safe, ""
		}
		return Medium, ""
	}
	switch c.name {
	case "find":
		for _, a := range c.args {
			switch a.val {
			case "-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls":
				return Medium, "find " + a.val + " changes files or runs commands"
			}
		}
	case "sort":
		for _, a := range c.args {
			if a.val == "-o" || strings.HasPrefix(a.val, "--output") {
				return Medium, "sort -o writes a file"
			}
		}
	case "git":
		return gitTier(c.args)
	case "sed":
		return sedTier(c.args)
	case "env":
		// env alone prints the environment; with a command it is unwrapped.
	}
	return t, ""
}

// sedTier is Safe for sed that only prints or substitutes to stdout:
// sed -n '1,50p' f, sed 's/a/b/g' f. In-place editing, the w/W commands and
// flags (write files) and e (runs a command) make it Medium, as does any
// script this check does not understand.
func sedTier(args []field) (Risk, string) {
	var scripts []string
	sawScript := false
	for i := 0; i < len(args); i++ {
		a := args[i].val
		switch {
		case a == "-i" || strings.HasPrefix(a, "-i") || strings.HasPrefix(a, "--in-place") ||
			(len(a) > 1 && a[0] == '-' && a[1] != '-' && strings.ContainsRune(a, 'i')):
			return Medium, "sed -i edits files in place"
		case a == "-e" || a == "--expression":
			if i+1 < len(args) {
				i++
				scripts = append(scripts, args[i].val)
				sawScript = true
			}
		case strings.HasPrefix(a, "--expression="):
			scripts = append(scripts, strings.TrimPrefix(a, "--expression="))
			sawScript = true
		case a == "-f" || a == "--file" || strings.HasPrefix(a, "--file="):
			return Medium, "sed runs a script file"
		case strings.HasPrefix(a, "-"):
		case !sawScript:
			scripts = append(scripts, a)
			sawScript = true
		}
	}
	for _, s := range scripts {
		if !sedScriptReadOnly(s) {
			return Medium, "sed script may write files or run commands"
		}
	}
	return Safe, ""
}

// sedScriptReadOnly accepts scripts made of addressed p, d, q, = and s///
// commands whose flags are only g, p, i, I or a number.
func sedScriptReadOnly(script string) bool {
	for _, cmd := range strings.FieldsFunc(script, func(r rune) bool { return r == ';' || r == '\n' }) {
		cmd = strings.TrimSpace(cmd)
		cmd = strings.TrimLeft(cmd, "0123456789,$ !") // line addresses
		switch {
		case cmd == "" || cmd == "p" || cmd == "d" || cmd == "q" || cmd == "=":
		case len(cmd) > 1 && cmd[0] == 's':
			delim := cmd[1]
			if delim == '\\' || delim == '\n' {
				return false
			}
			parts, escaped := 0, false
			k := 2
			for ; k < len(cmd) && parts < 2; k++ {
				switch {
				case escaped:
					escaped = false
				case cmd[k] == '\\':
					escaped = true
				case cmd[k] == delim:
					parts++
				}
			}
			if parts < 2 || strings.Trim(cmd[k:], "gpiI0123456789") != "" {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// gitReadOnly are git subcommands that only inspect the repository.
var gitReadOnly = map[string]bool{
	"status": true, "log": true, "diff": true, "show": true, "blame": true, "rev-parse": true,
	"ls-files": true, "ls-tree": true, "describe": true, "shortlog": true, "reflog": true,
	"cat-file": true, "grep": true, "rev-list": true, "version": true, "help": true, "whatchanged": true,
}

// gitConfigRead are git config's reading modes.
var gitConfigRead = map[string]bool{"--get": true, "--get-all": true, "--get-regexp": true, "--list": true, "-l": true, "get": true, "list": true}

// gitListFlags only change how branch, tag and remote list.
var gitListFlags = map[string]bool{
	"-l": true, "--list": true, "-v": true, "-vv": true, "--verbose": true, "-a": true, "--all": true,
	"-r": true, "--remotes": true, "--show-current": true, "--merged": true, "--no-merged": true, "--contains": true,
}

func gitTier(args []field) (Risk, string) {
	for i := 0; i < len(args); i++ {
		v := args[i].val
		switch {
		case v == "-c" || strings.HasPrefix(v, "--config-env") || strings.HasPrefix(v, "--exec-path"):
			// -c core.pager=… / alias.x=!cmd can run arbitrary commands.
			return Medium, "git " + v + " can run configured commands"
		case v == "-C" || v == "--git-dir" || v == "--work-tree" || v == "--namespace":
			i++
		case strings.HasPrefix(v, "-"):
		default:
			if gitReadOnly[v] {
				return Safe, ""
			}
			rest := args[i+1:]
			switch v {
			case "config":
				if len(rest) > 0 && gitConfigRead[rest[0].val] {
					return Safe, ""
				}
			case "stash":
				if len(rest) > 0 && (rest[0].val == "list" || rest[0].val == "show") {
					return Safe, ""
				}
			case "branch", "tag", "remote":
				// bare, or listing flags only: read-only; anything else writes.
				if !slices.ContainsFunc(rest, func(f field) bool { return !gitListFlags[f.val] }) {
					return Safe, ""
				}
			}
			return Medium, ""
		}
	}
	return Safe, "" // bare `git` prints usage
}

// printable makes a value safe for a reason string.
func printable(v string) string {
	return strings.ReplaceAll(v, runtimeMark, "…")
}
