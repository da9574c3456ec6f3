#!/usr/bin/env bash
# The real cluster's smoke test (ctest k8s-real; docs/kubernetes.md, "Real cluster"):
#   1. build (or find cached) every binary: exit 77 (skipped) when that is impossible here;
#   2. up; a pod with runtimeClassName gvisor, from the local registry, must print
#      gVisor's kernel messages (dmesg) and gVisor's kernel version (uname); a
#      pod of the same image under runc (no class) shows the host's kernel; a pod
#      shaped like plugins/k8s's (restricted, non-root, read-only root,
#      Guaranteed) runs under gVisor too;
#      a pod naming RuntimeClass kata is refused; eaid's kubeconfig may do what
#      plugins/k8s needs and nothing on kube-system pods or secrets; eaid (when
#      the build's eaid and k8s plugin are there) runs one execution through
#      the k8s backend on the cluster, under gVisor;
#   3. down (twice); nothing it made is left: process, mount, interface, netns,
#      cgroup; the sysctls are back.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CLUSTER=$HERE/cluster.sh
STATE=${EAI_CLUSTER_DIR:-/var/lib/eai-cluster}
RUN=${EAI_CLUSTER_RUN:-/run/eai-cluster}
BRIDGE=eaicni0

failures=0
passes=0
pass() { echo "PASS $*"; passes=$((passes + 1)); }
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

if [[ $(id -u) -ne 0 ]]; then
    echo "SKIP: the real cluster needs root"
    exit 77
fi
if ! "$CLUSTER" build; then
    echo "SKIP: the cluster's binaries cannot be built on this machine (see above)"
    exit 77
fi

# The host's sysctls before, compared after `down`.  Other work on this host
# makes and removes its own mounts, interfaces and cgroups meanwhile, so those
# are checked by name: what the cluster made.
SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
         kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward)
sysctls_before=$(sysctl "${SYSCTLS[@]}")
# Host paths the kubelet, libcni and containerd's shims write whatever the
# configuration says (cluster.sh HOST_PATHS), and /run/netns.
HOST_PATHS=(/var/lib/kubelet /var/lib/cni /var/log/containers /run/netns)
absent=()
for p in "${HOST_PATHS[@]}"; do [[ -e $p ]] || absent+=("$p"); done
trap '"$CLUSTER" down || true' EXIT

t0=$SECONDS
if ! "$CLUSTER" up; then
    fail "cluster up"
    exit 1
fi
pass "cluster up ($((SECONDS - t0)) s)"
eval "$("$CLUSTER" env)"
kubectl=$EAI_CLUSTER_KUBECTL

# /version is the version built.
v=$("$kubectl" version -o json | sed -n 's/.*"gitVersion": "\(v[^"]*\)".*/\1/p' | tail -n1)
[[ $v == v1.36.* ]] && pass "API server /version: $v" || fail "API server /version: '$v'"

# A pod under gVisor.
"$kubectl" apply -f - <<EOF
apiVersion: v1
kind: Pod
metadata: {name: smoke-gvisor, namespace: default}
spec:
  runtimeClassName: gvisor
  restartPolicy: Never
  automountServiceAccountToken: false
  containers:
  - name: smoke
    image: $EAI_CLUSTER_BUSYBOX_IMAGE
    imagePullPolicy: Always
    command: [/bin/sh, -c, 'echo hello from the pod; uname -a; dmesg']
EOF
if "$kubectl" wait pod/smoke-gvisor --for=jsonpath='{.status.phase}'=Succeeded --timeout=180s; then
    log=$("$kubectl" logs smoke-gvisor)
    echo "--- pod output:"
    echo "$log"
    echo "---"
    grep -q 'hello from the pod' <<<"$log" && pass "gvisor pod ran" || fail "gvisor pod output"
    grep -q 'Starting gVisor' <<<"$log" && pass "dmesg shows gVisor's kernel" || fail "no gVisor banner in dmesg"
    host_kernel=$(uname -r)
    grep -Eq '^Linux smoke-gvisor [0-9.]+-gvisor ' <<<"$log" && ! grep -q "$host_kernel" <<<"$log" &&
        pass "uname: gVisor's kernel, not the host's $host_kernel" || fail "uname is not gVisor's"
else
    fail "gvisor pod did not succeed"
    "$kubectl" describe pod smoke-gvisor || true
    tail -n 30 "$STATE/logs/containerd.log" "$STATE/logs/kubelet.log" || true
