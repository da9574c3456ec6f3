#!/usr/bin/env bash
# One command from a fresh Debian 12 machine (as root) to the whole test
# suite: installs what is missing, builds, prepares the Node test tools,
# starts a throwaway PostgreSQL 15 cluster and runs every test with ctest.
# Extra arguments go to ctest (e.g. `-L unit`).  .ci/run calls this.
source "$(dirname "$0")/lib.sh"
need_root
cd "$EAI_ROOT"
# The SDK suites (sdk/, docs/sdk.md, label sdk): Python's wheel build and type
# check from Debian; the TypeScript compiler comes from npm (package-lock.json).
EAI_SDK_PACKAGES=(python3-build python3-setuptools python3-wheel python3-pytest mypy unzip python3-venv)
EAI_SDK_PACKAGES+=(maven default-jdk-headless libjackson2-databind-java junit5 libmaven-compiler-plugin-java libsurefire-java libmaven-resources-plugin-java) # Java SDK (Maven offline); Go's golang-go is below
# Node and npm from Debian unless a node with its own npm is there already
# (NodeSource's nodejs ships npm and conflicts with Debian's package).
node_pkgs=()
command -v node >/dev/null 2>&1 || node_pkgs+=(nodejs)
command -v npm >/dev/null 2>&1 || node_pkgs+=(npm)
apt_install "${EAI_BUILD_PACKAGES[@]}" "${EAI_RUN_PACKAGES[@]}" \
    postgresql-15 \
    containerd runc busybox-static python3 openssl sqlite3 json-schema-test-suite nftables iproute2 \
    golang-go golang-github-masterminds-sprig-dev golang-gopkg-yaml.v3-dev \
    "${EAI_SDK_PACKAGES[@]}" \
    "${node_pkgs[@]}"
# runsc from gVisor's Go module at the pinned version (tools/runtime/build.sh,
# docs/gvisor.md "runsc from source"), cached by version: the suite runs on it.
# Debian's runsc (EAI_RUN_PACKAGES) stays installed and supported: the gVisor
# sandbox suite and the sessions run on it too, before the suite.  Needs Go >= 1.26 (/usr/local/go on
# this kind of machine); without it (the fresh chroot, which runs no sandbox)
# everything runs on Debian's runsc, said below.
own_runsc=0
[[ -x /usr/local/go/bin/go && ${EAI_DEBIAN_RUNSC:-0} != 1 ]] && own_runsc=1

