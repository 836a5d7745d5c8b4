#!/usr/bin/env bash
# Install a Go tool at a pinned version as DEST, building it once per machine.
#
#   scripts/gotool.sh DEST PACKAGE@VERSION
#
# `make test` needs golangci-lint, govulncheck, gitleaks, cyclonedx-gomod,
# helm and kubeconform. Built per clone they cost minutes of a fresh clone's
# run (golangci-lint alone links for a long while on a 2-core machine), so
# each is built once per machine into TOOL_CACHE (default
# ${XDG_CACHE_HOME:-~/.cache}/sandhold/tools), in a directory keyed by the
# toolchain that builds it (tools that load Go packages must be built by the
# toolchain they check) and by the package and version, and copied into the
# clone from there.
#
# A cached binary is used only if it still is what was built: its SHA-256
# matches the one recorded when it was built, and its embedded build
# information names the same toolchain, main package and module version
# (`go version -m`). Anything else is rebuilt, never trusted. A build goes
# into a temporary directory and is renamed into place, so an interrupted or
# concurrent run leaves nothing half-built behind.
set -euo pipefail
GO=${GO:-go}
if [ $# -ne 2 ] || [[ $2 != *@* ]]; then
	echo "usage: $0 DEST PACKAGE@VERSION" >&2
	exit 2
fi
dest=$1
pkg=${2%@*}
version=${2#*@}
name=${pkg##*/}
if [[ $name =~ ^v[0-9]+$ ]]; then # a major-version suffix: gitleaks/v8
	name=${pkg%/*}
	name=${name##*/}
fi
goversion=$("$GO" env GOVERSION)
cache=$(realpath -m "${TOOL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sandhold/tools}")
entry="$cache/$goversion/${pkg//\//_}@$version"

# verify BIN: the recorded digest and the build information agree.
verify() {
	local bin=$1 info
	[ -x "$bin" ] && [ -f "$bin.sha256" ] || return 1
	[ "$(sha256sum <"$bin" | cut -d' ' -f1)" = "$(cat "$bin.sha256")" ] || return 1
	info=$("$GO" version -m "$bin") || return 1
	# first line "BIN: goX.Y.Z", then tab-separated "path PKG", "mod MODULE VERSION SUM"
	[ "$(sed -n '1s/^.*: //p' <<<"$info")" = "$goversion" ] || return 1
	[ "$(awk -F'\t' '$2 == "path" {print $3}' <<<"$info")" = "$pkg" ] || return 1
	[ "$(awk -F'\t' '$2 == "mod" {print $4}' <<<"$info")" = "$version" ] || return 1
}

if ! verify "$entry/$name"; then
	if [ -e "$entry" ]; then
		echo "gotool: $entry does not verify (digest or build information): rebuilding" >&2
	fi
	echo "gotool: building $pkg@$version with $goversion into $entry (once per machine)"
	mkdir -p "$cache/$goversion"
	tmp=$(mktemp -d "$cache/$goversion/tmp.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	# Outside any module, so no go.mod or go.sum is touched; go install
	# checks the module against the checksum database.
	(cd "$tmp" && GOFLAGS= GOBIN="$tmp/bin" "$GO" install "$pkg@$version")
	mv "$tmp/bin/$name" "$tmp/$name"
	sha256sum <"$tmp/$name" | cut -d' ' -f1 >"$tmp/$name.sha256"
	rmdir "$tmp/bin"
	verify "$tmp/$name" || { echo "gotool: the fresh build of $pkg@$version does not carry the expected build information" >&2; exit 1; }
	# Another run may have finished first: keep whichever verified copy is there.
	rm -rf "$entry.old"
	if [ -e "$entry" ]; then mv -T "$entry" "$entry.old" 2>/dev/null || true; fi
	if ! mv -T "$tmp" "$entry" 2>/dev/null && ! verify "$entry/$name"; then
		echo "gotool: cannot move the build into $entry" >&2
		exit 1
	fi
	rm -rf "$tmp" "$entry.old"
	trap - EXIT
fi
mkdir -p "$(dirname "$dest")"
cp "$entry/$name" "$dest.tmp.$$"
if [ "$(sha256sum <"$dest.tmp.$$" | cut -d' ' -f1)" != "$(cat "$entry/$name.sha256")" ]; then
	rm -f "$dest.tmp.$$"
	echo "gotool: the copy of $entry/$name changed on the way" >&2
	exit 1
fi
mv -f "$dest.tmp.$$" "$dest"
