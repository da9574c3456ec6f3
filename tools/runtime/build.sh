#!/usr/bin/env bash
# Build gVisor's runsc and its containerd shim (containerd-shim-runsc-v1)
# from the gvisor.dev/gvisor Go module at the version pinned in
# tools/runtime/gvisor/go.mod, every module checked against the hashes of
# tools/runtime/gvisor/go.sum, and cache them by version.
#
#   tools/runtime/build.sh [--prefix DIR] [--cache DIR] [--print-dir] [--version]
#
#   --cache DIR   cache root (default $EAI_RUNTIME_CACHE or /var/cache/eai-runtime);
#                 the binaries land in DIR/gvisor/<pseudo-version>/bin/
#   --prefix DIR  also install DIR/bin/runsc and DIR/bin/containerd-shim-runsc-v1
#   --print-dir   print the bin directory of the pinned version and exit
#                 (whether it is built or not)
#   --version     print the pinned pseudo-version and exit
#
# A second call finds the cached binaries and returns at once.  The first
# takes ~8 minutes on 2 cores (docs/gvisor.md "runsc from source").  Needs
# the go tool, at least the version go.mod names (GOTOOLCHAIN=auto fetches
# one from the module proxy otherwise), and the module proxy or a filled
# module cache.  Point eaid at the result with isolation.gvisor.runsc or
# EAI_SANDBOX_RUNSC=<dir>/runsc.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
mod="$here/gvisor"
cache=${EAI_RUNTIME_CACHE:-/var/cache/eai-runtime}
prefix=""
what=build

die() { echo "build.sh: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
  case "$1" in
    --cache) cache=${2:?}; shift 2 ;;
    --prefix) prefix=${2:?}; shift 2 ;;
    --print-dir) what=dir; shift ;;
    --version) what=version; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) die "unknown argument: $1" ;;
  esac
done

version=$(awk '$1 == "require" && $2 == "gvisor.dev/gvisor" { print $3 }' "$mod/go.mod")
[[ $version =~ ^v0\.0\.0-[0-9]{14}-[0-9a-f]{12}$ ]] || die "no pinned gvisor.dev/gvisor pseudo-version in $mod/go.mod"
bin="$cache/gvisor/$version/bin"
case $what in
  version) echo "$version"; exit 0 ;;
  dir) echo "$bin"; exit 0 ;;
esac

# The go tool: /usr/local/go first (Debian's golang-go 1.19 may be on PATH too).
gobin=""
for g in "${GO:-}" /usr/local/go/bin/go "$(command -v go 2>/dev/null || true)"; do
  [ -n "$g" ] && [ -x "$g" ] && { gobin=$g; break; }
done
[ -n "$gobin" ] || die "no go tool (install Go >= $(awk '$1 == "go" { print $2 }' "$mod/go.mod"))"

built() {
  [ -x "$bin/runsc" ] && [ -x "$bin/containerd-shim-runsc-v1" ] &&
    "$bin/runsc" --version 2>/dev/null | grep -q "runsc version $version"
}

# One build at a time per cache (scripts/prebuild.sh builds in the
# background while the suite runs): a second caller waits here, then finds
# the binaries built.
mkdir -p "$cache/gvisor"
exec {lock}>"$cache/gvisor/.build.lock"
if ! flock -n "$lock"; then
  echo "== runsc $version: another build is under way; waiting for it"
  flock "$lock"
fi

if built; then
  echo "runsc $version: cached in $bin"
else
  echo "== building runsc $version with $("$gobin" version) (first build: minutes)"
  start=$(date +%s)
  tmp="$cache/gvisor/.build.$$"
  mkdir -p "$tmp"
  trap 'rm -rf "$tmp"' EXIT
  # -mod=readonly: go.sum must already hold every hash (no silent additions);
  # GOFLAGS from the environment could say otherwise.
  # runsc and its shim are static Go programs (gVisor builds them CGO off).
  ld="-X gvisor.dev/gvisor/runsc/version.version=$version"
  (cd "$mod" &&
    env GOFLAGS=-mod=readonly CGO_ENABLED=0 "$gobin" build -trimpath -ldflags "$ld" -o "$tmp/runsc" gvisor.dev/gvisor/runsc &&
    env GOFLAGS=-mod=readonly CGO_ENABLED=0 "$gobin" build -trimpath -o "$tmp/containerd-shim-runsc-v1" gvisor.dev/gvisor/shim) ||
    die "go build failed (module proxy unreachable, or a hash in $mod/go.sum does not match)"
  "$tmp/runsc" --version | grep -q "runsc version $version" || die "the built runsc does not report $version"
  mkdir -p "$bin"
  install -m 0755 "$tmp/runsc" "$bin/.runsc.new"
  install -m 0755 "$tmp/containerd-shim-runsc-v1" "$bin/.shim.new"
  mv -f "$bin/.runsc.new" "$bin/runsc"
  mv -f "$bin/.shim.new" "$bin/containerd-shim-runsc-v1"
  echo "built runsc $version in $(($(date +%s) - start)) s: $bin"
fi

if [ -n "$prefix" ]; then
  mkdir -p "$prefix/bin"
  for f in runsc containerd-shim-runsc-v1; do
    install -m 0755 "$bin/$f" "$prefix/bin/.$f.new.$$"
    mv -f "$prefix/bin/.$f.new.$$" "$prefix/bin/$f"
  done
  echo "installed $prefix/bin/runsc and $prefix/bin/containerd-shim-runsc-v1 ($version)"
fi
