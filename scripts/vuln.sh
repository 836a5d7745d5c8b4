#!/usr/bin/env bash
# govulncheck against a local copy of the Go vulnerability database: a gate of
# `make test` (via `make gates`).
#
# The public database (vuln.go.dev) is not reachable from this project's
# machines. The same data is published as the Go module golang.org/x/vulndb
# (its data/osv holds one OSV file per report), which the Go module proxy
# serves: this script downloads the pinned version (checked against go.sum's
# checksum database like any module), indexes it into the database layout
# govulncheck reads (with vulndb's own cmd/indexdb), and runs
# govulncheck -db file://… on every package.
#
# The index is kept outside the clone, in VULNDB_CACHE (default
# ${XDG_CACHE_HOME:-~/.cache}/sandhold), one directory per VULNDB_VERSION, so a
# fresh clone on a machine that built it once starts at once; it is written to a
# temporary directory and renamed into place, so an interrupted run leaves
# nothing half-built behind.
#
# It never pretends: if the module cannot be fetched or indexed, it says
# NOT RUN and exits 2 without running govulncheck, and `make test` fails (a
# gate that could not look has not passed). Reachable vulnerabilities exit 3
# (govulncheck's own code). Refresh the data by raising VULNDB_VERSION in the
# Makefile.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
: "${VULNDB_VERSION:?set VULNDB_VERSION (the Makefile does)}"
: "${GOVULNCHECK:?set GOVULNCHECK (the Makefile does)}"
cache=$(realpath -m "${VULNDB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sandhold}")

db="$cache/vulndb-$VULNDB_VERSION"
if [ ! -f "$db/index/db.json" ]; then
	echo "vuln: building the local database from golang.org/x/vulndb@$VULNDB_VERSION into $db (first run on this machine only)"
	mkdir -p "$cache"
	# Outside this module, so go.sum is not touched.
	if ! dir=$(cd / && GOFLAGS= "$GO" mod download -json "golang.org/x/vulndb@$VULNDB_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p') || [ -z "$dir" ] || [ ! -d "$dir/data/osv" ]; then
		echo "vuln: NOT RUN: the vulnerability database (golang.org/x/vulndb@$VULNDB_VERSION) cannot be fetched from the Go module proxy" >&2
		exit 2
	fi
	tmp=$(mktemp -d "$cache/vulndb-tmp.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	if ! GOFLAGS= "$GO" run "golang.org/x/vulndb/cmd/indexdb@$VULNDB_VERSION" -vulns "$dir/data/osv" -out "$tmp/db"; then
		echo "vuln: NOT RUN: indexing golang.org/x/vulndb@$VULNDB_VERSION failed" >&2
		exit 2
	fi
	# Another run may have finished first: keep whichever complete index is there.
	if ! mv -T "$tmp/db" "$db" 2>/dev/null && [ ! -f "$db/index/db.json" ]; then
		echo "vuln: NOT RUN: cannot move the index into $db" >&2
		exit 2
	fi
	rm -rf "$tmp" # exec below skips the EXIT trap
	trap - EXIT
fi
n=$(find "$db/ID" -name '*.json' | wc -l)
if [ "$n" -eq 0 ]; then
	echo "vuln: NOT RUN: the database in $db holds no reports" >&2
	exit 2
fi
echo "vuln: database golang.org/x/vulndb@$VULNDB_VERSION ($n reports), $("$GO" env GOVERSION)"
exec "$GOVULNCHECK" -db "file://$db" ./...
