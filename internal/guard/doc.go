// Package guard classifies shell command lines for the risk policy.
//
// Before a command runs in a sandbox, the dispatcher asks the guard how risky
// it is. The guard parses the line with a real shell parser (mvdan.cc/sh, bash
// dialect) and looks at every simple command it contains: pipelines, lists,
// command and process substitutions, subshells, brace groups, function bodies
// (again with a call's arguments), if/while/for/case bodies, redirections,
// here-documents and here-strings fed to shells, `bash -c`/`sh -c` strings,
// `eval`, `trap` and alias values (parsed again, up to a depth cap), scripts
// the same line writes from literal text (`cat <<'EOF' > x.sh … bash x.sh`),
// and wrappers such as env, nohup, timeout, nice, xargs, sudo, su -c, setsid,
// stdbuf, time, command, exec, watch, flock, find -exec.
//
// Inline programs of interpreters (python -c, perl -e/-E, ruby -e, node -e,
// php -r, lua -e, awk '…') are treated as wrappers too: the commands they
// hand to system(), popen, subprocess, execSync, backticks, qx{}, %x(), awk's
// system() and pipes (`print | "sh"`, `"cmd" | getline`) are assessed like
// any command line, and literal code they eval is skimmed again. A call
// whose command or code is computed (a variable, a concatenation, an
// f-string, a decoded string, input) is Dynamic. What xargs reads is known
// when its input is a here-string, a here-document or a literal echo,
// printf or find, and find -exec's {} stands for find's starting points when
// no test narrows what find selects: both are assessed with those words. Quotes and escapes are
// resolved when a word is literal, so `r""m`, `\rm`, `'r'm` and `$'\x72m'` all
// name rm, and brace expansion (`{rm,-rf,/}`) is performed. $HOME and $PWD
// count as literal, like ~ and . do.
//
// It stops an agent from running the well-known destructive or exfiltrating
// one-liners (rm -rf /, mkfs, dd to a disk, curl | sh, reverse shells, reads of
// SSH keys and cloud credentials, fork bombs …) without a human approving them,
// and it marks everything whose meaning is only decided at run time as Dynamic,
// which is always Dangerous. The rule ids are the Rule* constants; the rule
// table and the command-tier table are in rules.go.
//
// The walker is split along its ideas: walk.go (statements, words, findings
// and the per-command classification), wrappers.go (commands that run the
// command in their arguments), interpreters.go (shells and interpreters that
// run code given inline, as a file or on stdin) and dataflow.go (variables,
// files written or downloaded and later run, text fed to stdin).
//
// The guard is policy, NOT the security boundary. The boundary is the sandbox:
// namespaces, cgroups, seccomp, landlock and no_new_privs. A command the guard
// calls Safe must still be harmless to the host if it turns out to be hostile.
// The guard cannot see anything decided at run time, in particular:
//   - the values of variables, command substitutions and globs (it only knows
//     that they are there, and flags non-literal command names and programs);
//   - the contents of files it is asked to run or source (`bash script.sh`,
//     `. ./env.sh`, `python app.py`, `make`, a copied or renamed shell), of
//     data piped between commands, and of programs passed to interpreters
//     beyond a few literal patterns;
//   - state from earlier commands in a persistent shell session: aliases,
//     functions, variables, PATH and the files on disk;
//   - what a program does once it runs (a Safe `git log` can run a pager or a
//     hook configured in the repository; `find` -exec gets its file names at
//     run time).
//
// Classify never panics and never returns an error: input it cannot parse, or
// that is too large or too deeply nested to analyse within the caps in
// guard.go, is Dangerous.
package guard
