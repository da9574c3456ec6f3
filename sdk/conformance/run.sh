#!/usr/bin/env bash
# SDK conformance: start a real `eaid serve` on a free loopback port with a
# temporary data dir, make two tenants and keys, and run every SDK's runner
# over sdk/conformance/scenarios.json (format: sdk/conformance/README.md).
#
#   sdk/conformance/run.sh [python] [typescript] [java] [go]   (default: all)
#
# Needs root (gVisor).  Environment: EAI_BUILD_DIR (default <src>/build),
# EAI_IMAGE_DIR (default <build>/images), EAI_CONFORMANCE_ONLY (scenario names).
# A runner whose toolchain is missing is skipped with one "SKIP" line; any
# failing runner makes the script exit 1.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
BUILD=${EAI_BUILD_DIR:-$SRC/build}
EAID=$BUILD/eaid
IMAGES=${EAI_IMAGE_DIR:-$BUILD/images}
IMAGE=python:3.11-slim

langs=("$@")
((${#langs[@]})) || langs=(python typescript java go)

if [[ $(id -u) -ne 0 ]]; then
    echo "run.sh: needs root (eaid runs sandboxes in gVisor)" >&2
    exit 1
fi

if [[ ! -x $EAID ]]; then
    echo "== building eaid in $BUILD"
    cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null &&
        cmake --build "$BUILD" -j2 --target eaid >/dev/null || { echo "run.sh: build failed" >&2; exit 1; }
    # the plugins eaid loads (gVisor backend, storage, ...) are separate targets
    cmake --build "$BUILD" -j2 >/dev/null || { echo "run.sh: build failed" >&2; exit 1; }
fi

if [[ ! -d $IMAGES/python/3.11-slim/rootfs ]]; then
    echo "== building image $IMAGE into $IMAGES (once)"
    mkdir -p "$IMAGES"
    EAI_IMAGE_DIR=$IMAGES "$EAID" images build "$IMAGE" --packages python3-minimal,libpython3.11-stdlib ||
        { echo "run.sh: image build failed" >&2; exit 1; }
fi

tmp=$(mktemp -d /tmp/eai-sdk-conf.XXXXXX)
chmod 0755 "$tmp"
mkdir -m 0700 "$tmp/data"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
eaid_pid=
proxy_pid=

# the server's environment: no outside FinOps/audit/OTLP/PostgreSQL, our data dir and port
envargs=(-u EAI_FINOPS_URL -u EAI_AUDIT_URL -u OTEL_EXPORTER_OTLP_ENDPOINT -u EAI_DATABASE_URL
         -u EAI_PLUGIN_DIR -u EAI_SANDBOX_RUNSC -u EAI_AUTH_PEPPER_FILE -u EAI_LOG_LEVEL
         EAI_DATA_DIR="$tmp/data" EAI_LISTEN="127.0.0.1:$port" EAI_IMAGE_DIR="$IMAGES")
eaid_env() { env "${envargs[@]}" "$@"; }

failed=0
cleanup() {
    if [[ -n $proxy_pid ]]; then kill -TERM "$proxy_pid" 2>/dev/null; wait "$proxy_pid" 2>/dev/null; fi
    if [[ -n $eaid_pid ]] && kill -0 "$eaid_pid" 2>/dev/null; then
        kill -TERM "$eaid_pid" 2>/dev/null
        for _ in $(seq 1 300); do kill -0 "$eaid_pid" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$eaid_pid" 2>/dev/null; then
            echo "run.sh: eaid did not stop within 30 s of SIGTERM, killing it" >&2
            kill -KILL "$eaid_pid" 2>/dev/null
        fi
        wait "$eaid_pid" 2>/dev/null
    fi
    if ((failed)) && [[ -f $tmp/eaid.log ]]; then
        echo "--- eaid log tail"
        tail -n 40 "$tmp/eaid.log"
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== eaid serve on 127.0.0.1:$port (data dir $tmp/data)"
# env execs eaid, so $! is eaid's own pid (SIGTERM reaches the server itself)
env "${envargs[@]}" "$EAID" serve </dev/null >"$tmp/eaid.log" 2>&1 &
eaid_pid=$!
ready=0
for _ in $(seq 1 300); do
    if ! kill -0 "$eaid_pid" 2>/dev/null; then break; fi
    if curl -fsS -o /dev/null --max-time 5 "http://127.0.0.1:$port/readyz" 2>/dev/null; then ready=1; break; fi
    sleep 0.2
done
if ((!ready)); then
    echo "run.sh: eaid not ready" >&2
    failed=1
    exit 1
fi

tenant_id() { python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])'; }
ta=$(eaid_env "$EAID" tenants create conf-a | tenant_id) &&
    tb=$(eaid_env "$EAID" tenants create conf-b | tenant_id) &&
    key_a=$(eaid_env "$EAID" keys create --tenant "$ta" --name conf-a 2>/dev/null) &&
    key_b=$(eaid_env "$EAID" keys create --tenant "$tb" --name conf-b 2>/dev/null) ||
    { echo "run.sh: could not create tenants and keys" >&2; failed=1; exit 1; }

export EAI_URL="http://127.0.0.1:$port"
export EAI_API_KEY=$key_a
export EAI_API_KEY_B=$key_b
export EAI_CONFORMANCE_SCENARIOS=$HERE/scenarios.json
export EAI_CONFORMANCE_IMAGE=${EAI_CONFORMANCE_IMAGE:-$IMAGE}
export EAI_CONFORMANCE_PROFILE=${EAI_CONFORMANCE_PROFILE:-gvisor-small}
export EAI_CONFORMANCE_ONLY=${EAI_CONFORMANCE_ONLY:-}

have() { command -v "$1" >/dev/null 2>&1; }
summary=()
skip() { echo "SKIP $1"; summary+=("SKIP $1"); }

run_lang() {
    local lang=$1 rc
    case $lang in
    python)
        if ! have python3; then skip "python: python3 not installed"; return; fi
        echo "== conformance: python"
        python3 "$SRC/sdk/python/tests/conformance.py" && python3 "$SRC/sdk/python/tests/seed_snippet.py"; rc=$?
        ;;
    typescript)
        if ! have node || ! have npm; then skip "typescript: node/npm not installed"; return; fi
        echo "== conformance: typescript"
        (cd "$SRC/sdk/typescript" &&
            { [[ -x node_modules/.bin/tsc ]] || npm ci --no-audit --no-fund --loglevel=error; } &&
            npm run --silent build &&
            node conformance/runner.mjs && node conformance/seed.mjs); rc=$?
        ;;
    java)
        if ! have mvn || ! have java; then skip "java: mvn/java not installed"; return; fi
        if [[ ! -x $SRC/sdk/java/run-conformance.sh ]]; then skip "java: no sdk/java/run-conformance.sh"; return; fi
        echo "== conformance: java"
        "$SRC/sdk/java/run-conformance.sh"; rc=$?
        ;;
    go)
        if ! have go; then skip "go: go not installed"; return; fi
        if [[ ! -x $SRC/sdk/go/run-conformance.sh ]]; then skip "go: no sdk/go/run-conformance.sh"; return; fi
        echo "== conformance: go"
        "$SRC/sdk/go/run-conformance.sh"; rc=$?
        ;;
    *)
        echo "run.sh: unknown runner '$lang' (python typescript java go)" >&2
        rc=2
        ;;
    esac
    if ((rc == 0)); then summary+=("OK   $lang"); else summary+=("FAIL $lang (exit $rc)"); failed=1; fi
}

