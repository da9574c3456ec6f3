#!/usr/bin/env bash
# tools/runtime/fetch.sh: verification on local files (--from), no network.
set -u
fetch=${1:?usage: test_fetch.sh path/to/fetch.sh}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0 fail=0
ok() { echo "ok: $1"; pass=$((pass + 1)); }
ko() { echo "FAIL: $1"; fail=$((fail + 1)); }

mkdir -p "$work/good" "$work/bad" "$work/malformed" "$work/nosum" "$work/othername"
printf '#!/bin/sh\necho "runsc version test-fake"\n' > "$work/good/runsc"
(cd "$work/good" && sha512sum runsc > runsc.sha512)

# 1. good file: installed, identical, executable
if out=$(bash "$fetch" --from "$work/good" --prefix "$work/p1" 2>&1) &&
   cmp -s "$work/good/runsc" "$work/p1/bin/runsc" && [ -x "$work/p1/bin/runsc" ]; then
  ok "verified file installed"
else ko "verified file installed: $out"; fi

# 2. tampered binary: refused, nothing installed
cp "$work/good/runsc.sha512" "$work/bad/"
printf '#!/bin/sh\necho evil\n' > "$work/bad/runsc"
if out=$(bash "$fetch" --from "$work/bad" --prefix "$work/p2" 2>&1); then
  ko "tampered file refused"
elif [ -e "$work/p2/bin/runsc" ]; then ko "tampered file left something installed"
elif [[ $out == *mismatch* ]]; then ok "tampered file refused"
else ko "tampered file refused for the wrong reason: $out"; fi

# 3. malformed checksum file
cp "$work/good/runsc" "$work/malformed/"
echo "not-a-hash  runsc" > "$work/malformed/runsc.sha512"
if bash "$fetch" --from "$work/malformed" --prefix "$work/p3" >/dev/null 2>&1 || [ -e "$work/p3/bin/runsc" ]; then
  ko "malformed checksum refused"
else ok "malformed checksum refused"; fi

# 4. missing checksum file
cp "$work/good/runsc" "$work/nosum/"
if bash "$fetch" --from "$work/nosum" --prefix "$work/p4" >/dev/null 2>&1 || [ -e "$work/p4/bin/runsc" ]; then
  ko "missing checksum refused"
else ok "missing checksum refused"; fi

# 5. checksum of another file name
cp "$work/good/runsc" "$work/othername/"
sed 's/runsc$/other/' "$work/good/runsc.sha512" > "$work/othername/runsc.sha512"
if bash "$fetch" --from "$work/othername" --prefix "$work/p5" >/dev/null 2>&1 || [ -e "$work/p5/bin/runsc" ]; then
  ko "checksum for another file refused"
else ok "checksum for another file refused"; fi

# 6. the pinned release and the official URL layout
urls=$(bash "$fetch" --print-url --arch x86_64)
if [[ $urls == *"/gvisor/releases/release/20261026.0/x86_64/runsc"* && $urls == *"/x86_64/runsc.sha512"* ]]; then
  ok "pinned release URL layout"
else ko "pinned release URL layout: $urls"; fi

# 7. an existing install is replaced only by a verified one
cp "$work/good/runsc" "$work/keep"
if ! bash "$fetch" --from "$work/bad" --prefix "$work/p1" >/dev/null 2>&1 && cmp -s "$work/p1/bin/runsc" "$work/keep"; then
  ok "failed verification keeps the previous install"
else ko "failed verification keeps the previous install"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
