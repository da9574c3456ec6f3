#!/usr/bin/env bash
# The real cluster's smoke test (ctest k8s-real; docs/kubernetes.md, "Real cluster"):
#   1. build (or find cached) every binary: exit 77 (skipped) when that is impossible here;
#   2. up; a pod with runtimeClassName gvisor, from the local registry, must print
#      gVisor's kernel messages (dmesg) and gVisor's kernel version (uname), which
#      no runc container on this host would; a pod naming RuntimeClass kata is refused;
#      eaid's kubeconfig may do what plugins/k8s needs and nothing on kube-system pods;
#   3. down; nothing it made is left: process, mount, interface, netns, cgroup, sysctl.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CLUSTER=$HERE/cluster.sh
STATE=${EAI_CLUSTER_DIR:-/var/lib/eai-cluster}
RUN=${EAI_CLUSTER_RUN:-/run/eai-cluster}

failures=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

if [[ $(id -u) -ne 0 ]]; then
    echo "SKIP: the real cluster needs root"
    exit 77
fi
if ! "$CLUSTER" build; then
    echo "SKIP: the cluster's binaries cannot be built on this machine (see above)"
    exit 77
fi

# What the host looks like before: compared after `down`.
snapshot() {
    ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | sort
    echo "--netns"
    ls /run/netns /var/run/netns 2>/dev/null | sort
    echo "--mounts"
    awk '{print $5}' /proc/self/mountinfo | sort
    echo "--cgroups"
    find /sys/fs/cgroup -mindepth 1 -maxdepth 3 -type d -name 'eai-cluster*' 2>/dev/null | sort
    find /sys/fs/cgroup -mindepth 1 -maxdepth 2 -type d -name 'kubepods*' 2>/dev/null | sort
    echo "--sysctls"
    sysctl vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops \
        kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward 2>/dev/null
}
before=$(mktemp)
after=$(mktemp)
snapshot >"$before"

cleanup() {
    "$CLUSTER" down || true
    rm -f "$before" "$after"
}
trap cleanup EXIT

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
    grep -q "Linux smoke-gvisor 4.4.0" <<<"$log" && ! grep -q "$host_kernel" <<<"$log" &&
        pass "uname: gVisor's 4.4.0, not the host's $host_kernel" || fail "uname is not gVisor's"
else
    fail "gvisor pod did not succeed"
    "$kubectl" describe pod smoke-gvisor || true
    tail -n 30 "$STATE/logs/containerd.log" "$STATE/logs/kubelet.log" || true
fi

# RuntimeClass kata is not configured: the API server refuses the pod.
out=$("$kubectl" run smoke-kata --image="$EAI_CLUSTER_BUSYBOX_IMAGE" --restart=Never \
      --overrides='{"spec":{"runtimeClassName":"kata"}}' -- true 2>&1) && rc=0 || rc=$?
if [[ $rc -ne 0 ]] && grep -q 'RuntimeClass "kata" not found' <<<"$out"; then
    pass "runtimeClassName kata refused: $out"
else
    fail "runtimeClassName kata: rc=$rc $out"
fi

# eaid's credentials: what plugins/k8s/api-calls.json lists, no more.
eaid() { "$kubectl" --kubeconfig "$EAI_CLUSTER_EAID_KUBECONFIG" "$@"; }
[[ $(eaid auth can-i create namespaces) == yes ]] && pass "eaid may create namespaces" || fail "eaid create namespaces"
[[ $(eaid auth can-i get runtimeclasses.node.k8s.io) == yes ]] && pass "eaid may get runtimeclasses" || fail "eaid get runtimeclasses"
[[ $(eaid auth can-i create pods -n kube-system 2>/dev/null || true) == no ]] && pass "eaid may not create pods in kube-system" ||
    fail "eaid create pods in kube-system"
[[ $(eaid auth can-i list secrets -A 2>/dev/null || true) == no ]] && pass "eaid may not list secrets" || fail "eaid list secrets"

# down, and nothing left.
"$CLUSTER" down
pass "cluster down"
"$CLUSTER" down && pass "cluster down again (idempotent)" || fail "second down"
snapshot >"$after"
if diff -u "$before" "$after"; then
    pass "no interface, netns, mount, cgroup or sysctl left or changed"
else
    fail "the host differs after down (diff above)"
fi
left=$(ps -eo pid=,args= | grep -E "$STATE|$RUN|containerd-shim-runsc|runsc-sandbox|runsc-gofer" | grep -v grep || true)
[[ -z $left ]] && pass "no process left" || fail "processes left: $left"
[[ ! -d $RUN ]] && pass "$RUN removed" || fail "$RUN left"

if ((failures)); then
    echo "k8s-real: $failures check(s) failed"
    exit 1
fi
echo "k8s-real: all checks passed"
