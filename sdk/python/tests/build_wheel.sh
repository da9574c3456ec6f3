#!/usr/bin/env bash
# Build the wheel with Debian's python3-build (offline, no isolation) from a copy
# of sdk/python in OUT, then import the package from the wheel alone and check
# that it holds py.typed.   usage: build_wheel.sh OUTDIR
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: build_wheel.sh OUTDIR}
rm -rf "$out" && mkdir -p "$out/src"
cp -r "$here/enterprise_ai" "$here/pyproject.toml" "$here/README.md" "$out/src/"
(cd "$out/src" && /usr/bin/python3 -m build --no-isolation --wheel --outdir "$out/dist" >"$out/build.log" 2>&1) ||
    { tail -20 "$out/build.log"; exit 1; }
whl=$(ls "$out"/dist/enterprise_ai-*-py3-none-any.whl)
listing=$(unzip -l "$whl")   # (not piped into grep -q: with pipefail, unzip's SIGPIPE failed the check)
[[ $listing == *enterprise_ai/py.typed* ]] || { echo "no py.typed in $whl"; exit 1; }
cd "$out" && PYTHONPATH="$whl" /usr/bin/python3 -c '
import enterprise_ai, sys
assert enterprise_ai.__file__.startswith(sys.argv[1]), enterprise_ai.__file__
print("wheel ok:", sys.argv[1].rsplit("/", 1)[-1], "version", enterprise_ai.__version__)' "$whl"
