# sandhold code driver for bash: runs cells in one shell, so variables,
# functions, aliases and the working directory persist. It runs INSIDE the
# sandbox as the sandbox user; it is not a boundary, only a protocol.
# Requests arrive on stdin as "<len>\n<json-free code bytes>"; replies leave
# as frames, each one printf of at most PIPE_BUF bytes:
#   \x1e <nonce:32> <kind:E> <len:4 hex> <payload> \x1f
__sh_nonce=$1
shift
exec {__sh_in}<&0 {__sh_out}>&1 {__sh_err}>&2 </dev/null
__sh_send() {
	local LC_ALL=C
	printf '\036%s%s%04x%s\037' "$__sh_nonce" E "${#2}" "$2" >&"$1"
}
__sh_send "$__sh_out" "{\"t\":\"ready\",\"version\":\"$BASH_VERSION\"}"
__sh_id=0
while :; do
	LC_ALL=C IFS= read -r -u "$__sh_in" __sh_len || exit 0
	[[ $__sh_len =~ ^[0-9]+$ ]] || exit 2
	__sh_code=
	if ((__sh_len > 0)); then
		LC_ALL=C IFS= read -r -N "$__sh_len" -u "$__sh_in" __sh_code || exit 0
	fi
	__sh_id=$((__sh_id + 1))
	eval "$__sh_code"
	__sh_rc=$?
	__sh_send "$__sh_err" "{\"t\":\"end\",\"id\":$__sh_id}"
	__sh_send "$__sh_out" "{\"t\":\"result\",\"id\":$__sh_id,\"status\":\"ok\",\"exit_code\":$__sh_rc}"
done
