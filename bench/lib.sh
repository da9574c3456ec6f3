# Shared by bench/gvisor.sh and bench/perf.sh (sourced, not run): a real
# `eaid serve` on a free loopback port with a tenant and a key, and the
# clean-up of the raw `runsc` containers they compare it with.  The Python
# side of the same set-up (the raw OCI bundle, percentiles, connections) is
# bench/benchlib.py; run the heredocs with PYTHONPATH="$BENCH_DIR".
# Needs BUILD, IMAGES, EAID, RUNSC (may be empty) and work set by the caller.

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
pids=()

free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }

# start_eaid NAME [POOL [YAML]] -> sets port_NAME, key_NAME, pid_NAME; data
# dir $work/NAME, log $work/NAME.log; with POOL a config $work/NAME.yaml
# setting the gvisor warm pool (and holding the lines YAML, other top-level
# sections), without it eaid's defaults.
start_eaid() {
  local name=$1 pool=${2:-} extra=${3:-} port
  port=$(free_port)
  mkdir -p "$work/$name" && chmod 700 "$work/$name"   # eaid refuses a data dir others can read
  local cfg=()
  if [ -n "$pool" ]; then
    printf 'isolation:\n  gvisor:\n    pool: %s\n%s' "$pool" "$extra" >"$work/$name.yaml"
    cfg=(--config "$work/$name.yaml")
  fi
  local env=(EAI_DATA_DIR="$work/$name" EAI_IMAGE_DIR="$IMAGES" EAI_PLUGIN_DIR="$BUILD/plugins"
             EAI_SANDBOX_RUNSC="${RUNSC:-runsc}" EAI_LISTEN="127.0.0.1:$port")
  env "${env[@]}" "$EAID" "${cfg[@]}" migrate >/dev/null 2>&1 || true
  local tenant key
  tenant=$(env "${env[@]}" "$EAID" "${cfg[@]}" tenants create bench |
           python3 -c 'import json,sys;print(json.load(sys.stdin)["id"])')
  key=$(env "${env[@]}" "$EAID" "${cfg[@]}" keys create --tenant "$tenant" --name bench |
        tail -n1 | grep -o 'eai_[A-Za-z0-9_]*' | head -n1)
  env "${env[@]}" "$EAID" serve "${cfg[@]}" >"$work/$name.log" 2>&1 &
  pids+=($!)
  eval "port_$name=$port key_$name=$key pid_$name=$!"
}

# Stop what start_eaid (or the caller, through pids) started and delete the
# raw containers left in $work/raw-state.
bench_stop() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  if [ -n "$RUNSC" ] && [ -d "$work/raw-state" ]; then
    "$RUNSC" --root="$work/raw-state" list -quiet 2>/dev/null | while read -r id; do
      "$RUNSC" --root="$work/raw-state" delete --force "$id" >/dev/null 2>&1 || true
    done
  fi
  # the empty netns a runsc of 2026 bind-mounts into its root (docs/gvisor.md)
  local i
  for i in 1 2 3 4; do umount -l "$work/raw-state/null-netns" 2>/dev/null || break; done
}
