#!/usr/bin/env bash
# Run every fuzz target of the module for a given time each (default 3s).
# `make test` runs them briefly (fuzz-short), `make fuzz` longer.
# A crasher is written by go test to <package>/testdata/fuzz/<Target>/:
# fix the bug and commit that file — go test replays it on every run from
# then on, as a regression case.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
time_each=${1:-3s}

# func FuzzX(f *testing.F) in *_test.go files, outside tools and vendored trees.
mapfile -t targets < <(grep -rEo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' \
	--exclude-dir=.tools --exclude-dir=node_modules --exclude-dir=.git . |
	sed -E 's#^\./(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]+).*#\1 \2#' | sort -u)
if [ ${#targets[@]} -eq 0 ]; then
	echo "fuzz: no fuzz target found (the search is broken)" >&2
	exit 1
fi

failed=()
start=$SECONDS
for t in "${targets[@]}"; do
	pkg=${t% *}
	name=${t#* }
	echo "fuzz: $pkg $name ($time_each)"
	if ! "$GO" test -run '^$' -fuzz "^${name}\$" -fuzztime "$time_each" "./$pkg" >/tmp/sandhold-fuzz.$$.log 2>&1; then
		cat /tmp/sandhold-fuzz.$$.log
		failed+=("$pkg $name")
	fi
done
rm -f /tmp/sandhold-fuzz.$$.log
echo "fuzz: ${#targets[@]} targets, $((SECONDS - start)) s"
if [ ${#failed[@]} -gt 0 ]; then
	echo "fuzz: FAILED: ${failed[*]}" >&2
	echo "fuzz: the failing inputs are in each package's testdata/fuzz/<Target>/: fix the bug, commit the input as a regression case" >&2
	exit 1
fi