fi

# The same image under runc (pods without a class): the host's kernel, which
# is what the gVisor pod above must not show.
"$kubectl" run smoke-runc --image="$EAI_CLUSTER_BUSYBOX_IMAGE" --restart=Never -- uname -r
if "$kubectl" wait pod/smoke-runc --for=jsonpath='{.status.phase}'=Succeeded --timeout=120s; then
    out=$("$kubectl" logs smoke-runc)
    [[ $out == "$(uname -r)" ]] && pass "runc pod (no class) sees the host's kernel: $out" ||
        fail "runc pod: '$out'"
else
    fail "runc pod did not succeed"
fi

# A pod as plugins/k8s makes them (restricted Pod Security, non-root,
# read-only root, Guaranteed QoS: the kubelet asks for oom_score_adj -997).
"$kubectl" create namespace smoke-restricted
"$kubectl" label namespace smoke-restricted pod-security.kubernetes.io/enforce=restricted
"$kubectl" apply -f - <<EOF
apiVersion: v1
kind: Pod
metadata: {name: smoke-restricted, namespace: smoke-restricted}
spec:
  runtimeClassName: gvisor
  restartPolicy: Never
  automountServiceAccountToken: false
  enableServiceLinks: false
  securityContext: {runAsNonRoot: true, runAsUser: 65534, runAsGroup: 65534, fsGroup: 65534,
                    seccompProfile: {type: RuntimeDefault}}
  volumes: [{name: tmp, emptyDir: {sizeLimit: 16Mi}}]
  containers:
  - name: sandbox
    image: $EAI_CLUSTER_BUSYBOX_IMAGE
    imagePullPolicy: Always
    command: [/bin/sh, -c, 'id -u; echo ok > /tmp/f && cat /tmp/f; grep " / " /proc/mounts']
    workingDir: /tmp
    volumeMounts: [{name: tmp, mountPath: /tmp}]
    resources:
      limits: {cpu: 500m, memory: 128Mi}
      requests: {cpu: 500m, memory: 128Mi}
    securityContext: {runAsNonRoot: true, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false,
                      privileged: false, capabilities: {drop: [ALL]}, seccompProfile: {type: RuntimeDefault}}
EOF
if "$kubectl" -n smoke-restricted wait pod/smoke-restricted --for=jsonpath='{.status.phase}'=Succeeded --timeout=180s; then
    log=$("$kubectl" -n smoke-restricted logs smoke-restricted)
    echo "--- pod output:"
    echo "$log"
    echo "---"
    grep -qx 65534 <<<"$log" && grep -qx ok <<<"$log" && grep -Eq '^[^ ]+ / [^ ]+ ro[, ]' <<<"$log" &&
        pass "restricted Guaranteed pod under gVisor: uid 65534, /tmp writable, / read-only" ||
        fail "restricted pod output"
    qos=$("$kubectl" -n smoke-restricted get pod smoke-restricted -o jsonpath='{.status.qosClass}')
    [[ $qos == Guaranteed ]] && pass "QoS Guaranteed" || fail "QoS $qos"
else
    fail "restricted pod did not succeed"
    "$kubectl" -n smoke-restricted describe pod smoke-restricted || true
fi

# A pod still running when `down` comes: its sandbox, veth, netns and libcni
# cache entry must go too.
"$kubectl" run smoke-running --image="$EAI_CLUSTER_BUSYBOX_IMAGE" --restart=Never \
    --overrides='{"spec":{"runtimeClassName":"gvisor"}}' -- sleep 600
"$kubectl" wait pod/smoke-running --for=condition=Ready --timeout=120s && pass "a long-running gvisor pod is Ready" ||
    fail "pod smoke-running not Ready"
out=$("$kubectl" exec smoke-running -- uname -r 2>&1) || true
[[ $out == *-gvisor ]] && pass "kubectl exec into it: $out" || fail "kubectl exec: $out"

