#!/usr/bin/env bash
# Java conformance runner (sdk/conformance/README.md), called by
# sdk/conformance/run.sh with EAI_URL, EAI_API_KEY, EAI_API_KEY_B and
# EAI_CONFORMANCE_SCENARIOS exported: runs ConformanceTest (every scenario,
# PASS/FAIL lines) and SeedSnippetTest (the seed's Java snippet) with Maven
# offline against Debian's repository, then packages the jar and runs
# examples/Seed.java with plain `java` against it, as a user would.  Build
# output goes to $EAI_JAVA_BUILD_DIR (default a temp dir), never into the
# source tree.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
out=${EAI_JAVA_BUILD_DIR:-}
cleanup=
if [[ -z $out ]]; then
    out=$(mktemp -d /tmp/eai-sdk-java.XXXXXX)
    cleanup=$out
fi
trap '[[ -n $cleanup ]] && rm -rf "$cleanup"' EXIT
mvn=(mvn -o -B -q -Pdebian -Dstyle.color=never -Dmaven.repo.local=/usr/share/maven-repo -Deai.build.dir="$out")
rc=0
EAI_SDK_LIVE=1 "${mvn[@]}" -Dtest='ConformanceTest,SeedSnippetTest' -DfailIfNoTests=false test || rc=1
echo "== java: examples/Seed.java against $EAI_URL (plain java, SDK jar + Debian's Jackson)"
if "${mvn[@]}" -DskipTests package; then
    j=/usr/share/java
    java -cp "$out/eai-sdk-0.1.0.jar:$j/jackson-databind.jar:$j/jackson-core.jar:$j/jackson-annotations.jar" \
        examples/Seed.java || rc=1
else
    rc=1
fi
exit $rc
