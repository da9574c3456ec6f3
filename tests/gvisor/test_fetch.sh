#!/usr/bin/env bash
# tools/runtime/fetch.sh: verification against the SHA-512 pinned in a table
# (--sums), on local files (--from), no network.
set -u
fetch=${1:?usage: test_fetch.sh path/to/fetch.sh}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0 fail=0
ok() { echo "ok: $1"; pass=$((pass + 1)); }
ko() { echo "FAIL: $1"; fail=$((fail + 1)); }
V=20261026.0

mkdir -p "$work/good" "$work/bad"
printf '#!/bin/sh\necho "runsc version test-fake"\n' > "$work/good/runsc"
good=$(sha512sum "$work/good/runsc" | cut -d' ' -f1)
printf '# pinned\n%s x86_64 %s\n' "$V" "$good" > "$work/sums"
printf '#!/bin/sh\necho evil\n' > "$work/bad/runsc"
f() { bash "$fetch" --version "$V" --arch x86_64 --sums "$@"; }

# 1. the pinned hash matches: installed, identical, executable
if out=$(f "$work/sums" --from "$work/good" --prefix "$work/p1" 2>&1) &&
   cmp -s "$work/good/runsc" "$work/p1/bin/runsc" && [ -x "$work/p1/bin/runsc" ]; then
  ok "verified file installed"
else ko "verified file installed: $out"; fi

# 2. tampered binary: refused, nothing installed
if out=$(f "$work/sums" --from "$work/bad" --prefix "$work/p2" 2>&1); then
  ko "tampered file refused"
elif [ -e "$work/p2/bin/runsc" ]; then ko "tampered file left something installed"
elif [[ $out == *mismatch* ]]; then ok "tampered file refused"
else ko "tampered file refused for the wrong reason: $out"; fi

# 3. a checksum file beside the binary counts for nothing: a tampered binary
#    with its own matching runsc.sha512 is still refused
(cd "$work/bad" && sha512sum runsc > runsc.sha512)
if f "$work/sums" --from "$work/bad" --prefix "$work/p3" >/dev/null 2>&1 || [ -e "$work/p3/bin/runsc" ]; then
  ko "checksum beside the binary ignored"
else ok "checksum beside the binary ignored"; fi

# 4. a version (or architecture) with no pinned line: refused
if out=$(bash "$fetch" --version 20990101.0 --arch x86_64 --sums "$work/sums" --from "$work/good" \
         --prefix "$work/p4" 2>&1) || [ -e "$work/p4/bin/runsc" ]; then
  ko "unpinned version refused"
elif [[ $out == *"no SHA-512 pinned"* ]]; then ok "unpinned version refused"
else ko "unpinned version refused for the wrong reason: $out"; fi
if f "$work/sums" --arch aarch64 --from "$work/good" --prefix "$work/p4b" >/dev/null 2>&1 ||
   [ -e "$work/p4b/bin/runsc" ]; then
  ko "unpinned architecture refused"
else ok "unpinned architecture refused"; fi

# 5. a malformed pinned line, and two lines for one version: refused
printf '%s x86_64 not-a-hash\n' "$V" > "$work/sums-bad"
printf '%s x86_64 %s\n%s x86_64 %s\n' "$V" "$good" "$V" "$good" > "$work/sums-two"
for t in sums-bad sums-two; do
  if f "$work/$t" --from "$work/good" --prefix "$work/p5-$t" >/dev/null 2>&1 || [ -e "$work/p5-$t/bin/runsc" ]; then
    ko "$t refused"
  else ok "$t refused"; fi
done

# 6. the pinned release and the official URL layout
urls=$(bash "$fetch" --print-url --arch x86_64)
if [[ $urls == *"/gvisor/releases/release/20261026.0/x86_64/runsc" ]]; then
  ok "pinned release URL layout"
else ko "pinned release URL layout: $urls"; fi

# 7. an existing install is replaced only by a verified one
cp "$work/good/runsc" "$work/keep"
if ! f "$work/sums" --from "$work/bad" --prefix "$work/p1" >/dev/null 2>&1 && cmp -s "$work/p1/bin/runsc" "$work/keep"; then
  ok "failed verification keeps the previous install"
else ko "failed verification keeps the previous install"; fi

# 8. the repository's own table: every line well formed; the default
#    version is refused while it has none (never installed unverified)
table=$(dirname "$fetch")/runsc-release.sha512
if awk '$1 !~ /^#/ && NF && !($3 ~ /^[0-9a-fA-F]+$/ && length($3) == 128 && NF == 3) { bad = 1 } END { exit bad }' "$table"; then
  ok "the pinned table is well formed"
else ko "the pinned table is well formed"; fi
if ! grep -q "^20261026.0 x86_64 " "$table"; then
  if bash "$fetch" --arch x86_64 --from "$work/good" --prefix "$work/p8" >/dev/null 2>&1 || [ -e "$work/p8/bin/runsc" ]; then
    ko "the default version without a pinned hash refused"
  else ok "the default version without a pinned hash refused"; fi
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
