#!/usr/bin/env bash
# The Java SDK as its ecosystem builds it: a plain `mvn verify` from Maven
# Central (pom.xml's default profile, release), the tests, then the jar, the
# sources jar and the javadoc jar a release carries.  The local repository is a cache kept across runs
# (EAI_MAVEN_REPO, default /var/cache/eai-maven).   usage: verify-central.sh OUTDIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: verify-central.sh OUTDIR}
repo=${EAI_MAVEN_REPO:-/var/cache/eai-maven}
mkdir -p "$repo"
rm -rf "$out"
(cd "$here" && mvn -B -q -Dstyle.color=never -Dmaven.repo.local="$repo" -Deai.build.dir="$out" verify)
v=$(sed -n 's|^  <version>\(.*\)</version>|\1|p' "$here/pom.xml" | head -1)
for j in "eai-sdk-$v.jar" "eai-sdk-$v-sources.jar" "eai-sdk-$v-javadoc.jar"; do
    [[ -s $out/$j ]] || { echo "mvn verify made no $j"; exit 1; }
done
unzip -l "$out/eai-sdk-$v-javadoc.jar" | grep -q 'ai/enterprise/sdk/EnterpriseAIClient.html' ||
    { echo "the javadoc jar has no page for EnterpriseAIClient"; exit 1; }
echo "mvn verify ok: eai-sdk-$v.jar, -sources.jar, -javadoc.jar"