# Every socket the daemons listen on is bound to 127.0.0.1, and none of them
# talks to another address.
pids=$(cat "$RUN"/*.pid | paste -sd'|')
bad=$(ss -Htulnp | grep -E "pid=($pids)," | awk '{print $5}' | grep -v '^127\.0\.0\.1:' || true)
[[ -z $bad ]] && pass "every listener on 127.0.0.1" || fail "listeners elsewhere: $bad"
bad=$(ss -Htunp | grep -E "pid=($pids)," | awk '{print $5}' | grep -v '^127\.0\.0\.1:' || true)
[[ -z $bad ]] && pass "no connection to another address" || fail "connections elsewhere: $bad"

# What the cluster made on the host while it runs, checked again after down.
veths=$(ip -o link show master "$BRIDGE" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | tr '\n' ' ')
[[ -n $veths ]] && pass "the running pod's veth: $veths" || fail "no veth on $BRIDGE"
netns=$(ls "$RUN/containerd/io.containerd.grpc.v1.cri/netns" 2>/dev/null | tr '\n' ' ')
ip link show "$BRIDGE" >/dev/null 2>&1 && pass "bridge $BRIDGE exists (veths: ${veths:-none})" ||
    fail "no bridge $BRIDGE"

# RuntimeClass kata is not configured: the API server refuses the pod.
out=$("$kubectl" run smoke-kata --image="$EAI_CLUSTER_BUSYBOX_IMAGE" --restart=Never \
      --overrides='{"spec":{"runtimeClassName":"kata"}}' -- true 2>&1) && rc=0 || rc=$?
if [[ $rc -ne 0 ]] && grep -q 'RuntimeClass "kata" not found' <<<"$out"; then
    pass "runtimeClassName kata refused: $out"
else
    fail "runtimeClassName kata: rc=$rc $out"
fi

# eaid's credentials: what plugins/k8s/api-calls.json lists, no more.
eaid() { "$kubectl" --kubeconfig "$EAI_CLUSTER_EAID_KUBECONFIG" "$@" 2>/dev/null || true; }
[[ $(eaid auth can-i create namespaces) == yes ]] && pass "eaid may create namespaces" || fail "eaid create namespaces"
[[ $(eaid auth can-i get runtimeclasses.node.k8s.io) == yes ]] && pass "eaid may get runtimeclasses" ||
    fail "eaid get runtimeclasses"
[[ $(eaid auth can-i create pods -n kube-system) == no ]] && pass "eaid may not create pods in kube-system" ||
    fail "eaid create pods in kube-system"
[[ $(eaid auth can-i list secrets -A) == no ]] && pass "eaid may not list secrets" || fail "eaid list secrets"

# eaid itself, with the k8s backend and the kubeconfig `env` gives it: one
# execution end to end (tenant namespace, RoleBinding, policy, Secret, pod,
# log, cleanup).  Needs the build's eaid and plugin (ctest passes their dirs).
eaid_bin=${EAI_BUILD_DIR:-}/eaid
if [[ -x $eaid_bin && -f ${EAI_PLUGIN_DIR:-}/eai-isolation-k8s.so ]]; then
    d=$(mktemp -d /tmp/eai-k8s-real.XXXXXX)
    chmod 700 "$d"
    mkdir -m 700 "$d/data"
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    cat >"$d/eaid.yaml" <<EOF
server: {listen: "127.0.0.1:$port"}
data_dir: $d/data
isolation:
  k8s:
    kubeconfig: $EAI_CLUSTER_EAID_KUBECONFIG
    runtime_class: $EAI_CLUSTER_RUNTIME_CLASS
    tenant_role: $EAI_CLUSTER_TENANT_ROLE
    service_account: $EAI_CLUSTER_SERVICE_ACCOUNT
    images: {registries: ["$EAI_CLUSTER_REGISTRY"]}
profiles:
  k8s-gvisor:
    backend: k8s
    runtime_class: gvisor
    defaults: {cpu: 500m, memory: 256Mi, timeout_s: 30}
    max: {cpu: "1", memory: 512Mi, timeout_s: 60}
EOF
    tenant=$("$eaid_bin" tenants create k8s-real --config "$d/eaid.yaml" | sed -n 's/.*"id": *"\([^"]*\)".*/\1/p')
    key=$("$eaid_bin" keys create --tenant "$tenant" --config "$d/eaid.yaml" 2>/dev/null)
    setsid "$eaid_bin" serve --config "$d/eaid.yaml" >"$d/eaid.log" 2>&1 </dev/null &
    eaid_pid=$!
    trap 'kill "$eaid_pid" 2>/dev/null || true; "$CLUSTER" down || true' EXIT
    ready=
    for _ in $(seq 100); do
        ready=$(curl -fsS "http://127.0.0.1:$port/readyz" 2>/dev/null || true)
        [[ $ready == *'"k8s":{"ready":true'* ]] && break
        sleep 0.2
    done
    [[ $ready == *'"k8s":{"ready":true'* ]] && pass "eaid ready with the k8s backend: $ready" ||
        fail "eaid not ready: $ready $(tail -n 5 "$d/eaid.log")"
    api() { curl -sS -H "Authorization: Bearer $key" -H 'Content-Type: application/json' "$@"; }
    id=$(api -X POST "http://127.0.0.1:$port/v1/sandbox/executions" -d "{\"profile\": \"k8s-gvisor\",
          \"image\": \"$EAI_CLUSTER_BUSYBOX_IMAGE\", \"stdin\": \"line one\\n\",
          \"command\": [\"/bin/sh\", \"-c\", \"read l; echo got \$l; uname -r; dmesg | head -n 1\"]}" |
         sed -n 's/.*"id": *"\([^"]*\)".*/\1/p')
    body=
    for _ in $(seq 120); do
        body=$(api "http://127.0.0.1:$port/v1/sandbox/executions/$id")
        [[ $body == *'"status":"queued"'* || $body == *'"status":"running"'* ]] || break
        sleep 0.5
    done
    echo "--- eaid execution: $body"
    [[ $body == *'"status":"succeeded"'* && $body == *'got line one'* && $body == *'-gvisor'* &&
       $body == *'Starting gVisor'* ]] && pass "eaid execution $id succeeded under gVisor in the cluster" ||
        fail "eaid execution: $body"
    left=$("$kubectl" get pods -n "eai-$tenant" -o name 2>&1)
    [[ -z $left ]] && pass "eaid deleted its pod" || fail "pods left in eai-$tenant: $left"
    kill "$eaid_pid" 2>/dev/null || true
    wait "$eaid_pid" 2>/dev/null || true
    rm -rf "$d"
else
    echo "(no eaid execution: EAI_BUILD_DIR/eaid or EAI_PLUGIN_DIR/eai-isolation-k8s.so missing)"
fi

# down, twice, and nothing left.
"$CLUSTER" down && pass "cluster down" || fail "cluster down"
"$CLUSTER" down && pass "cluster down again (idempotent)" || fail "second down"
sysctls_after=$(sysctl "${SYSCTLS[@]}")
[[ $sysctls_after == "$sysctls_before" ]] && pass "sysctls restored" ||
    fail "sysctls differ: before: $sysctls_before; after: $sysctls_after"
! ip link show "$BRIDGE" >/dev/null 2>&1 && pass "no bridge $BRIDGE" || fail "bridge $BRIDGE left"
for v in $veths; do
    ip link show "$v" >/dev/null 2>&1 && fail "interface $v left"
done
m=$(awk '{print $5}' /proc/self/mountinfo | grep -E "^($STATE|$RUN)(/|$)" || true)
[[ -z $m ]] && pass "no mount left under $STATE or $RUN" || fail "mounts left: $m"
c=$(find /sys/fs/cgroup -mindepth 1 -maxdepth 2 -type d -name eai-cluster 2>/dev/null || true)
[[ -z $c ]] && pass "no cgroup eai-cluster left" || fail "cgroups left: $c"
n=$(ip netns list 2>/dev/null | grep -E '^cni-' || true)
[[ -z $n ]] && pass "no cni-* netns in /run/netns" || fail "netns left: $n"
for n in $netns; do
    grep -qF "$n" /proc/*/mountinfo 2>/dev/null && fail "netns $n still mounted"
    [[ -e $RUN/containerd/io.containerd.grpc.v1.cri/netns/$n ]] && fail "netns file $n left"
done
[[ -n $netns ]] && pass "the pods' network namespaces gone: $netns"
c=$(grep -lsF "\"netns\":\"$RUN/" /var/lib/cni/results/* 2>/dev/null || true)
[[ -z $c ]] && pass "no libcni cache entry of ours left" || fail "libcni cache entries left: $c"
for p in "${absent[@]}"; do
    [[ -e $p ]] && fail "$p did not exist before up and does now: $(ls -A "$p" | head -5 | tr '\n' ' ')"
done
left=$(ps -eo pid=,args= | grep -E "$STATE|$RUN" | grep -v grep || true)
[[ -z $left ]] && pass "no process left" || fail "processes left: $left"
[[ ! -d $RUN ]] && pass "$RUN removed" || fail "$RUN left"

echo "k8s-real: $passes passed, $failures failed"
((failures == 0))
