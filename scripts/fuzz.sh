#!/usr/bin/env bash
# Run every fuzz target of the module for a given time each (default 3s).
# `make test` runs them briefly (fuzz-short), `make fuzz` longer.
# A crasher is written to <package>/testdata/fuzz/<Target>/ (as go test
# writes it): fix the bug and commit that file — go test replays it on every
# run from then on, as a regression case.
#
# Each package's test binary is compiled once, with the coverage
# instrumentation `go test -fuzz` uses (`go test -c -fuzz`), and every target
# of the package is fuzzed from it, in the package's directory and with the
# corpus cache `go test -fuzz` uses ($GOCACHE/fuzz/<import path>). Compiling
# and linking a test binary per target was most of this gate's time; the
# fuzzing itself (every target, TIME each) is unchanged. Two packages are
# compiled at a time (the link is one thread).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
time_each=${1:-3s}
jobs=${FUZZ_BUILD_JOBS:-2}

# func FuzzX(f *testing.F) in *_test.go files, outside tools and vendored trees.
mapfile -t targets < <(grep -rEo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' \
	--exclude-dir=.tools --exclude-dir=node_modules --exclude-dir=.git . |
	sed -E 's#^\./(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]+).*#\1 \2#' | sort -u)
if [ ${#targets[@]} -eq 0 ]; then
	echo "fuzz: no fuzz target found (the search is broken)" >&2
	exit 1
fi
mapfile -t pkgs < <(printf '%s\n' "${targets[@]}" | cut -d' ' -f1 | sort -u)

start=$SECONDS
bins=$(mktemp -d "${TMPDIR:-/tmp}/sandhold-fuzz.XXXXXX")
trap 'rm -rf "$bins"' EXIT
gocache=$("$GO" env GOCACHE)
module=$("$GO" list -m)

# One instrumented test binary per package, named after the package path.
export GO bins
if ! printf '%s\n' "${pkgs[@]}" | xargs -P "$jobs" -I{} sh -c \
	'out="$bins/$(echo "$1" | tr / _)"; "$GO" test -c -fuzz=. -o "$out.test" "./$1" >"$out.build.log" 2>&1 || { cat "$out.build.log"; exit 1; }' _ {}; then
	echo "fuzz: FAILED: a package's fuzz test binary did not build" >&2
	exit 1
fi
echo "fuzz: ${#pkgs[@]} packages compiled, $((SECONDS - start)) s"

failed=()
for t in "${targets[@]}"; do
	pkg=${t% *}
	name=${t#* }
	bin="$bins/$(echo "$pkg" | tr / _).test"
	log="$bins/run.log"
	echo "fuzz: $pkg $name ($time_each)"
	# -test.timeout as go test's default: a hung target fails, it does not stall the gate.
	if ! (cd "$pkg" && "$bin" -test.run='^$' -test.fuzz="^${name}\$" -test.fuzztime="$time_each" \
		-test.fuzzcachedir="$gocache/fuzz/$module/$pkg" -test.timeout=10m -test.paniconexit0) >"$log" 2>&1; then
		cat "$log"
		failed+=("$pkg $name")
	elif grep -q 'not built with coverage instrumentation' "$log"; then
		# Fuzzing blind would pass while finding far less: not this gate.
		cat "$log"
		failed+=("$pkg $name (not instrumented)")
	elif ! grep -q '^PASS$' "$log"; then
		cat "$log"
		failed+=("$pkg $name (no PASS)")
	fi
done
echo "fuzz: ${#targets[@]} targets in ${#pkgs[@]} packages, $((SECONDS - start)) s"
if [ ${#failed[@]} -gt 0 ]; then
	echo "fuzz: FAILED: ${failed[*]}" >&2
	echo "fuzz: the failing inputs are in each package's testdata/fuzz/<Target>/: fix the bug, commit the input as a regression case" >&2
	exit 1
fi
