package guard

// This file: commands that run other commands given as their arguments
// (env, nohup, timeout, nice, xargs, sudo, find -exec …).

import (
	"slices"
	"strings"
)

// wrapper describes a command that runs another command given as its
// remaining arguments.
type wrapper struct {
	shortArg string   // short options that take a value (-u root, -uroot)
	longArg  []string // long options that take a value as the next word (--user root)
	skip     int      // operands before the command (timeout DURATION, chroot DIR); noCommand: none
	assigns  bool     // NAME=VALUE operands before the command (env)
	code     byte     // short option whose value is a shell command string (su -c, flock -c)
	longCode string   // its long form (--command)
	noRun    string   // short options that mean no command is run (command -v, ionice -p)
	allCode  bool     // the remaining words are joined and run by sh -c (watch)
}

// noCommand marks a wrapper whose command only comes as a -c string, which
// may stand anywhere (su root -c '…', script -qc '…' /dev/null).
const noCommand = -1

// wrappers is the wrapper table. Options that take an optional value only
// when attached (nsenter -m[file], xargs -i[R]) need no entry.
var wrappers = map[string]wrapper{
	"env":     {shortArg: "uCS", longArg: []string{"unset", "chdir", "split-string"}, assigns: true, code: 'S', longCode: "split-string"},
	"nohup":   {},
	"timeout": {shortArg: "sk", longArg: []string{"signal", "kill-after"}, skip: 1},
	"nice":    {shortArg: "n", longArg: []string{"adjustment"}},
	"ionice":  {shortArg: "cn", longArg: []string{"class", "classdata"}, noRun: "p"},
	"xargs":   {shortArg: "adEILnPs", longArg: []string{"arg-file", "delimiter", "max-lines", "max-args", "max-procs", "max-chars", "process-slot-var"}},
	"sudo":    {shortArg: "CDghpRrTtUu", longArg: []string{"close-from", "chdir", "group", "host", "prompt", "role", "type", "command-timeout", "other-user", "user", "chroot"}, noRun: "lVvKk"},
	"doas":    {shortArg: "uC"},
	"setsid":  {},
	"stdbuf":  {shortArg: "ioe", longArg: []string{"input", "output", "error"}},
	"time":    {shortArg: "fo", longArg: []string{"format", "output"}},
	"command": {noRun: "vV"},
	"builtin": {},
	"exec":    {shortArg: "a"},
	"chroot":  {longArg: []string{"userspec", "groups"}, skip: 1},
	"nsenter": {shortArg: "tSG", longArg: []string{"target", "setuid", "setgid"}},
	"unshare": {shortArg: "RwSG", longArg: []string{"root", "wd", "setuid", "setgid", "propagation", "setgroups", "map-user", "map-group", "map-users", "map-groups"}},
	"busybox": {},
	"toybox":  {},
	"flock":   {shortArg: "wEc", longArg: []string{"timeout", "conflict-exit-code", "command"}, skip: 1, code: 'c', longCode: "command"},
	"watch":   {shortArg: "nqd", longArg: []string{"interval", "equexit", "differences"}, allCode: true},
	"taskset": {skip: 1, noRun: "p"},
	"chrt":    {skip: 1, noRun: "p"},
	"su":      {shortArg: "cgGsw", longArg: []string{"command", "group", "supp-group", "shell", "whitelist-environment"}, code: 'c', longCode: "command", skip: noCommand},
	"runuser": {shortArg: "cgGsuw", longArg: []string{"command", "group", "supp-group", "shell", "user", "whitelist-environment"}, code: 'c', longCode: "command", skip: noCommand},
	"script":  {shortArg: "cEIOBTm", longArg: []string{"command", "echo", "log-in", "log-out", "log-io", "log-timing", "logging-format"}, code: 'c', longCode: "command", skip: noCommand},
	"strace":  {shortArg: "abeEIoOpPsSuX", longArg: []string{"output", "signal", "trace", "user"}},
	"ltrace":  {shortArg: "aAbDeEfFlnoOpsSuwX", longArg: []string{"output", "user"}},
}

