#!/usr/bin/env bash
# The real cluster's smoke test (ctest k8s-real; docs/kubernetes.md, "Real cluster"):
#   1. build (or find cached) every binary: exit 77 (skipped) when that is impossible here;
#   2. up; a pod with runtimeClassName gvisor, from the local registry, must print
#      gVisor's kernel messages (dmesg) and gVisor's kernel version (uname); a
#      pod of the same image under runc (no class) shows the host's kernel; a pod
#      shaped like plugins/k8s's (restricted, non-root, read-only root,
#      Guaranteed) runs under gVisor too;
#      a pod naming RuntimeClass kata is refused; eaid's kubeconfig may do what
#      plugins/k8s needs and nothing on kube-system pods or secrets;
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

# What the cluster made on the host while it runs, checked again after down.
veths=$(ip -o link show master "$BRIDGE" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | tr '\n' ' ')
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
[[ -z $n ]] && pass "no cni-* netns left" || fail "netns left: $n"
for p in "${absent[@]}"; do
    [[ -e $p ]] && fail "$p did not exist before up and does now: $(ls -A "$p" | head -5 | tr '\n' ' ')"
done
left=$(ps -eo pid=,args= | grep -E "$STATE|$RUN" | grep -v grep || true)
[[ -z $left ]] && pass "no process left" || fail "processes left: $left"
[[ ! -d $RUN ]] && pass "$RUN removed" || fail "$RUN left"

echo "k8s-real: $passes passed, $failures failed"
((failures == 0))
