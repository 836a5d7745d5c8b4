#!/usr/bin/env bash
# `npm ci` in each directory given, all at once, for `make deps`.
#
# Each install mostly waits on the registry (tens of seconds for a few dozen
# packages on this project's machines, little CPU), so they run side by side
# instead of one after the other. Each one's output is printed when it ends;
# any failure fails the whole (after all have ended, so no install is left
# half-written by an early exit).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v npm >/dev/null; then
	echo "npm not found: the TypeScript client tests (${*}) will skip"
	exit 0
fi
logs=$(mktemp -d "${TMPDIR:-/tmp}/sandhold-npm.XXXXXX")
trap 'rm -rf "$logs"' EXIT
declare -A pid
for dir in "$@"; do
	npm ci --prefix "$dir" --no-audit --no-fund >"$logs/$(echo "$dir" | tr / _).log" 2>&1 &
	pid[$dir]=$!
done
failed=()
for dir in "$@"; do
	if wait "${pid[$dir]}"; then
		echo "npm ci $dir: $(grep -E '^added|^up to date' "$logs/$(echo "$dir" | tr / _).log" | tail -1)"
	else
		cat "$logs/$(echo "$dir" | tr / _).log"
		failed+=("$dir")
	fi
done
if [ ${#failed[@]} -gt 0 ]; then
	echo "npm ci FAILED in: ${failed[*]}" >&2
	exit 1
fi