// unwrap parses a wrapper's options and returns the command it runs.
func (w *walker) unwrap(cl *call, wr wrapper, c ctx) ([]field, ctx, bool) {
	args := cl.args
	if cl.name == "runuser" && slices.ContainsFunc(args, func(f field) bool { return f.val == "-u" || strings.HasPrefix(f.val, "--user") }) {
		wr.skip = 0 // runuser -u user [--] cmd args: a plain wrapper
	}
	if wr.skip == noCommand {
		w.codeOptions(cl, wr, c)
		return nil, c, false
	}
	var xa xargsInput
	i := 0
	for i < len(args) {
		a := args[i].val
		if a == "--" {
			i++
			break
		}
		if len(a) < 2 || a[0] != '-' || !args[i].lit {
			break
		}
		if strings.HasPrefix(a, "--") {
			name, val, hasEq := strings.Cut(a[2:], "=")
			if !hasEq && slices.Contains(wr.longArg, name) && i+1 < len(args) {
				i++
				val = args[i].val
				if wr.longCode != "" && name == wr.longCode {
					w.shellCode(args[i], cl.name+" --"+name, c, nil)
				}
			} else if hasEq && wr.longCode != "" && name == wr.longCode {
				w.shellCode(field{val: val, lit: args[i].lit, src: args[i].src}, cl.name+" --"+name, c, nil)
			}
			if cl.name == "xargs" {
				xa.option(name, val, hasEq)
			}
			if cl.name == "xargs" && (name == "replace" || name == "i") {
				c.repl = "{}"
				if hasEq {
					c.repl = val
				}
			}
			i++
			continue
		}
		for j := 1; j < len(a); j++ {
			ch := a[j]
			if strings.IndexByte(wr.noRun, ch) >= 0 {
				return nil, c, false
			}
			if cl.name == "xargs" && ch == 'i' {
				c.repl = "{}"
				if j+1 < len(a) {
					c.repl = a[j+1:]
				}
				break
			}
			if cl.name == "xargs" && ch == '0' {
				xa.sep, xa.split = "\x00", true
			}
			if strings.IndexByte(wr.shortArg, ch) < 0 {
				continue
			}
			var val field
			if j+1 < len(a) {
				val = field{val: a[j+1:], lit: args[i].lit, src: args[i].src}
			} else if i+1 < len(args) {
				i++
				val = args[i]
			}
			if wr.code != 0 && ch == wr.code {
				w.shellCode(val, cl.name+" -"+string(ch), c, nil)
			}
			if cl.name == "xargs" && ch == 'I' {
				c.repl = val.val
			}
			if cl.name == "xargs" && (ch == 'd' || ch == 'a') {
				xa.option(map[byte]string{'d': "delimiter", 'a': "arg-file"}[ch], val.val, true)
			}
			break
		}
		i++
	}
	if wr.assigns {
		for i < len(args) {
			name, _, ok := strings.Cut(args[i].val, "=")
			if !ok || !isName(name) {
				break
			}
			w.assign(name)
			i++
		}
	}
	if wr.skip > len(args)-i {
		return nil, c, false // su user / script file: no command operand
	}
	i += wr.skip
	rest := args[i:]
	if cl.name == "flock" && len(rest) >= 2 && (rest[0].val == "-c" || rest[0].val == "--command") {
		w.shellCode(rest[1], cl.name+" -c", c, nil) // flock [opts] file -c cmd
		return nil, c, false
	}
	if wr.allCode && len(rest) > 0 {
		w.shellCode(joinFields(rest), cl.name, c, nil)
		return nil, c, false
	}
	if cl.name == "xargs" {
		if len(rest) == 0 {
			return nil, c, false // xargs runs echo
		}
		if items, ok := w.xargsItems(c, xa); ok {
			return w.xargsFeed(rest, items, c)
		}
		c.xargs = true
	}
	return rest, c, len(rest) > 0
}

// codeOptions finds a wrapper's -c / --command strings anywhere in its
// arguments.
func (w *walker) codeOptions(cl *call, wr wrapper, c ctx) {
	args := cl.args
	for i := 0; i < len(args); i++ {
		a := args[i].val
		switch {
		case a == "--":
			return
		case strings.HasPrefix(a, "--"+wr.longCode+"="):
			v := args[i]
			v.val = strings.TrimPrefix(a, "--"+wr.longCode+"=")
			w.shellCode(v, cl.name+" --"+wr.longCode, c, nil)
		case a == "--"+wr.longCode && i+1 < len(args):
			i++
			w.shellCode(args[i], cl.name+" --"+wr.longCode, c, nil)
		case len(a) > 1 && a[0] == '-' && a[1] != '-':
			for j := 1; j < len(a); j++ {
				if a[j] == wr.code {
					if j+1 < len(a) {
						v := args[i]
						v.val = a[j+1:]
						w.shellCode(v, cl.name+" -"+string(wr.code), c, nil)
					} else if i+1 < len(args) {
						i++
						w.shellCode(args[i], cl.name+" -"+string(wr.code), c, nil)
					}
					break
				}
				if strings.IndexByte(wr.shortArg, a[j]) >= 0 {
					if j+1 == len(a) {
						i++
					}
					break
				}
			}
		}
	}
}

