# shellcheck shell=bash
# Sourced by tests/cluster/cluster.sh: the cluster's certificates and the
# configuration files of every component (written under $STATE by `up`).
# Uses the settings cluster.sh defines before sourcing it.

# Certificates (openssl, ECDSA P-256), kubeconfigs

cert() { # cert NAME SUBJECT [SAN]: a leaf signed by the cluster CA
    local name=$1 subj=$2 san=${3:-} ext
    ext="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth"
    [[ -n $san ]] && ext+=$'\n'"subjectAltName=$san"
    openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/$name.key" 2>/dev/null
    openssl req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr" 2>/dev/null
    openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
        -days 30 -sha256 -extfile <(echo "$ext") -out "$PKI/$name.crt" 2>/dev/null
    rm -f "$PKI/$name.csr"
}

make_pki() {
    mkdir -p "$PKI"
    chmod 700 "$PKI"
    openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/ca.key" 2>/dev/null
    openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=eai-cluster-ca" -days 30 -sha256 \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
        -out "$PKI/ca.crt" 2>/dev/null
    local svc=${SERVICE_CIDR%.*}.1
    cert etcd "/CN=etcd" "IP:$ADDR,DNS:localhost"
    cert apiserver "/CN=kube-apiserver" \
        "IP:$ADDR,IP:$svc,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
    cert apiserver-etcd-client "/CN=kube-apiserver-etcd-client"
    cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
    cert admin "/O=system:masters/CN=eai-cluster-admin"
    cert controller-manager "/CN=system:kube-controller-manager"
    cert scheduler "/CN=system:kube-scheduler"
    cert kubelet-client "/O=system:nodes/CN=system:node:$NODE"
    cert kubelet "/CN=$NODE" "IP:$ADDR,DNS:localhost"
    openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/sa.key" 2>/dev/null
    openssl ec -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
    rm -f "$PKI/ca.srl"
}

kubeconfig() { # kubeconfig FILE USER-CERT-NAME
    cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: eai-cluster
  cluster: {server: "https://$ADDR:$API_PORT", certificate-authority: "$PKI/ca.crt"}
users:
- name: $2
  user: {client-certificate: "$PKI/$2.crt", client-key: "$PKI/$2.key"}
contexts:
- name: eai-cluster
  context: {cluster: eai-cluster, user: $2}
current-context: eai-cluster
EOF
    chmod 600 "$1"
}

# ---------------------------------------------------------------------------
# Configuration files

write_configs() {
    local restrict_oom=false
    can_lower_oom_score || restrict_oom=true
    mkdir -p "$STATE/cni/net.d" "$STATE/kubelet" "$STATE/registry" "$RUN/containerd" "$RUN/runsc" "$LOGS/runsc"
    kubeconfig "$STATE/admin.kubeconfig" admin
    kubeconfig "$STATE/controller-manager.kubeconfig" controller-manager
    kubeconfig "$STATE/scheduler.kubeconfig" scheduler
    kubeconfig "$STATE/kubelet.kubeconfig" kubelet-client

    cat >"$STATE/registry.yml" <<EOF
version: 0.1
log: {level: info, formatter: text}
storage:
  filesystem: {rootdirectory: "$STATE/registry"}
  delete: {enabled: true}
http:
  addr: "$REGISTRY"
EOF

    # Plain HTTP to the local registry only; every other registry is left
    # to containerd's defaults (and unreachable from this host anyway).
    mkdir -p "$STATE/containerd-certs.d/$REGISTRY"
    cat >"$STATE/containerd-certs.d/$REGISTRY/hosts.toml" <<EOF
server = "http://$REGISTRY"
[host."http://$REGISTRY"]
  capabilities = ["pull", "resolve"]
EOF

    # gVisor's shim reads this (ConfigPath): runsc's own flags under runsc_config.
    cat >"$STATE/runsc.toml" <<EOF
binary_name = "$RUNSC_DIR/runsc"
root = "$RUN/runsc"
log_path = "$LOGS/runsc/shim-%ID%.log"
log_level = "info"
[runsc_config]
  platform = "systrap"
  debug-log = "$LOGS/runsc/"
EOF

    cat >"$STATE/containerd.toml" <<EOF
version = 3
root = "$STATE/containerd"
state = "$RUN/containerd"
# Not needed here, and each would touch a host-wide path (/var/run/nri, /opt/containerd, ...).
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.blockfile", "io.containerd.snapshotter.v1.erofs",
  "io.containerd.differ.v1.erofs"]

