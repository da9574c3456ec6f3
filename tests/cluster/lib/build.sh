# shellcheck shell=bash
# Sourced by tests/cluster/cluster.sh: building the cluster's binaries and
# images (wrapper modules under tests/cluster/modules, cached by version
# under $CACHE).  Uses the settings cluster.sh defines before sourcing it.

need_go() {
    [[ -x $GO ]] || die "no Go toolchain at $GO (set EAI_GO; Go >= 1.26 is needed)"
    local v
    v=$("$GO" env GOVERSION)
    [[ $v =~ ^go1\.([0-9]+) ]] && ((BASH_REMATCH[1] >= 26)) || die "$GO is $v; Go >= 1.26 is needed"
}

# stamp MODDIR: what a cached build was made from (go.mod, go.sum, main.go, this script's flags).
stamp() { cat "$1"/go.mod "$1"/go.sum "$1"/*.go "$1"/*.patch 2>/dev/null | sha256sum | cut -c1-16 || true; }

# go_build NAME VERSION MODDIR TAGS LDFLAGS PKG...: build into $CACHE/NAME-VERSION/bin once.
go_build() {
    local name=$1 version=$2 moddir=$3 tags=$4 ldflags=$5
    shift 5
    local dir=$CACHE/$name-$version s
    s=$(stamp "$moddir")
    if [[ -f $dir/stamp && $(<"$dir/stamp") == "$s" ]]; then
        return 0
    fi
    need_go
    say "building $name $version (first time on this machine: see docs/kubernetes.md for how long)"
    mkdir -p "$dir"
    rm -rf "$dir/bin.new"
    local t0=$SECONDS
    if ! (cd "$moddir" && CGO_ENABLED=0 GOFLAGS=-mod=readonly GOTOOLCHAIN=local \
            nice -n 19 "$GO" build -p "$JOBS" -trimpath -tags "$tags" -ldflags "$ldflags" "${GO_EXTRA[@]}" \
            -o "$dir/bin.new/" "$@") >"$dir/build.log" 2>&1; then
        tail -n 30 "$dir/build.log" >&2
        die "building $name failed (log: $dir/build.log)"
    fi
    rm -rf "${dir:?}/bin"
    mv "$dir/bin.new" "$dir/bin"
    echo "$((SECONDS - t0))" >"$dir/build-seconds"
    echo "$s" >"$dir/stamp"
    say "built $name $version in $((SECONDS - t0)) s"
}

GO_EXTRA=()   # more go build flags for one go_build

build_kubernetes() {
    local ld="-s -w" p minor=${K8S_VERSION#v1.}
    minor=${minor%%.*}
    # What hack/lib/version.sh stamps, so /version and `kubectl version` are true.
    for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        ld+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
        ld+=" -X $p.gitTreeState=archive -X $p.buildDate=$K8S_DATE"
    done
    go_build kubernetes "$K8S_VERSION" "$MODULES/kubernetes" "" "$ld" \
        k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
        k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubectl
}

# Helm 3 (tests/cluster/modules/helm): not part of `up`; the helm-real test
# and developers ask for it (`cluster.sh build helm`).
build_helm() {
    # The Makefile's stamps: the version, and the Kubernetes version that
    # `helm template` and `helm lint` assume (client-go v0.36 -> 1.36).
    local h=helm.sh/helm/v3 ld="-s -w" kv
    kv=$(cd "$MODULES/helm" && GOFLAGS=-mod=readonly GOTOOLCHAIN=local "$GO" list -m -f '{{.Version}}' k8s.io/client-go) ||
        die "helm: cannot read the client-go version of modules/helm"
    kv=${kv#v0.}
    ld+=" -X $h/internal/version.version=$HELM_VERSION -X $h/internal/version.gitTreeState=archive"
    ld+=" -X $h/pkg/lint/rules.k8sVersionMajor=1 -X $h/pkg/lint/rules.k8sVersionMinor=${kv%%.*}"
    ld+=" -X $h/pkg/chartutil.k8sVersionMajor=1 -X $h/pkg/chartutil.k8sVersionMinor=${kv%%.*}"
    go_build helm "$HELM_VERSION" "$MODULES/helm" "" "$ld" $h/cmd/helm
}

# CoreDNS (tests/cluster/modules/coredns: only the plugins the cluster's DNS
# uses): the cluster DNS of `up` with EAI_CLUSTER_SERVICES=1.
build_coredns() {
    go_build coredns "$COREDNS_VERSION" "$MODULES/coredns" "" \
        "-s -w -X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION" .
}

build_etcd() {
    go_build etcd "$ETCD_VERSION" "$MODULES/etcd" "" "-s -w" .   # the module's name: bin/etcd
}

build_containerd() {
    local p=github.com/containerd/containerd/v2
    # The Makefile's static build: tags and version stamps.
    go_build containerd "$CONTAINERD_VERSION" "$MODULES/containerd" \
        "urfave_cli_no_docs osusergo netgo static_build no_btrfs no_devmapper no_zfs" \
        "-s -w -X $p/version.Version=$CONTAINERD_VERSION -X $p/version.Package=$p" \
        $p/cmd/containerd $p/cmd/ctr $p/cmd/containerd-shim-runc-v2
}

# gVisor: runsc and its containerd shim, built by tools/runtime/build.sh.
find_runsc() {
    if [[ -z ${EAI_RUNSC_DIR:-} && -x $ROOT/tools/runtime/build.sh ]]; then
        RUNSC_DIR=$("$ROOT/tools/runtime/build.sh" --print-dir) || die "tools/runtime/build.sh --print-dir failed"
        if [[ ! -x $RUNSC_DIR/runsc || ! -x $RUNSC_DIR/containerd-shim-runsc-v1 ]]; then
            say "building gVisor with tools/runtime/build.sh"
            "$ROOT/tools/runtime/build.sh" >&2 || die "tools/runtime/build.sh failed"
        fi
    fi
    [[ -x $RUNSC_DIR/runsc && -x $RUNSC_DIR/containerd-shim-runsc-v1 ]] ||
        die "no runsc and containerd-shim-runsc-v1 in $RUNSC_DIR (set EAI_RUNSC_DIR, or run tools/runtime/build.sh)"
}

# Can a process here lower an OOM score (CAP_SYS_RESOURCE)?  The kubelet
# asks for negative scores (pause -998, Guaranteed pods -997) and gVisor's
# shim for -999; some hosts (microVMs) deny that to every process, root too.
can_lower_oom_score() {
    local p ok=1
    sleep 5 &
    p=$!
    echo -999 >"/proc/$p/oom_score_adj" 2>/dev/null || ok=0
    kill "$p" 2>/dev/null
    wait "$p" 2>/dev/null || true
    ((ok))
}

# gVisor's shim with modules/gvisor-shim/oom-score.patch, for hosts where
# can_lower_oom_score fails: the stock shim refuses to start there.  The
# pinned module is copied out of the module cache, patched, and used through
# a replace line of a temporary go.mod (-modfile); every other module is
# checked against modules/gvisor-shim/go.sum as usual.
SHIM_DIR=$CACHE/gvisor-shim-$GVISOR_VERSION-oom/bin
build_gvisor_shim() {
    local moddir=$MODULES/gvisor-shim src dir=$CACHE/gvisor-shim-$GVISOR_VERSION-oom
    if [[ -f $dir/stamp && $(<"$dir/stamp") == "$(stamp "$moddir")" ]]; then
        return 0
    fi
    need_go
    src=$(cd "$moddir" && GOFLAGS=-mod=readonly GOTOOLCHAIN=local "$GO" mod download -json gvisor.dev/gvisor |
          sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
    [[ -f $src/pkg/shim/v1/manager.go ]] || die "gvisor.dev/gvisor source not found (module download failed?)"
    rm -rf "$dir/src" "$dir/mod"
    mkdir -p "$dir/mod"
    cp -r "$src" "$dir/src"
    chmod -R u+w "$dir/src"
    patch -s -d "$dir/src" -p1 <"$moddir/oom-score.patch" ||
        die "modules/gvisor-shim/oom-score.patch does not apply to gvisor.dev/gvisor $GVISOR_VERSION"
    cp "$moddir/go.mod" "$moddir/go.sum" "$dir/mod/"
    echo "replace gvisor.dev/gvisor => $dir/src" >>"$dir/mod/go.mod"
    GO_EXTRA=(-modfile "$dir/mod/go.mod")
    go_build gvisor-shim "$GVISOR_VERSION-oom" "$moddir" "" "-s -w" gvisor.dev/gvisor/shim
    GO_EXTRA=()
    rm -rf "$dir/src" "$dir/mod"
    [[ -x $SHIM_DIR/shim ]] && mv "$SHIM_DIR/shim" "$SHIM_DIR/containerd-shim-runsc-v1"
    [[ -x $SHIM_DIR/containerd-shim-runsc-v1 ]] || die "no $SHIM_DIR/containerd-shim-runsc-v1"
}

# oci_image LAYOUT TAG ROOTFS-FILLER CMD...: a one-layer OCI image made with umoci.
oci_image() {
    local layout=$1 tag=$2 fill=$3
    shift 3
    local bundle
    bundle=$(mktemp -d "$CACHE/bundle.XXXXXX")
    [[ -d $layout ]] || umoci init --layout "$layout"
    umoci new --image "$layout:$tag"
    umoci unpack --image "$layout:$tag" "$bundle/b" >/dev/null
    "$fill" "$bundle/b/rootfs"
    umoci repack --image "$layout:$tag" "$bundle/b"
    local args=()
    for a in "$@"; do args+=(--config.cmd "$a"); done
    umoci config --image "$layout:$tag" --author eai-cluster --history.created_by "tests/cluster/cluster.sh" "${args[@]}"
    umoci gc --layout "$layout"
    rm -rf "$bundle"
}

fill_pause() { install -m 0755 "$IMAGES/pause" "$1/pause"; }
fill_busybox() {
    mkdir -p "$1/bin" "$1/tmp"
    chmod 1777 "$1/tmp"
    install -m 0755 /bin/busybox "$1/bin/busybox"
    local c
    for c in sh cat dmesg echo env id ls ps sleep true false uname wc grep head; do
        ln -s busybox "$1/bin/$c"
    done
}

# The pod sandbox ("pause") image and a busybox image for smoke tests, built
# here: no outside registry is ever asked.
build_images() {
    [[ -f $IMAGES/done ]] && return 0
    command -v umoci >/dev/null || die "umoci missing (apt-get install umoci)"
    ! ldd /bin/busybox >/dev/null 2>&1 || die "/bin/busybox is not static (apt-get install busybox-static)"
    local src
    src=$(cd "$MODULES/kubernetes" && GOFLAGS=-mod=readonly "$GO" list -m -f '{{.Dir}}' k8s.io/kubernetes)
    [[ -f $src/build/pause/linux/pause.c ]] || die "pause.c missing in $src"
    rm -rf "$IMAGES"
    mkdir -p "$IMAGES"
    gcc -Os -Wall -static -DVERSION="v$PAUSE_VERSION-eai" -o "$IMAGES/pause" "$src/build/pause/linux/pause.c"
    strip "$IMAGES/pause"
    oci_image "$IMAGES/oci" pause fill_pause /pause
    oci_image "$IMAGES/oci" busybox fill_busybox /bin/sh
    touch "$IMAGES/done"
}

# What building and running the cluster needs from Debian (`cluster.sh
# packages` prints it: scripts/test.sh installs it up front, so that no
# background build runs apt-get while the suite does).
CLUSTER_PACKAGES=(containernetworking-plugins docker-registry skopeo umoci busybox-static runc openssl curl gcc libc6-dev patch)

cmd_build() { # cmd_build [etcd|containerd|kubernetes|images|runsc|helm|coredns]...: all but helm and coredns by default
    local missing=() p what=("$@")
    ((${#what[@]})) || what=(etcd containerd kubernetes images runsc)
    for p in "${CLUSTER_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if ((${#missing[@]})); then
        say "apt-get install ${missing[*]}"
        DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || true
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 ||
            die "apt-get install ${missing[*]} failed"
    fi
    mkdir -p "$CACHE"
    # One build at a time per cache (scripts/prebuild.sh builds in the
    # background while the suite runs): a test that needs a binary still
    # being built waits here, then finds it cached.
    local lock
    exec {lock}>"$CACHE/.build.lock"
    if ! flock -n "$lock"; then
        say "another build is under way in $CACHE; waiting for it"
        flock "$lock"
    fi
    for p in "${what[@]}"; do
        case $p in
            etcd | containerd | kubernetes | images | helm | coredns) "build_$p" ;;
            runsc)
                find_runsc
                can_lower_oom_score || build_gvisor_shim
                ;;
            *) die "unknown component: $p" ;;
        esac
    done
    exec {lock}>&-
}
