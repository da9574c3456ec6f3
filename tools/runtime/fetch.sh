#!/usr/bin/env bash
# Fetch a pinned upstream gVisor release (runsc) and install it after
# verifying its SHA-512.  For hosts that want a newer runsc than Debian's.
#
#   tools/runtime/fetch.sh [--prefix DIR] [--version V] [--arch A] [--from DIR] [--print-url]
#
#   --prefix DIR  install DIR/bin/runsc (default /usr/local)
#   --version V   release to fetch (default: the pinned one below)
#   --arch A      x86_64 or aarch64 (default: uname -m)
#   --from DIR    take runsc and runsc.sha512 from a local directory instead
#                 of downloading (offline hosts, tests)
#   --print-url   print the download URLs and exit
#
# Nothing is installed unless the checksum file is well formed and matches.
# Then point eaid at it: EAI_SANDBOX_RUNSC=<prefix>/bin/runsc.
set -euo pipefail

PINNED_VERSION="20261026.0"
BASE_URL="https://storage.googleapis.com/gvisor/releases/release"

prefix=/usr/local
version=$PINNED_VERSION
arch=$(uname -m)
from=""
print_url=0

die() { echo "fetch.sh: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix=${2:?}; shift 2 ;;
    --version) version=${2:?}; shift 2 ;;
    --arch) arch=${2:?}; shift 2 ;;
    --from) from=${2:?}; shift 2 ;;
    --print-url) print_url=1; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) die "unknown argument: $1" ;;
  esac
done

[[ $version =~ ^[0-9]{8}(\.[0-9]+)?$ ]] || die "invalid version: $version"
case "$arch" in
  x86_64|amd64) arch=x86_64 ;;
  aarch64|arm64) arch=aarch64 ;;
  *) die "unsupported architecture: $arch" ;;
esac

url="$BASE_URL/$version/$arch"
if [ "$print_url" = 1 ]; then
  echo "$url/runsc"
  echo "$url/runsc.sha512"
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ -n "$from" ]; then
  [ -f "$from/runsc" ] || die "$from/runsc: not found"
  [ -f "$from/runsc.sha512" ] || die "$from/runsc.sha512: not found"
  cp -- "$from/runsc" "$work/runsc"
  cp -- "$from/runsc.sha512" "$work/runsc.sha512"
else
  if command -v curl >/dev/null; then
    get() { curl -fsSL --proto '=https' --max-time 300 -o "$2" "$1"; }
  elif command -v wget >/dev/null; then
    get() { wget -q --timeout=300 -O "$2" "$1"; }
  else
    die "need curl or wget"
  fi
  get "$url/runsc" "$work/runsc" || die "download failed: $url/runsc"
  get "$url/runsc.sha512" "$work/runsc.sha512" || die "download failed: $url/runsc.sha512"
fi

# The checksum file is `<128 hex>  runsc` (sha512sum format); accept only that.
read -r want name rest < "$work/runsc.sha512" || die "empty checksum file"
[[ $want =~ ^[0-9a-fA-F]{128}$ ]] || die "malformed checksum file"
[ -z "${rest:-}" ] || die "malformed checksum file"
case "${name:-runsc}" in runsc|\*runsc) ;; *) die "checksum file names '$name', not runsc" ;; esac
have=$(sha512sum "$work/runsc" | cut -d' ' -f1)
[ "${want,,}" = "$have" ] || die "SHA-512 mismatch for runsc: want $want, have $have"

mkdir -p "$prefix/bin"
install -m 0755 "$work/runsc" "$prefix/bin/.runsc.new.$$"
mv -f "$prefix/bin/.runsc.new.$$" "$prefix/bin/runsc"
echo "installed $prefix/bin/runsc ($version, $arch, sha512 verified)"
