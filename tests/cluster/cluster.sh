#!/usr/bin/env bash
# A real single-node Kubernetes cluster on this host, for tests and developers
# (docs/kubernetes.md, "Real cluster").  Everything is built from source
# packages, bound to 127.0.0.1, and removed again by `down`.
#
#   tests/cluster/cluster.sh build [COMPONENT...]
#                                     build (or find in the cache) every binary and image;
#                                     `build helm` / `build coredns`: Helm 3 and CoreDNS
#                                     (not built by default; docs/helm.md "Real cluster")
#   tests/cluster/cluster.sh packages the Debian packages building and running it need
#   tests/cluster/cluster.sh up       build, then start etcd, the registry, containerd,
#                                     the control plane and the kubelet; wait until ready
#   tests/cluster/cluster.sh env      export lines: KUBECONFIG, kubectl, registry, eaid's kubeconfig
#   tests/cluster/cluster.sh status   what runs, and what the API server says
#   tests/cluster/cluster.sh push ROOTFS NAME:TAG [CMD...]
#                                     a root filesystem (e.g. an eaid image store's
#                                     <image_dir>/<name>/<tag>/rootfs) as a one-layer
#                                     image in the local registry: $REGISTRY/NAME:TAG
#   tests/cluster/cluster.sh restart-apiserver [SECONDS]
#                                     kill the API server (SIGKILL, as a crash), keep it
#                                     down SECONDS (default 0), start it again with the
#                                     same flags, wait for its /readyz
#   tests/cluster/cluster.sh compact-etcd
#                                     compact etcd's history up to its current revision
#                                     (what --etcd-compaction-interval does every 5 min):
#                                     a watch resumed from an older resourceVersion is 410
#   tests/cluster/cluster.sh down     stop everything; leave no process, mount, interface,
#                                     netns or cgroup; restore the sysctls (idempotent)
#
# Components: etcd v3.6 (go.etcd.io/etcd/server/v3), kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet, kubectl (k8s.io/kubernetes
# v1.36), containerd v2 (+ ctr, containerd-shim-runc-v2), from the wrapper
# modules in tests/cluster/modules/ (their go.sum pins every hash); CNI bridge,
# host-local, loopback and the registry from Debian; gVisor's runsc and
# containerd-shim-runsc-v1 from $EAI_RUNSC_DIR (tools/runtime/build.sh).
# lib/build.sh builds; lib/config.sh writes certificates and configurations.
#
# Environment:
#   EAI_CLUSTER_DIR    state (certificates, etcd, containerd, kubelet, logs)  /var/lib/eai-cluster
#   EAI_CLUSTER_RUN    sockets, pid files, containerd and runsc state          /run/eai-cluster
#   EAI_CLUSTER_CACHE  built binaries and images, by version                  /var/cache/eai-cluster
#   EAI_RUNSC_DIR      runsc + containerd-shim-runsc-v1                       (gVisor cache, below)
#   EAI_GO             the Go toolchain (>= 1.26)                             /usr/local/go/bin/go
#   EAI_CLUSTER_BUILD_JOBS  go build -p                                       2
#   EAI_CLUSTER_UP_TIMEOUT  seconds `up` waits for each readiness condition   180
#   EAI_CLUSTER_SERVICES    1: what a Helm chart needs from a cluster (`up` only;
#                           docs/helm.md "Real cluster"): the bridge gets $GATEWAY
#                           on the host, pods a route to the Service range, the
#                           `kubernetes` Service address reaches the API server
#                           (nftables DNAT), and CoreDNS on $GATEWAY:53 serves
#                           cluster.local; nothing else from a pod reaches the host  0
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
MODULES=$HERE/modules

STATE=${EAI_CLUSTER_DIR:-/var/lib/eai-cluster}
RUN=${EAI_CLUSTER_RUN:-/run/eai-cluster}
CACHE=${EAI_CLUSTER_CACHE:-/var/cache/eai-cluster}
GO=${EAI_GO:-/usr/local/go/bin/go}
JOBS=${EAI_CLUSTER_BUILD_JOBS:-2}
UP_TIMEOUT=${EAI_CLUSTER_UP_TIMEOUT:-180}

