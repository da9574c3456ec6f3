#!/usr/bin/env bash
# Java conformance runner (sdk/conformance/README.md), called by
# sdk/conformance/run.sh with EAI_URL, EAI_API_KEY, EAI_API_KEY_B and
# EAI_CONFORMANCE_SCENARIOS exported: runs ConformanceTest (every scenario,
# PASS/FAIL lines) and SeedSnippetTest (the seed's Java snippet) with Maven
# offline against Debian's repository.  Build output goes to
# $EAI_JAVA_BUILD_DIR (default a temp dir), never into the source tree.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
out=${EAI_JAVA_BUILD_DIR:-}
cleanup=
if [[ -z $out ]]; then
    out=$(mktemp -d /tmp/eai-sdk-java.XXXXXX)
    cleanup=$out
fi
trap '[[ -n $cleanup ]] && rm -rf "$cleanup"' EXIT
EAI_SDK_LIVE=1 mvn -o -B -q -Dstyle.color=never -Dmaven.repo.local=/usr/share/maven-repo -Deai.build.dir="$out" \
    -Dtest='ConformanceTest,SeedSnippetTest' -DfailIfNoTests=false test
