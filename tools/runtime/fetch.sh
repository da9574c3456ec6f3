#!/usr/bin/env bash
# Fetch a pinned upstream gVisor release (runsc) and install it after
# verifying its SHA-512 against the one pinned in this repository
# (tools/runtime/runsc-release.sha512, one line per version and
# architecture), never against a checksum fetched beside the binary.
# For hosts that reach upstream's release storage; runsc from the Go module
# is tools/runtime/build.sh.
#
#   tools/runtime/fetch.sh [--prefix DIR] [--version V] [--arch A] [--from DIR] [--sums FILE] [--print-url]
#
#   --prefix DIR  install DIR/bin/runsc (default /usr/local)
#   --version V   release to fetch (default: the pinned one below)
#   --arch A      x86_64 or aarch64 (default: uname -m)
#   --from DIR    take DIR/runsc instead of downloading (offline hosts, tests)
#   --sums FILE   the table of pinned SHA-512s (default: runsc-release.sha512
#                 beside this script)
#   --print-url   print the download URL and exit
#
# Nothing is installed unless the table pins a well-formed SHA-512 for the
# version and architecture and the binary matches it.
# Then point eaid at it: EAI_SANDBOX_RUNSC=<prefix>/bin/runsc.
set -euo pipefail

PINNED_VERSION="20261026.0"
BASE_URL="https://storage.googleapis.com/gvisor/releases/release"

prefix=/usr/local
version=$PINNED_VERSION
arch=$(uname -m)
from=""
sums="$(cd "$(dirname "$0")" && pwd)/runsc-release.sha512"
print_url=0

die() { echo "fetch.sh: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix=${2:?}; shift 2 ;;
    --version) version=${2:?}; shift 2 ;;
    --arch) arch=${2:?}; shift 2 ;;
    --from) from=${2:?}; shift 2 ;;
    --sums) sums=${2:?}; shift 2 ;;
    --print-url) print_url=1; shift ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
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
  exit 0
fi

# The pinned SHA-512: `<version> <arch> <128 hex>` lines, '#' comments.
[ -f "$sums" ] || die "$sums: not found"
want=$(awk -v v="$version" -v a="$arch" '$1 !~ /^#/ && $1 == v && $2 == a { print $3; n++ } END { if (n > 1) print "ambiguous" }' "$sums")
[ -n "$want" ] || die "no SHA-512 pinned for runsc $version $arch in $sums"
[[ $want =~ ^[0-9a-fA-F]{128}$ ]] || die "malformed SHA-512 pinned for runsc $version $arch in $sums"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ -n "$from" ]; then
  [ -f "$from/runsc" ] || die "$from/runsc: not found"
  cp -- "$from/runsc" "$work/runsc"
else
  if command -v curl >/dev/null; then
    get() { curl -fsSL --proto '=https' --max-time 300 -o "$2" "$1"; }
  elif command -v wget >/dev/null; then
    get() { wget -q --timeout=300 -O "$2" "$1"; }
  else
    die "need curl or wget"
  fi
  get "$url/runsc" "$work/runsc" || die "download failed: $url/runsc"
fi

have=$(sha512sum "$work/runsc" | cut -d' ' -f1)
[ "${want,,}" = "$have" ] || die "SHA-512 mismatch for runsc: want $want, have $have"

mkdir -p "$prefix/bin"
install -m 0755 "$work/runsc" "$prefix/bin/.runsc.new.$$"
mv -f "$prefix/bin/.runsc.new.$$" "$prefix/bin/runsc"
echo "installed $prefix/bin/runsc ($version, $arch, sha512 verified)"