# Pinned versions (the wrapper modules' go.mod say the same; `build` checks).
K8S_VERSION=v1.36.3
K8S_DATE=2026-07-22T18:07:38Z          # the module's release time (proxy .info): buildDate
ETCD_VERSION=v3.6.17
CONTAINERD_VERSION=v2.2.10
HELM_VERSION=v3.21.4                   # helm.sh/helm/v3 (modules/helm; `build helm` only)
COREDNS_VERSION=v1.14.7                # github.com/coredns/coredns (modules/coredns; EAI_CLUSTER_SERVICES=1 only)
PAUSE_VERSION=3.10.2                   # build/pause/Makefile TAG of k8s.io/kubernetes v1.36.3
GVISOR_VERSION=v0.0.0-20260905035102-160fafc42237
RUNSC_DIR=${EAI_RUNSC_DIR:-/var/cache/eai-runtime/gvisor/$GVISOR_VERSION/bin}

# Addresses: everything on 127.0.0.1; pod and service ranges from the
# benchmarking block 198.18.0.0/15 (RFC 2544), never routed anywhere.
ADDR=127.0.0.1
NODE=127.0.0.1
API_PORT=16443
ETCD_PORT=12379
ETCD_PEER_PORT=12380
REGISTRY_PORT=15000
KUBELET_PORT=10250
KUBELET_HEALTHZ_PORT=10248
CM_PORT=10257
SCHED_PORT=10259
POD_CIDR=198.18.0.0/24
GATEWAY=198.18.0.1                     # the host on the bridge (EAI_CLUSTER_SERVICES=1 only)
API_SERVICE_IP=198.19.0.1              # the `kubernetes` Service: first address of SERVICE_CIDR
NFT_TABLE=eai-cluster                  # table ip eai-cluster (EAI_CLUSTER_SERVICES=1 only)
SERVICE_CIDR=198.19.0.0/24
BRIDGE=eaicni0
CGROUP=eai-cluster                     # cgroupRoot of the kubelet, in every hierarchy
REGISTRY=$ADDR:$REGISTRY_PORT
PAUSE_IMAGE=$REGISTRY/eai-cluster/pause:$PAUSE_VERSION
BUSYBOX_IMAGE=$REGISTRY/eai-cluster/busybox:1
# What the kubelet writes when protectKernelDefaults is false, plus the
# forwarding switches a CNI plugin may turn on: saved by `up`, restored by `down`.
SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
         kernel.keys.root_maxkeys kernel.keys.root_maxbytes
         net.ipv4.ip_forward net.ipv4.conf.all.forwarding net.ipv6.conf.all.forwarding)

K8S_BIN=$CACHE/kubernetes-$K8S_VERSION/bin
HELM_BIN=$CACHE/helm-$HELM_VERSION/bin
COREDNS_BIN=$CACHE/coredns-$COREDNS_VERSION/bin
ETCD_BIN=$CACHE/etcd-$ETCD_VERSION/bin
CONTAINERD_BIN=$CACHE/containerd-$CONTAINERD_VERSION/bin
IMAGES=$CACHE/images-pause-$PAUSE_VERSION
PKI=$STATE/pki
LOGS=$STATE/logs
UNIFIED=/sys/fs/cgroup/unified         # cgroup v2 (hybrid host) or /sys/fs/cgroup (v2 host): process tracking
[[ $(stat -fc %T /sys/fs/cgroup) == cgroup2fs ]] && UNIFIED=/sys/fs/cgroup
DAEMONS=(registry etcd containerd kube-apiserver kube-controller-manager kube-scheduler kubelet)
# Host paths written whatever the configuration says: the kubelet's device
# plugin socket and container log links are hard-coded, and so is libcni's
# result cache (containerd offers no setting), and containerd's shim library
# puts shim sockets in /run/containerd/s.  `up` records which did not exist;
# `down` removes what the cluster put there, then the empty directories it created.
HOST_PATHS=(/var/lib/kubelet /var/lib/cni /var/log/containers /run/containerd)

say() { echo "cluster: $*" >&2; }
# services_mode: `up` with EAI_CLUSTER_SERVICES=1, or a cluster that was started so.
services_mode() { [[ ${EAI_CLUSTER_SERVICES:-0} == 1 || -f $STATE/services ]]; }
die() { say "error: $*"; exit 1; }

# shellcheck source=lib/build.sh
source "$HERE/lib/build.sh"
# shellcheck source=lib/config.sh
source "$HERE/lib/config.sh"

# ---------------------------------------------------------------------------
# Processes: each daemon runs in the cgroup $UNIFIED/$CGROUP/daemons, so its
# children (shims, runsc sandboxes) are found and killed by `down` too.

