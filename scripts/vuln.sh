#!/usr/bin/env bash
# govulncheck against a local copy of the Go vulnerability database.
#
# The public database (vuln.go.dev) is not reachable from this project's
# machines. The same data is published as the Go module golang.org/x/vulndb
# (its data/osv holds one OSV file per report), which the Go module proxy
# serves: this script downloads the pinned version, indexes it into the
# database layout govulncheck reads (with vulndb's own cmd/indexdb) under
# .tools/, and runs govulncheck -db file://… on every package.
#
# It never pretends: if the module cannot be fetched or indexed, it says so
# and exits 2 without running govulncheck. Findings exit 3 (govulncheck's
# own code). Refresh the data by raising VULNDB_VERSION in the Makefile.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
TOOLS=${TOOLS:-$PWD/.tools}
: "${VULNDB_VERSION:?set VULNDB_VERSION (the Makefile does)}"
: "${GOVULNCHECK:?set GOVULNCHECK (the Makefile does)}"

db="$TOOLS/vulndb-$VULNDB_VERSION"
if [ ! -f "$db/index/db.json" ]; then
	echo "vuln: building the local database from golang.org/x/vulndb@$VULNDB_VERSION (first run only; takes minutes)"
	# Outside this module, so go.sum is not touched.
	if ! dir=$(cd / && GOFLAGS= "$GO" mod download -json "golang.org/x/vulndb@$VULNDB_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p') || [ -z "$dir" ] || [ ! -d "$dir/data/osv" ]; then
		echo "vuln: NOT RUN: the vulnerability database (golang.org/x/vulndb@$VULNDB_VERSION) cannot be fetched from the Go module proxy" >&2
		exit 2
	fi
	tmp=$(mktemp -d "$TOOLS/vulndb-tmp.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	if ! GOFLAGS= "$GO" run "golang.org/x/vulndb/cmd/indexdb@$VULNDB_VERSION" -vulns "$dir/data/osv" -out "$tmp/db"; then
		echo "vuln: NOT RUN: indexing golang.org/x/vulndb@$VULNDB_VERSION failed" >&2
		exit 2
	fi
	rm -rf "$db" && mv "$tmp/db" "$db"
fi
echo "vuln: database golang.org/x/vulndb@$VULNDB_VERSION ($(find "$db/ID" -name '*.json' | wc -l) reports)"
exec "$GOVULNCHECK" -db "file://$db" ./...