[grpc]
  address = "$RUN/containerd/containerd.sock"
[ttrpc]
  address = "$RUN/containerd/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""

[plugins.'io.containerd.internal.v1.opt']
  path = "$STATE/containerd-opt"

[plugins.'io.containerd.grpc.v1.cri']
  disable_tcp_service = true
  stream_server_address = "$ADDR"
  stream_server_port = "0"

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "$PAUSE_IMAGE"
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = "$STATE/containerd-certs.d"

[plugins.'io.containerd.cri.v1.runtime']
  enable_selinux = false
  netns_mounts_under_state_dir = true
  enable_cdi = false
  # true where no process may lower an OOM score (see can_lower_oom_score):
  # scores below containerd's own (0) are raised to it.
  restrict_oom_score_adj = $restrict_oom
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$STATE/cni/net.d"
    max_conf_num = 1
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    # RuntimeClass gvisor -> handler runsc -> gVisor's shim and runsc.
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runsc]
      runtime_type = "io.containerd.runsc.v1"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runsc.options]
        TypeUrl = "io.containerd.runsc.v1.options"
        ConfigPath = "$STATE/runsc.toml"
    # Pods without a runtime class (none in the tests) run under runc.
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$RUN/runc"
    # No "kata" handler on purpose: the k8s backend's refusal of a missing one is tested.
EOF

    # bridge + host-local: no gateway address on the host, no default route in
    # pods (isGateway false), no masquerade: a pod reaches nothing but its
    # neighbours on the bridge.
    # With EAI_CLUSTER_SERVICES=1 (services_mode, for the Helm chart): the
    # bridge gets $GATEWAY on the host and pods one more route, the Service
    # range through it; cluster.sh's nftables table lets through only the API
    # server's Service address and the cluster DNS on $GATEWAY.
    local gw=false range="{\"subnet\": \"$POD_CIDR\"}" routes=""
    if services_mode; then
        gw=true
        range="{\"subnet\": \"$POD_CIDR\", \"gateway\": \"$GATEWAY\"}"
        routes=", \"routes\": [{\"dst\": \"$SERVICE_CIDR\", \"gw\": \"$GATEWAY\"}]"
    fi
    cat >"$STATE/cni/net.d/10-eai.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "eai-cluster",
  "plugins": [
    {"type": "bridge", "bridge": "$BRIDGE", "isGateway": $gw, "ipMasq": false, "hairpinMode": false,
     "ipam": {"type": "host-local", "dataDir": "$STATE/cni/ipam",
              "ranges": [[$range]]$routes}},
    {"type": "loopback"}
  ]
}
EOF

    : >"$STATE/kubelet/resolv.conf"     # pods get no name server
    cat >"$STATE/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $ADDR
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: $ADDR
healthzPort: $KUBELET_HEALTHZ_PORT
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$PKI/ca.crt"}
authorization: {mode: Webhook}
tlsCertFile: "$PKI/kubelet.crt"
tlsPrivateKeyFile: "$PKI/kubelet.key"
containerRuntimeEndpoint: "unix://$RUN/containerd/containerd.sock"
cgroupDriver: cgroupfs
cgroupRoot: /$CGROUP
# Kubernetes >= 1.35 refuses cgroup v1 unless told otherwise; this host is v1 (hybrid).
failCgroupV1: false
failSwapOn: false
resolvConf: "$STATE/kubelet/resolv.conf"
$(services_mode && printf 'clusterDNS: ["%s"]\nclusterDomain: cluster.local\n' "$GATEWAY")
podLogsDir: "$STATE/pod-logs"
volumePluginDir: "$STATE/kubelet/volume-plugins"
maxPods: 32
podPidsLimit: 1024
serializeImagePulls: false
evictionHard: {memory.available: "100Mi", nodefs.available: "2%", imagefs.available: "2%"}
imageGCHighThresholdPercent: 98
imageGCLowThresholdPercent: 95
protectKernelDefaults: false
registerNode: true
EOF
}