for l in "${langs[@]}"; do
    run_lang "$l"
done

# Second pass through the fault-injecting proxy (fault_proxy.py): every request
# meets one fault the first time (a create's answer lost after eaid stored it,
# 503 with Retry-After: 0, 429), so every scenario also checks the retries and
# the idempotency of create.  EAI_CONFORMANCE_FAULTS=0 skips it.
if [[ ${EAI_CONFORMANCE_FAULTS:-1} != 0 ]]; then
    python3 "$HERE/fault_proxy.py" "$port" "$tmp/proxy.port" "$tmp/proxy.stats" 2>"$tmp/proxy.log" &
    proxy_pid=$!
    for _ in $(seq 1 100); do [[ -s $tmp/proxy.port ]] && break; sleep 0.1; done
    if [[ ! -s $tmp/proxy.port ]]; then
        echo "run.sh: fault proxy did not start" >&2
        failed=1
        exit 1
    fi
    export EAI_URL="http://127.0.0.1:$(cat "$tmp/proxy.port")"
    echo "== second pass through the fault proxy at $EAI_URL"
    for l in "${langs[@]}"; do
        n=${#summary[@]}
        run_lang "$l"
        summary[n]="${summary[n]} (through the fault proxy)"
    done
    kill -TERM "$proxy_pid" 2>/dev/null
    wait "$proxy_pid" 2>/dev/null
    proxy_pid=
    echo "fault proxy: $(cat "$tmp/proxy.stats" 2>/dev/null || echo '(no stats)')"
    if ! grep -q '"faults": [1-9]' "$tmp/proxy.stats" 2>/dev/null; then
        echo "run.sh: the fault proxy injected no fault" >&2
        failed=1
    fi
fi

echo "--- conformance summary"
for s in "${summary[@]}"; do echo "$s"; done
exit $failed