pidfile() { echo "$RUN/$1.pid"; }
alive() { local p; p=$(cat "$(pidfile "$1")" 2>/dev/null) && [[ -n $p ]] && kill -0 "$p" 2>/dev/null; }

start() { # start NAME CMD...
    local name=$1
    shift
    mkdir -p "$UNIFIED/$CGROUP/daemons"
    (
        echo "$BASHPID" >"$UNIFIED/$CGROUP/daemons/cgroup.procs"
        exec setsid "$@" >>"$LOGS/$name.log" 2>&1 </dev/null
    ) &
    echo $! >"$(pidfile "$name")"
}

fail_with_log() { # fail_with_log NAME MESSAGE
    say "$2; last lines of $LOGS/$1.log:"
    tail -n 40 "$LOGS/$1.log" >&2 2>/dev/null || true
    exit 1
}

wait_for() { # wait_for NAME WHAT CMD...: until CMD succeeds, or the timeout, or NAME died
    local name=$1 desc=$2 end=$((SECONDS + UP_TIMEOUT))
    shift 2
    until "$@" >/dev/null 2>&1; do
        alive "$name" || fail_with_log "$name" "$name exited while waiting for $desc"
        ((SECONDS < end)) || fail_with_log "$name" "timed out after ${UP_TIMEOUT}s waiting for $desc"
        sleep 0.5
    done
}

kc() { "$K8S_BIN/kubectl" --kubeconfig "$STATE/admin.kubeconfig" --request-timeout=20s "$@"; }
api_get() { curl -fsS --max-time 5 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "https://$ADDR:$API_PORT$1"; }

port_free() { ! (exec 3<>"/dev/tcp/$ADDR/$1") 2>/dev/null; }

