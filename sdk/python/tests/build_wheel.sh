#!/usr/bin/env bash
# Build the sdist and the wheel with Debian's python3-build (PEP 517/621,
# offline, no isolation) from a copy of sdk/python in OUT; check that the sdist
# holds the sources, the tests and py.typed, and that a wheel built from the
# sdist alone equals the direct one's file list; then import the package from
# the wheel alone (enterprise_ai, .sandbox, .aio).   usage: build_wheel.sh OUTDIR
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: build_wheel.sh OUTDIR}
rm -rf "$out" && mkdir -p "$out/src"
cp -r "$here/enterprise_ai" "$here/pyproject.toml" "$here/README.md" "$here/MANIFEST.in" "$out/src/"
cp -r "$here/tests" "$out/src/"
(cd "$out/src" && /usr/bin/python3 -m build --no-isolation --sdist --wheel --outdir "$out/dist" >"$out/build.log" 2>&1) ||
    { tail -20 "$out/build.log"; exit 1; }
whl=$(ls "$out"/dist/enterprise_ai-*-py3-none-any.whl)
sdist=$(ls "$out"/dist/enterprise*ai-*.tar.gz)
listing=$(unzip -l "$whl")   # (not piped into grep -q: with pipefail, unzip's SIGPIPE failed the check)
for f in py.typed __init__.py client.py sandbox.py aio.py; do
    [[ $listing == *enterprise_ai/$f* ]] || { echo "no enterprise_ai/$f in $whl"; exit 1; }
done
slist=$(tar -tzf "$sdist")
for f in pyproject.toml README.md enterprise_ai/py.typed enterprise_ai/aio.py tests/test_client.py; do
    [[ $slist == *"/$f"* ]] || { echo "no $f in $sdist"; exit 1; }
done
# the wheel again, from the sdist alone (what pip does with an sdist)
mkdir -p "$out/from-sdist" && tar -xzf "$sdist" -C "$out/from-sdist"
(cd "$out/from-sdist"/enterprise*ai-* && /usr/bin/python3 -m build --no-isolation --wheel --outdir "$out/dist2" \
    >>"$out/build.log" 2>&1) || { tail -20 "$out/build.log"; exit 1; }
[[ $(unzip -Z1 "$whl" | sort) == $(unzip -Z1 "$out"/dist2/enterprise_ai-*.whl | sort) ]] ||
    { echo "the wheel built from the sdist differs"; exit 1; }
cd "$out" && PYTHONPATH="$whl" /usr/bin/python3 -c '
import enterprise_ai, enterprise_ai.sandbox, enterprise_ai.aio, sys
assert enterprise_ai.__file__.startswith(sys.argv[1]), enterprise_ai.__file__
assert enterprise_ai.sandbox.run_untrusted and enterprise_ai.AsyncEnterpriseAI
print("sdist and wheel ok:", sys.argv[1].rsplit("/", 1)[-1], "version", enterprise_ai.__version__)' "$whl"
