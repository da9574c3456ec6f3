#!/usr/bin/env bash
# One command from a fresh Debian 12 machine (as root) to a real sandboxed
# execution: installs what is missing, builds, builds the python:3.11-slim
# image if absent, starts `eaid serve` on its defaults (127.0.0.1:8080,
# data dir ./var) unless one already answers there, creates a tenant and
# an API key, and runs `python3 -c 'print(2+2)'` in gVisor through the
# `eai` CLI.  The server keeps running afterwards; its pid and log are
# printed at the end.
source "$(dirname "$0")/lib.sh"
need_root
cd "$EAI_ROOT"
apt_install "${EAI_BUILD_PACKAGES[@]}" "${EAI_RUN_PACKAGES[@]}"
build_all

export EAI_DATA_DIR=${EAI_DATA_DIR:-$EAI_ROOT/var}
url=http://127.0.0.1:8080
mkdir -p "$EAI_DATA_DIR" && chmod 700 "$EAI_DATA_DIR"   # eaid refuses a data dir others can read

if ! build/eaid images list 2>/dev/null | grep -q 'python:3.11-slim'; then
    echo "== image python:3.11-slim (mmdebstrap from Debian bookworm, ~30 s)"
    build/eaid images build python:3.11-slim --packages python3-minimal,libpython3.11-stdlib
fi

if curl -fsS "$url/healthz" >/dev/null 2>&1; then
    echo "== eaid already answers on $url: using it"
    pid=$(cat "$EAI_DATA_DIR/eaid.pid" 2>/dev/null || true)
else
    echo "== eaid serve (log: $EAI_DATA_DIR/eaid.log)"
    nohup build/eaid serve >>"$EAI_DATA_DIR/eaid.log" 2>&1 &
    pid=$!
    echo "$pid" >"$EAI_DATA_DIR/eaid.pid"
    for _ in $(seq 1 100); do
        curl -fsS "$url/healthz" >/dev/null 2>&1 && break
        sleep 0.1
    done
fi
for _ in $(seq 1 100); do
    curl -fsS "$url/readyz" >/dev/null 2>&1 && break
    sleep 0.2
done
echo "== readiness"
curl -sS "$url/readyz" | jq -c .

tenant=$(build/eaid tenants create demo | jq -r .id)
key=$(build/eaid keys create --tenant "$tenant" --name demo 2>/dev/null)
echo "== tenant $tenant, key created"

echo "== eai exec --profile gvisor-small --image python:3.11-slim -- python3 -c 'print(2+2)'"
EAI_URL=$url EAI_API_KEY=$key build/eai exec --profile gvisor-small --image python:3.11-slim \
    -- python3 -c 'print(2+2)'

echo "== the same through curl"
id=$(curl -sS -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
    -d '{"profile":"gvisor-small","image":"python:3.11-slim","command":["python3","-c","import sys; print(sys.version.split()[0])"]}' \
    "$url/v1/sandbox/executions" | jq -r .id)
curl -sS -H "Authorization: Bearer $key" "$url/v1/sandbox/executions/$id?wait_s=30" |
    jq '{id, status, exit_code, stdout, backend, usage}'

cat <<MSG
== done.  eaid runs on $url (pid ${pid:-?}, data dir $EAI_DATA_DIR).
   export EAI_URL=$url EAI_API_KEY=$key
   build/eai exec --profile gvisor-small --image python:3.11-slim -- python3 -c 'print(6*7)'
   stop it with: kill ${pid:-<pid>}
MSG