save_sysctls() {
    local s
    [[ -f $STATE/sysctls.saved ]] && return 0
    for s in "${SYSCTLS[@]}"; do
        [[ -e /proc/sys/${s//.//} ]] && echo "$s=$(sysctl -n "$s")"
    done >"$STATE/sysctls.saved"
}

node_ready() {
    [[ $(kc get node "$NODE" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}') == True ]]
}

start_apiserver() {
    start kube-apiserver "$K8S_BIN/kube-apiserver" \
        --bind-address "$ADDR" --advertise-address "$ADDR" --secure-port "$API_PORT" \
        --etcd-servers "https://$ADDR:$ETCD_PORT" --etcd-cafile "$PKI/ca.crt" \
        --etcd-certfile "$PKI/apiserver-etcd-client.crt" --etcd-keyfile "$PKI/apiserver-etcd-client.key" \
        --client-ca-file "$PKI/ca.crt" --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
        --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
        --kubelet-certificate-authority "$PKI/ca.crt" --kubelet-preferred-address-types InternalIP \
        --service-account-issuer https://kubernetes.default.svc --service-account-key-file "$PKI/sa.pub" \
        --service-account-signing-key-file "$PKI/sa.key" \
        --service-cluster-ip-range "$SERVICE_CIDR" --authorization-mode Node,RBAC \
        --enable-admission-plugins NodeRestriction --anonymous-auth=false --allow-privileged=false \
        --endpoint-reconciler-type none --profiling=false --cert-dir "$STATE/apiserver"
}

cmd_up() {
    [[ $(id -u) -eq 0 ]] || die "run as root (containerd, the kubelet and cgroups need it)"
    if alive kube-apiserver || alive kubelet || alive containerd; then
        die "a cluster is already running (tests/cluster/cluster.sh down first)"
    fi
    local t0=$SECONDS
    cmd_build
    [[ ${EAI_CLUSTER_SERVICES:-0} == 1 ]] && { cmd_build coredns; command -v nft >/dev/null || die "nft missing (apt-get install nftables)"; }
    # A previous run that died half way: clean it first.
    cmd_down >/dev/null 2>&1 || true
    local p
    for p in $API_PORT $ETCD_PORT $ETCD_PEER_PORT $REGISTRY_PORT $KUBELET_PORT $KUBELET_HEALTHZ_PORT $CM_PORT $SCHED_PORT; do
        port_free "$p" || die "port $ADDR:$p is in use"
    done
    ip link show "$BRIDGE" >/dev/null 2>&1 && die "interface $BRIDGE exists (another cluster?)"

    mkdir -p "$STATE" "$RUN" "$LOGS"
    rm -rf "$LOGS"/*.log "$LOGS/runsc"
    rm -f "$STATE/services"
    [[ ${EAI_CLUSTER_SERVICES:-0} == 1 ]] && touch "$STATE/services"
    # From here on, a failure stops whatever started (the logs stay).
    # ($BASHPID: bash runs this trap in some subshells too, e.g. <(...).)
    trap '[[ $BASHPID == "$$" ]] && { say "up failed: stopping what started (logs: $LOGS)"; cmd_down >/dev/null 2>&1; }' EXIT
    save_sysctls
    for p in "${HOST_PATHS[@]}"; do
        [[ -e $p ]] || echo "$p"
    done >"$STATE/host-paths.created"
    make_pki
    write_configs
    # The kubelet checks that its cgroup root exists in every hierarchy.
    local h
    for h in /sys/fs/cgroup/*/; do
        [[ -f $h/cgroup.procs ]] && mkdir -p "$h$CGROUP"
    done
    # cgroup v1 cpuset: a new group starts with no CPUs and no memory nodes.
    if [[ -f /sys/fs/cgroup/cpuset/cpuset.cpus ]]; then
        [[ -n $(<"/sys/fs/cgroup/cpuset/$CGROUP/cpuset.cpus") ]] ||
            cat /sys/fs/cgroup/cpuset/cpuset.cpus >"/sys/fs/cgroup/cpuset/$CGROUP/cpuset.cpus"
        [[ -n $(<"/sys/fs/cgroup/cpuset/$CGROUP/cpuset.mems") ]] ||
            cat /sys/fs/cgroup/cpuset/cpuset.mems >"/sys/fs/cgroup/cpuset/$CGROUP/cpuset.mems"
    fi

    services_mode && start_services_network
    say "starting the registry and etcd"
    start registry /usr/bin/docker-registry serve "$STATE/registry.yml"
    start etcd "$ETCD_BIN/etcd" --name eai --data-dir "$STATE/etcd" \
        --listen-client-urls "https://$ADDR:$ETCD_PORT" --advertise-client-urls "https://$ADDR:$ETCD_PORT" \
        --listen-peer-urls "http://$ADDR:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://$ADDR:$ETCD_PEER_PORT" \
        --initial-cluster "eai=http://$ADDR:$ETCD_PEER_PORT" --initial-cluster-state new \
        --cert-file "$PKI/etcd.crt" --key-file "$PKI/etcd.key" --trusted-ca-file "$PKI/ca.crt" --client-cert-auth \
        --listen-metrics-urls "" --log-level warn
    local shims=$RUNSC_DIR
    can_lower_oom_score || shims=$SHIM_DIR:$RUNSC_DIR
    start containerd env PATH="$shims:$CONTAINERD_BIN:/usr/sbin:/usr/bin:/sbin:/bin" \
        "$CONTAINERD_BIN/containerd" --config "$STATE/containerd.toml"

    wait_for registry "the registry" curl -fsS --max-time 2 "http://$REGISTRY/v2/"
    local tag
    for tag in pause busybox; do
        local ref=$PAUSE_IMAGE
        [[ $tag == busybox ]] && ref=$BUSYBOX_IMAGE
        skopeo copy --quiet --dest-tls-verify=false "oci:$IMAGES/oci:$tag" "docker://$ref" ||
            fail_with_log registry "pushing $ref failed"
    done
    wait_for etcd "etcd /health" curl -fsS --max-time 2 --cacert "$PKI/ca.crt" --cert "$PKI/apiserver-etcd-client.crt" \
        --key "$PKI/apiserver-etcd-client.key" "https://$ADDR:$ETCD_PORT/health"

    say "starting the control plane"
    start_apiserver
    wait_for kube-apiserver "the API server's /readyz" api_get /readyz

    start kube-controller-manager "$K8S_BIN/kube-controller-manager" \
        --kubeconfig "$STATE/controller-manager.kubeconfig" \
        --authentication-kubeconfig "$STATE/controller-manager.kubeconfig" \
        --authorization-kubeconfig "$STATE/controller-manager.kubeconfig" \
        --bind-address "$ADDR" --secure-port "$CM_PORT" --cert-dir "$STATE/controller-manager" \
        --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
        --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
        --use-service-account-credentials --service-cluster-ip-range "$SERVICE_CIDR" \
        --leader-elect=false --profiling=false
    services_mode && start_coredns
    start kube-scheduler "$K8S_BIN/kube-scheduler" \
        --kubeconfig "$STATE/scheduler.kubeconfig" \
        --authentication-kubeconfig "$STATE/scheduler.kubeconfig" \
        --authorization-kubeconfig "$STATE/scheduler.kubeconfig" \
        --bind-address "$ADDR" --secure-port "$SCHED_PORT" --cert-dir "$STATE/scheduler" \
        --leader-elect=false --profiling=false

    wait_for containerd "containerd's socket" test -S "$RUN/containerd/containerd.sock"
    say "starting the kubelet"
    start kubelet env PATH="/usr/sbin:/usr/bin:/sbin:/bin" "$K8S_BIN/kubelet" \
        --config "$STATE/kubelet/config.yaml" --kubeconfig "$STATE/kubelet.kubeconfig" \
        --root-dir "$STATE/kubelet" --cert-dir "$STATE/kubelet/pki" --hostname-override "$NODE" --v 1

    wait_for kubelet "node $NODE Ready" node_ready
    kc apply -f - >/dev/null <<EOF
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: gvisor}
handler: runsc
EOF
    wait_for kube-apiserver "RuntimeClass gvisor" kc get runtimeclass gvisor
    wait_for kube-controller-manager "the default ServiceAccount" kc -n default get serviceaccount default
    make_eaid_access
    trap - EXIT
    say "up in $((SECONDS - t0)) s; eval \"\$($0 env)\""
}

# EAI_CLUSTER_SERVICES=1: the bridge made before the CNI plugin (which then
# finds its gateway address there), route_localnet on it alone (the API
# server's DNAT target is 127.0.0.1), and one nftables table: from the bridge
# the host accepts the API server through the `kubernetes` Service address
# and DNS on $GATEWAY, nothing else; nothing is forwarded from the bridge.
start_services_network() {
    ip link add "$BRIDGE" type bridge
    ip addr add "$GATEWAY/${POD_CIDR#*/}" dev "$BRIDGE"
    ip link set "$BRIDGE" up
    sysctl -q -w "net.ipv4.conf.$BRIDGE.route_localnet=1"
    nft -f - <<EOF
table ip $NFT_TABLE {
    chain prerouting {
        type nat hook prerouting priority dstnat; policy accept;
        iifname "$BRIDGE" ip daddr $API_SERVICE_IP tcp dport 443 dnat to $ADDR:$API_PORT
    }
    chain input {
        type filter hook input priority filter; policy accept;
        iifname "$BRIDGE" ct state established,related accept
        iifname "$BRIDGE" ct status dnat ip daddr $ADDR tcp dport $API_PORT accept
        iifname "$BRIDGE" ip daddr $GATEWAY udp dport 53 accept
        iifname "$BRIDGE" ip daddr $GATEWAY tcp dport 53 accept
        iifname "$BRIDGE" drop
    }
    chain forward {
        type filter hook forward priority filter; policy accept;
        iifname "$BRIDGE" oifname != "$BRIDGE" drop
    }
}
EOF
}

# The cluster DNS: CoreDNS (modules/coredns) on $GATEWAY:53, the kubernetes
# plugin reading Services and EndpointSlices with the admin kubeconfig;
# names outside cluster.local get no answer (no upstream).
start_coredns() {
    cat >"$STATE/Corefile" <<EOF
.:53 {
    bind $GATEWAY
    errors
    cache 5
    kubernetes cluster.local {
        kubeconfig $STATE/admin.kubeconfig
    }
}
EOF
    start coredns "$COREDNS_BIN/coredns" -conf "$STATE/Corefile"
}

# eaid's access, as the Helm chart grants it (deploy/helm/.../rbac.yaml,
# plugins/k8s/api-calls.json): ServiceAccount eai-system/eai-sandbox, the
# cluster part bound cluster-wide, the tenant part bound by eaid itself in
# each tenant namespace (tenant_role, service_account).
make_eaid_access() {
    kc apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Namespace
metadata: {name: eai-system}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: eai-sandbox, namespace: eai-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: eai-sandbox-tenant}
rules:
  - {apiGroups: [""], resources: ["pods"], verbs: ["create", "get", "list", "watch", "delete"]}
  - {apiGroups: [""], resources: ["pods/log"], verbs: ["get"]}
  - {apiGroups: [""], resources: ["secrets"], verbs: ["create"]}
  - {apiGroups: ["networking.k8s.io"], resources: ["networkpolicies"], verbs: ["create"]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: eai-sandbox}
rules:
  - {apiGroups: [""], resources: ["namespaces"], verbs: ["create", "list"]}
  - {apiGroups: ["rbac.authorization.k8s.io"], resources: ["rolebindings"], verbs: ["create"]}
  - {apiGroups: ["node.k8s.io"], resources: ["runtimeclasses"], verbs: ["get"]}
  - {apiGroups: [""], resources: ["nodes/stats"], verbs: ["get"]}
  - {apiGroups: ["rbac.authorization.k8s.io"], resources: ["clusterroles"], verbs: ["bind"], resourceNames: ["eai-sandbox-tenant"]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: eai-sandbox}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: eai-sandbox}
subjects:
  - {kind: ServiceAccount, name: eai-sandbox, namespace: eai-system}
EOF
    kc -n eai-system create token eai-sandbox --duration 24h >"$STATE/eaid.token"
    chmod 600 "$STATE/eaid.token"
    cat >"$STATE/eaid.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: eai-cluster
  cluster: {server: "https://$ADDR:$API_PORT", certificate-authority: "$PKI/ca.crt"}
users:
- name: eai-sandbox
  user: {tokenFile: "$STATE/eaid.token"}
contexts:
- name: eai-cluster
  context: {cluster: eai-cluster, user: eai-sandbox}
current-context: eai-cluster
EOF
    chmod 600 "$STATE/eaid.kubeconfig"
}

# ---------------------------------------------------------------------------
# down: every step is safe to repeat and runs whatever state is left.

our_mounts() { # mount points under our directories, deepest first
    awk '{print $5}' /proc/self/mountinfo | while read -r m; do
        m=$(printf '%b' "$m")
        case $m in "$STATE"/* | "$RUN"/* | "$RUN" | /run/containerd/runsc/*) echo "$m" ;; esac
    done | sort -r
}

cgroup_procs() { # every pid in our cgroup subtree of the process-tracking hierarchy
    [[ -d $UNIFIED/$CGROUP ]] || return 0
    find "$UNIFIED/$CGROUP" -name cgroup.procs -exec cat {} + 2>/dev/null
}

stop_daemons() { # stop_daemons NAME...: TERM, up to 10 s, then KILL
    local name
    for name in "$@"; do
        alive "$name" && { kill -TERM "$(cat "$(pidfile "$name")")" 2>/dev/null || true; }
    done
    for name in "$@"; do
        for _ in $(seq 50); do alive "$name" || break; sleep 0.2; done
        alive "$name" && { kill -KILL "$(cat "$(pidfile "$name")")" 2>/dev/null || true; }
        rm -f "$(pidfile "$name")"
    done
    return 0
}

cmd_down() {
    [[ $(id -u) -eq 0 ]] || die "run as root"
    local name p

    # Pods first, while the kubelet can still tear down their sandboxes and networks.
    if alive kube-apiserver && alive kubelet && [[ -x $K8S_BIN/kubectl ]]; then
        kc delete pods --all --all-namespaces --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
        for _ in $(seq 40); do
            [[ -z $(kc get pods -A -o name 2>/dev/null) ]] && break
            sleep 0.5
        done
    fi

    # Daemons in reverse order of start (those of one stage together), then
    # anything left in their cgroups.
    stop_daemons kubelet
    stop_daemons coredns kube-scheduler kube-controller-manager kube-apiserver
    stop_daemons containerd
    stop_daemons etcd registry
    if [[ -d $UNIFIED/$CGROUP ]]; then
        for _ in $(seq 20); do
            [[ -z $(cgroup_procs) ]] && break
            if [[ -f $UNIFIED/$CGROUP/cgroup.kill ]]; then
                echo 1 >"$UNIFIED/$CGROUP/cgroup.kill" 2>/dev/null || true
            else
                for p in $(cgroup_procs); do kill -KILL "$p" 2>/dev/null || true; done
            fi
            sleep 0.5
        done
        [[ -z $(cgroup_procs) ]] || say "warning: processes left in $UNIFIED/$CGROUP: $(cgroup_procs | tr '\n' ' ')"
    fi

    # Mounts (volumes, rootfs, shm, netns), interfaces, network namespaces.
    for _ in 1 2 3; do
        while read -r p; do
            [[ -n $p ]] && { umount "$p" 2>/dev/null || umount -l "$p" 2>/dev/null || true; }
        done < <(our_mounts)
        [[ -z $(our_mounts) ]] && break
    done
    [[ -z $(our_mounts) ]] || say "warning: mounts left: $(our_mounts | tr '\n' ' ')"
    nft list table ip "$NFT_TABLE" >/dev/null 2>&1 && { nft delete table ip "$NFT_TABLE" || say "warning: nftables table $NFT_TABLE left"; }
    if ip link show "$BRIDGE" >/dev/null 2>&1; then
        for p in $(ip -o link show master "$BRIDGE" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
            ip link delete "$p" 2>/dev/null || true
        done
        ip link delete "$BRIDGE" 2>/dev/null || true
    fi

    # cgroups: ours in every hierarchy, deepest first.
    local h
    for h in /sys/fs/cgroup/*/ "$UNIFIED/"; do
        [[ -d $h$CGROUP ]] && find "$h$CGROUP" -depth -type d -exec rmdir {} + 2>/dev/null || true
        [[ -d $h$CGROUP ]] && say "warning: cgroup left: $h$CGROUP"
    done

    # Hard-coded host paths: our entries, then the directories we created.
    find /var/log/containers -maxdepth 1 -type l -lname "$STATE/*" -delete 2>/dev/null || true
    # libcni's cache: our entries name a netns under $RUN (network eai-cluster,
    # and containerd's own cni-loopback).
    { grep -lsF "\"netns\":\"$RUN/" /var/lib/cni/results/* 2>/dev/null || true; } | xargs -r rm -f
    # The kubelet leaves its socket behind (any other kubelet here would have
    # had its own replaced by ours at start).
    rm -f /var/lib/kubelet/device-plugins/kubelet.sock
    if [[ -f $STATE/host-paths.created ]]; then
        while read -r p; do
            [[ -d $p ]] && find "$p" -depth -type d -empty -delete 2>/dev/null
            [[ -e $p ]] && say "warning: $p is not empty; left in place"
        done <"$STATE/host-paths.created"
    fi

    # Sysctls back to what they were before `up`.
    if [[ -f $STATE/sysctls.saved ]]; then
        while IFS='=' read -r name p; do
            [[ $(sysctl -n "$name" 2>/dev/null) == "$p" ]] || sysctl -q -w "$name=$p" >/dev/null || true
        done <"$STATE/sysctls.saved"
    fi

    # State, except the logs (kept for a post-mortem; the next `up` clears them).
    if [[ -d $STATE ]]; then
        find "$STATE" -mindepth 1 -maxdepth 1 ! -name logs -exec rm -rf --one-file-system {} +
    fi
    rm -rf --one-file-system "$RUN"
    [[ -d /run/containerd/runsc && ! -f /run/containerd/containerd.sock ]] &&
        rmdir /run/containerd/runsc/k8s.io /run/containerd/runsc 2>/dev/null || true
    return 0
}

# restart-apiserver [SECONDS]: the API server dies (SIGKILL: no graceful
# shutdown, connections cut) and comes back; etcd, the kubelet and the pods
# keep running meanwhile.  For tests of clients that must survive it.
cmd_restart_apiserver() {
    [[ $(id -u) -eq 0 ]] || die "run as root"
    local down=${1:-0} pid
    [[ $down =~ ^[0-9]+$ ]] || die "usage: restart-apiserver [SECONDS]"
    alive kube-apiserver || die "the API server is not running (tests/cluster/cluster.sh up)"
    alive etcd || die "etcd is not running"
    local t0=$SECONDS
    pid=$(cat "$(pidfile kube-apiserver)")
    kill -KILL "$pid"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && die "the API server (pid $pid) survived SIGKILL"
    say "API server killed; down for ${down}s"
    sleep "$down"
    start_apiserver
    wait_for kube-apiserver "the API server's /readyz" api_get /readyz
    say "API server back after $((SECONDS - t0)) s (pid $(cat "$(pidfile kube-apiserver)"))"
}

# compact-etcd: etcd's own compaction (the API server asks for one every
# --etcd-compaction-interval, 5 min by default) up to the current revision,
# through etcd's gRPC gateway (no etcdctl is built).  Prints the revision.
etcd_post() {
    curl -fsS --max-time 10 --cacert "$PKI/ca.crt" --cert "$PKI/apiserver-etcd-client.crt" \
        --key "$PKI/apiserver-etcd-client.key" -X POST -d "$2" "https://$ADDR:$ETCD_PORT$1"
}
cmd_compact_etcd() {
    [[ $(id -u) -eq 0 ]] || die "run as root"
    alive etcd || die "etcd is not running"
    local rev
    rev=$(etcd_post /v3/maintenance/status '{}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["header"]["revision"])') ||
        die "cannot read etcd's revision"
    etcd_post /v3/kv/compaction "{\"revision\": \"$rev\", \"physical\": true}" >/dev/null ||
        die "compacting etcd at revision $rev failed"
    say "etcd compacted at revision $rev"
    echo "$rev"
}

# ---------------------------------------------------------------------------

cmd_env() {
    [[ -f $STATE/admin.kubeconfig ]] || die "no cluster (tests/cluster/cluster.sh up)"
    cat <<EOF
export KUBECONFIG=$STATE/admin.kubeconfig
export EAI_CLUSTER_KUBECTL=$K8S_BIN/kubectl
export EAI_CLUSTER_API_URL=https://$ADDR:$API_PORT
export EAI_CLUSTER_CA=$PKI/ca.crt
export EAI_CLUSTER_REGISTRY=$REGISTRY
export EAI_CLUSTER_BUSYBOX_IMAGE=$BUSYBOX_IMAGE
export EAI_CLUSTER_EAID_KUBECONFIG=$STATE/eaid.kubeconfig
export EAI_CLUSTER_TENANT_ROLE=eai-sandbox-tenant
export EAI_CLUSTER_SERVICE_ACCOUNT=eai-system/eai-sandbox
export EAI_CLUSTER_RUNTIME_CLASS=gvisor
export EAI_CLUSTER_HELM=$HELM_BIN/helm
export EAI_CLUSTER_SERVICES=$(services_mode && echo 1 || echo 0)
export PATH=$K8S_BIN:\$PATH
EOF
}

# push ROOTFS NAME:TAG [CMD...]: eaid's image store keeps root filesystems
# (docs/images.md); the kubelet pulls images.  This packs one as a one-layer
# OCI image (umoci) and pushes it to the local registry (skopeo).
cmd_push() {
    local rootfs=${1:-} ref=${2:-}
    shift 2 || true
    [[ -d $rootfs && $ref =~ ^[a-z0-9._/-]+:[A-Za-z0-9._-]+$ ]] || die "usage: push ROOTFS NAME:TAG [CMD...]"
    alive registry || die "the registry is not running (tests/cluster/cluster.sh up)"
    fill_rootfs() { cp -a "$rootfs/." "$1/"; }
    local tmp
    mkdir -p "$CACHE"
    tmp=$(mktemp -d "$CACHE/push.XXXXXX")
    oci_image "$tmp/oci" img fill_rootfs "${@:-/bin/sh}"
    skopeo copy --quiet --dest-tls-verify=false "oci:$tmp/oci:img" "docker://$REGISTRY/$ref" ||
        { rm -rf "$tmp"; die "pushing $REGISTRY/$ref failed"; }
    rm -rf "$tmp"
    echo "$REGISTRY/$ref"
}

cmd_status() {
    local name rc=0
    for name in "${DAEMONS[@]}"; do
        if alive "$name"; then
            printf '%-24s running (pid %s)\n' "$name" "$(cat "$(pidfile "$name")")"
        else
            printf '%-24s stopped\n' "$name"
            rc=1
        fi
    done
    if alive kube-apiserver; then
        printf '%-24s %s\n' "/readyz" "$(api_get /readyz 2>&1 | tail -n1)"
        kc get nodes -o wide 2>&1 || true
        kc get runtimeclass 2>&1 || true
    fi
    return $rc
}

main() {
    case ${1:-} in
        build) shift; cmd_build "$@" ;;
        packages) printf '%s\n' "${CLUSTER_PACKAGES[@]}" ;;
        up) cmd_up ;;
        down) cmd_down ;;
        env) cmd_env ;;
        status) cmd_status ;;
        push) shift; cmd_push "$@" ;;
        restart-apiserver) shift; cmd_restart_apiserver "$@" ;;
        compact-etcd) cmd_compact_etcd ;;
        *) sed -n '2,/^set -euo pipefail/p' "$0" | sed '$d' >&2; exit 2 ;;
    esac
}
# One line: bash has read it whole before running it, so editing this file
# while a long build runs cannot make bash run half a line afterwards.
main "$@"; exit
