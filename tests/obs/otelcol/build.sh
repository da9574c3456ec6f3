#!/usr/bin/env bash
# Build the test's OpenTelemetry Collector (builder-config.yaml) from the Go
# module proxy with the collector's own builder, cached by version:
#   build.sh [--print-path]   ->  /var/cache/eai-otelcol/<version>-<config hash>/eai-otelcol
# EAI_OTELCOL_CACHE overrides the cache directory (binaries by version and
# config hash, Go's module and build caches).  Needs Go >= 1.24 (the
# collector's go.mod) and the module proxy; first build ~5 min on 2 cores.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ver=v0.165.0
root=${EAI_OTELCOL_CACHE:-/var/cache/eai-otelcol}
cache=$root/$ver-$(sha256sum "$here/builder-config.yaml" | cut -c1-12)
bin=$cache/eai-otelcol
if [[ ${1:-} == --print-path ]]; then echo "$bin"; exit 0; fi
[[ -x $bin ]] && { echo "$bin"; exit 0; }
# One build at a time (scripts/prebuild.sh builds in the background while
# the suite runs): a second caller waits, then finds the binary built.
mkdir -p "$root"
exec {lock}>"$root/.build.lock"
flock -n "$lock" || { echo "== eai-otelcol: another build is under way; waiting for it" >&2; flock "$lock"; }
[[ -x $bin ]] && { echo "$bin"; exit 0; }
# The go tool: /usr/local/go first (Debian's golang-go 1.19 may be on PATH too).
go=${EAI_GO:-}
[[ -n $go ]] || { [[ -x /usr/local/go/bin/go ]] && go=/usr/local/go/bin/go; } || go=$(command -v go)
work=$(mktemp -d /tmp/eai-otelcol-build.XXXXXX)
trap 'rm -rf "$work"' EXIT
# the module and build caches are kept beside the binaries: a rebuild after a
# change of builder-config.yaml takes a minute, not five
export GOPATH=$work/gopath GOMODCACHE=$root/gomodcache GOCACHE=$root/gocache
export GOTOOLCHAIN=local GOFLAGS=-modcacherw
mkdir -p "$cache"
echo "== building the builder (go.opentelemetry.io/collector/cmd/builder@$ver)" >&2
"$go" install "go.opentelemetry.io/collector/cmd/builder@$ver" >&2
cp "$here/builder-config.yaml" "$work/"
echo "== building eai-otelcol $ver" >&2
(cd "$work" && PATH=$(dirname "$go"):$PATH "$GOPATH/bin/builder" --config builder-config.yaml >&2)
install -m 0755 "$work/dist/eai-otelcol" "$bin.new"
mv "$bin.new" "$bin"
echo "$bin"
