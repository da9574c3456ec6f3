#!/bin/sh
# Print the path of a promtool binary, fetching it once into a cache dir.
# promtool comes from Debian's `prometheus` package, taken apart with
# `apt-get download` + `dpkg -x`: nothing is installed, no server started.
#   EAI_PROMTOOL        use this binary as is
#   EAI_TOOLS_CACHE     cache dir (default: ${XDG_CACHE_HOME:-$HOME/.cache}/eai-sandbox)
set -eu
if [ -n "${EAI_PROMTOOL:-}" ] && [ -x "$EAI_PROMTOOL" ]; then
    echo "$EAI_PROMTOOL"; exit 0
fi
cache="${EAI_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/eai-sandbox}"
bin="$cache/promtool"
if [ -x "$bin" ]; then
    echo "$bin"; exit 0
fi
if command -v promtool >/dev/null 2>&1; then
    command -v promtool; exit 0
fi
mkdir -p "$cache"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(
    cd "$work"
    if ! apt-get download prometheus >/dev/null 2>&1; then
        apt-get update >/dev/null 2>&1 || true
        apt-get download prometheus >/dev/null
    fi
    dpkg -x prometheus_*.deb x
) >&2
[ -x "$work/x/usr/bin/promtool" ] || { echo "promtool.sh: no usr/bin/promtool in the prometheus package" >&2; exit 1; }
cp "$work/x/usr/bin/promtool" "$bin.tmp.$$"
mv "$bin.tmp.$$" "$bin"
echo "$bin"