func isName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		ok := ch == '_' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || i > 0 && ch >= '0' && ch <= '9'
		if !ok {
			return false
		}
	}
	return true
}

// joinFields joins words with spaces, as eval and sh -c of several words do.
func joinFields(fs []field) field {
	out := field{lit: true}
	vals := make([]string, len(fs))
	for i, f := range fs {
		vals[i] = f.val
		out.lit = out.lit && f.lit
	}
	out.val = strings.Join(vals, " ")
	if len(fs) == 1 {
		out.src = fs[0].src
	}
	return out
}

// findExec classifies the commands of find -exec/-execdir/-ok/-okdir. When
// find selects everything below its starting points (no test narrows it),
// {} stands for those starting points: find / -exec rm -rf {} + is
// rm -rf / in disguise.
func (w *walker) findExec(cl *call, c ctx) {
	vals := make([]string, len(cl.args))
	for i, a := range cl.args {
		vals[i] = a.val
	}
	starts, _, everything := findSelects(vals)
	if len(starts) > maxFeedItems {
		starts = starts[:maxFeedItems]
	}
	args := cl.args
	for i := 0; i < len(args); i++ {
		switch args[i].val {
		case "-exec", "-execdir", "-ok", "-okdir":
		default:
			continue
		}
		j := i + 1
		for j < len(args) && args[j].val != ";" && args[j].val != "+" {
			j++
		}
		if j > i+1 {
			cc := c
			cc.repl = "{}"
			if everything && args[i].val != "-execdir" && args[i].val != "-okdir" {
				for _, st := range starts {
					w.argv(replaceFields(args[i+1:j], "{}", st), cc)
				}
			} else {
				w.argv(args[i+1:j], cc)
			}
		}
		i = j
	}
}

// replaceFields replaces placeholder in literal words with val.
func replaceFields(fs []field, placeholder, val string) []field {
	out := make([]field, len(fs))
	for i, f := range fs {
		out[i] = f
		if f.lit && strings.Contains(f.val, placeholder) {
			out[i].val = strings.ReplaceAll(f.val, placeholder, val)
		}
	}
	return out
}

// findNoTest are find's options and actions that do not narrow what it
// selects, with the number of values each takes.
var findNoTest = map[string]int{
	"-maxdepth": 1, "-mindepth": 1, "-regextype": 1, "-depth": 0, "-d": 0, "-xdev": 0, "-mount": 0,
	"-follow": 0, "-noleaf": 0, "-ignore_readdir_race": 0, "-noignore_readdir_race": 0, "-daystart": 0,
	"-warn": 0, "-nowarn": 0, "-print": 0, "-print0": 0, "-ls": 0, "-true": 0, "-delete": 0,
}

// findSelects parses find's arguments: its starting points, whether it
// prints them NUL-separated, and whether it selects everything below them
// (no test such as -name or -type narrows it; an -o makes that unknowable,
// which counts as everything).
func findSelects(args []string) (starts []string, print0, everything bool) {
	i := 0
	for i < len(args) && (args[i] == "-H" || args[i] == "-L" || args[i] == "-P" || strings.HasPrefix(args[i], "-O") || args[i] == "-D") {
		if args[i] == "-D" {
			i++
		}
		i++
	}
	for ; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "-") || a == "(" || a == "!" {
			break
		}
		starts = append(starts, a)
	}
	if len(starts) == 0 {
		starts = []string{"."}
	}
	everything = true
	orSeen := false
	for ; i < len(args); i++ {
		a := args[i]
		switch a {
		case "-exec", "-execdir", "-ok", "-okdir":
			for i+1 < len(args) && args[i+1] != ";" && args[i+1] != "+" {
				i++
			}
			i++
		case "-o", "-or", ",":
			orSeen = true
		case "-print0":
			print0 = true
		default:
			n, ok := findNoTest[a]
			if !ok {
				everything = false
			}
			i += n
		}
	}
	return starts, print0, everything || orSeen
}