# The real Kubernetes cluster's tests (labels k8s-real and helm-real, tests/cluster,
# docs/kubernetes.md "Real cluster", docs/helm.md "Real cluster") are part of the suite: the first run
# builds Kubernetes, etcd and containerd from their Go modules (~6 min on a cold machine), Helm and
# CoreDNS (~1.5 min together), cached by version in /var/cache/eai-cluster.
# On a full run, those builds, runsc's, the bundled PostgreSQL's image and the
# test collector's start now in the background (scripts/prebuild.sh, nice 19,
# log build/prebuild.log): on a warm machine they find their caches at once;
# on a fresh one they overlap the stages below instead of holding the serial
# tests that need them (README "A cold machine").
prebuild_pid=
if (($# == 0)) && [[ -x /usr/local/go/bin/go && ${EAI_PREBUILD:-1} == 1 ]]; then
    mapfile -t cluster_pkgs < <(tests/cluster/cluster.sh packages)
    apt_install "${cluster_pkgs[@]}" # now: nothing in the background may run apt-get
    steps=(cluster helm coredns pg-image otelcol)
    ((own_runsc)) && steps=(runsc "${steps[@]}")
    mkdir -p build
    echo "== prebuild in the background: ${steps[*]} (build/prebuild.log)"
    setsid scripts/prebuild.sh "${steps[@]}" >build/prebuild.log 2>&1 </dev/null &
    prebuild_pid=$!
fi
stop_prebuild() {
    if [[ -n $prebuild_pid ]]; then
        kill -TERM -- "-$prebuild_pid" 2>/dev/null && { wait "$prebuild_pid" 2>/dev/null || true; }
        grep -h '^prebuild:' "$EAI_ROOT/build/prebuild.log" 2>/dev/null || true
        prebuild_pid=
    fi
}
trap stop_prebuild EXIT

build_all -DEAI_TEST_K8S_REAL=ON

# The official MCP Python SDK (tests/mcp, label mcp) from PyPI into a venv
# cached by its pinned version (/var/cache/eai-mcp, ~20 s once).
echo "== MCP Python SDK: $(tests/mcp/setup.sh)"
for d in tests/k8s tests/helm tests/mcp sdk/typescript; do
    if [[ -f $d/package-lock.json ]]; then
        echo "== npm ci in $d"
        (cd "$d" && npm ci --no-audit --no-fund --loglevel=error)
    fi
done

pgdir=$(mktemp -d /tmp/eai-ci-pg.XXXXXX)
chmod 0755 "$pgdir"
cleanup() {
    tests/support/pg_cluster.sh stop "$pgdir" >/dev/null 2>&1 || true
    rm -rf "$pgdir"
    stop_prebuild
}
trap cleanup EXIT
echo "== PostgreSQL 15 test cluster in $pgdir"
eval "$(tests/support/pg_cluster.sh start "$pgdir")"
export EAI_TEST_PG_OWNER_URL EAI_TEST_PG_APP_URL EAI_TEST_PG_SUPER_URL

# First the sanitizer build (address + undefined, leaks fatal) over the
# tests that need no sandbox runtime: parsers, validation, storage (SQLite and
# PostgreSQL), loader, HTTP.  Skipped when ctest arguments narrow the run.
if (($# == 0)) && [[ ${EAI_SKIP_SANITIZE:-0} != 1 ]]; then
    echo "== sanitizer build ($EAI_ROOT/build-asan)"
    cmake -S "$EAI_ROOT" -B "$EAI_ROOT/build-asan" -DEAI_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
    cmake --build "$EAI_ROOT/build-asan" -j"$(nproc)" >/dev/null
    echo "== ctest (sanitizers)"
    (cd "$EAI_ROOT/build-asan" && ctest --output-on-failure -j2 --timeout 600 -L 'unit|http|storage|loader|contracts')
fi

# Then the fuzz targets (tests/fuzz, docs/fuzzing.md): a clang build with
# libFuzzer + ASan/UBSan in build-fuzz, each target for EAI_FUZZ_SECONDS
# (default 15) from its seed corpus, two at a time; a crash, leak or broken
# invariant fails the script.  Skipped when ctest arguments narrow the run
# or EAI_SKIP_FUZZ=1.
if (($# == 0)) && [[ ${EAI_SKIP_FUZZ:-0} != 1 ]]; then
    # clang's libFuzzer and sanitizer runtimes are only Recommends of clang
    apt_install clang libclang-rt-14-dev || true
    fuzz_probe=$(mktemp -d /tmp/eai-fuzz-probe.XXXXXX)
    echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return d && n ? 0 : 0; }' \
        >"$fuzz_probe/p.c"
    if command -v clang >/dev/null 2>&1 &&
        clang -fsanitize=fuzzer,address,undefined "$fuzz_probe/p.c" -o "$fuzz_probe/p" >/dev/null 2>&1; then
        echo "== fuzz build ($EAI_ROOT/build-fuzz)"
        CC=clang cmake -S "$EAI_ROOT" -B "$EAI_ROOT/build-fuzz" -DEAI_FUZZ=ON >/dev/null
        cmake --build "$EAI_ROOT/build-fuzz" -j"$(nproc)" --target eai_fuzz_all >/dev/null
        echo "== fuzz (${EAI_FUZZ_SECONDS:-15} s per target)"
        "$EAI_ROOT/tests/fuzz/run.sh" "$EAI_ROOT/build-fuzz" "${EAI_FUZZ_SECONDS:-15}"
    else
        echo "== fuzz skipped: no clang with libFuzzer"
    fi
    rm -rf "$fuzz_probe"
fi

# The sanitizer and fuzz stages run no sandbox (their HTTP tests point eaid at
# a missing runsc on purpose); what follows does: runsc now, waiting for the
# background build if it is still under way.
deb_path=$PATH # the PATH without the built runsc
if ((own_runsc)); then
    "$EAI_ROOT/tools/runtime/build.sh"
    runsc_dir=$("$EAI_ROOT/tools/runtime/build.sh" --print-dir)
    export EAI_SANDBOX_RUNSC=$runsc_dir/runsc PATH=$runsc_dir:$PATH
else
    echo "== runsc from source skipped (no /usr/local/go, or EAI_DEBIAN_RUNSC=1): Debian's runsc"
fi
echo "== runsc: $(${EAI_SANDBOX_RUNSC:-runsc} --version | head -1)"

# Debian 12's runsc (0.0~20221219, ptrace only) is still supported: the gVisor
# sandbox suite and the sessions (whose pause/resume, background processes
# included, must work on both runsc: docs/sessions.md) on it first (the whole
# suite's summary stays the last line), when the suite runs on another.
if (($# == 0)) && [[ ${EAI_SANDBOX_RUNSC:-} && ${EAI_SANDBOX_RUNSC} != /usr/bin/runsc ]]; then
    echo "== ctest on Debian's runsc: $(/usr/bin/runsc --version | head -1)"
    (cd "$EAI_ROOT/build" && PATH=$deb_path EAI_SANDBOX_RUNSC=/usr/bin/runsc \
        ctest --output-on-failure --timeout 1800 -R '^(test_runtime_gvisor_sandbox|test_sessions)$')
fi

echo "== ctest"
cd build
ctest --output-on-failure -j2 --timeout 1800 "$@"
