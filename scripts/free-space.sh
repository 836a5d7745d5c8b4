#!/bin/sh
# free-space.sh: refuse to start the suite on a disk too full to finish it.
# Tests make real sandboxes (workspace images), PostgreSQL clusters and
# builds in $TMPDIR and the Go build cache; under the sandbox disk guard's
# floor (2.5 GiB free) every create answers 409 and dozens of tests fail
# for one reason that no failure names. Usage: free-space.sh MIN_GIB DIR...
set -u
min=$1; shift
bad=0
for d in "$@"; do
	[ -d "$d" ] || continue
	free=$(df -Pk "$d" | awk 'NR==2 {print int($4 / 1048576)}')
	if [ "$free" -lt "$min" ]; then
		echo "make test: only ${free} GiB free on the file system of $d; the suite needs ${min} GiB" >&2
		bad=1
	fi
done
if [ $bad = 1 ]; then
	echo "  free space first: 'go clean -cache' (or remove old entries of $(go env GOCACHE 2>/dev/null)), old test directories in ${TMPDIR:-/tmp}; or run with MIN_FREE_GIB=N" >&2
	exit 1
fi
