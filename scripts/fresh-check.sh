#!/usr/bin/env bash
# Fresh-machine proof (issue 14): the README's test command on a Debian 12
# that has nothing installed.
#
#   scripts/fresh-check.sh [CTEST_LABEL_REGEX]
#
# 1. a Debian 12 root made by `mmdebstrap --variant=minbase bookworm`
#    (cached as a tarball in /var/cache/eai-fresh-check, rebuilt when older
#    than 7 days or with EAI_FRESH_REFRESH=1);
# 2. the host's apt sources, CA bundle (and local CAs) and npm configuration
#    copied in, so downloads behave as on the host;
# 3. this repository cloned in at its HEAD commit (only committed work is
#    checked: that is what a user clones);
# 4. in private mount and PID namespaces: proc, sys and dev mounted, the
#    tree made the root with pivot_root (a plain chroot(2) would forbid the
#    user namespaces runsc makes: some "postgres" tests start eaid, whose
#    readiness probes gVisor), then `./scripts/test.sh -L '<labels>'` run
#    there (default labels: those that need no sandbox runtime of their own,
#    PostgreSQL included);
# 5. on exit the PID namespace ends (the kernel kills whatever the check
#    left running: PostgreSQL, sandboxes), the mounts go with the mount
#    namespace, and the tree is removed.
#
# Root only.  About 10 minutes on 2 cores (most of it apt and the build).
source "$(dirname "$0")/lib.sh"
need_root
labels=${1:-'unit|contracts|http|loader|storage|postgres'}
cache=${EAI_FRESH_CACHE:-/var/cache/eai-fresh-check}
tarball=$cache/bookworm-minbase.tar
t0=$SECONDS

apt_install mmdebstrap git

mkdir -p "$cache"
if [[ ${EAI_FRESH_REFRESH:-0} == 1 || ! -s $tarball ]] || [[ -n $(find "$tarball" -mtime +7 2>/dev/null) ]]; then
    echo "== mmdebstrap --variant=minbase bookworm -> $tarball"
    rm -rf "$tarball.part"
    mmdebstrap --quiet --variant=minbase --format=tar bookworm "$tarball.part"
    mv "$tarball.part" "$tarball"
fi

work=$(mktemp -d /var/tmp/eai-fresh.XXXXXX)
root=$work/root
cleanup() {
    local rc=$?
    # Mounts live in the private namespace and are gone with it; if one is
    # still visible here, take it down before removing anything.
    local m
    for m in $(awk -v r="$root" 'index($2, r) == 1 {print $2}' /proc/self/mounts | sort -r); do
        umount -l "$m" 2>/dev/null || true
    done
    rm -rf --one-file-system "$work"
    echo "== fresh check: removed $work ($((SECONDS - t0)) s in all, exit $rc)"
}
trap cleanup EXIT
mkdir "$root"
tar -C "$root" --numeric-owner -xpf "$tarball"

# The host's apt sources, CAs and npm configuration (files copied as they are).
rm -f "$root/etc/apt/sources.list"
cp -a /etc/apt/sources.list "$root/etc/apt/" 2>/dev/null || true
mkdir -p "$root/etc/apt/sources.list.d"
for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [[ -f $f ]] && cp -a "$f" "$root/etc/apt/sources.list.d/"
done
mkdir -p "$root/etc/ssl/certs" "$root/usr/local/share/ca-certificates"
cp -aL /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
cp -a /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/" 2>/dev/null || true
for f in /etc/npmrc /usr/etc/npmrc /usr/local/etc/npmrc /root/.npmrc; do
    if [[ -f $f ]]; then
        mkdir -p "$root$(dirname "$f")"
        cp -a "$f" "$root$f"
    fi
done
cp -aL /etc/resolv.conf "$root/etc/resolv.conf"

commit=$(git -C "$EAI_ROOT" rev-parse HEAD)
if [[ -n $(git -C "$EAI_ROOT" status --porcelain --untracked-files=no) ]]; then
    echo "== note: uncommitted changes in $EAI_ROOT are not part of the check"
fi
echo "== clone $EAI_ROOT at $commit"
git clone --quiet --no-local "$EAI_ROOT" "$root/root/eai-sandbox"
git -C "$root/root/eai-sandbox" checkout --quiet "$commit"

# The environment a root login would have, plus the host's CA and proxy
# variables (they name files copied above).
envv=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8
      TERM=dumb DEBIAN_FRONTEND=noninteractive)
for v in NODE_EXTRA_CA_CERTS SSL_CERT_FILE SSL_CERT_DIR CURL_CA_BUNDLE REQUESTS_CA_BUNDLE \
         http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
    [[ -n ${!v:-} ]] && envv+=("$v=${!v}")
done

echo "== chroot $root: ./scripts/test.sh -L '$labels'"
t1=$SECONDS
set +e
unshare --mount --pid --fork --propagation private -- bash -euo pipefail -c '
    root=$1; shift
    mount --bind "$root" "$root"
    mount -t proc proc "$root/proc"
    mount --rbind /sys "$root/sys"
    mount --rbind /dev "$root/dev"
    mount -t tmpfs -o mode=1777 tmpfs "$root/dev/shm"
    mkdir -p "$root/.oldroot"
    cd "$root"
    pivot_root . .oldroot
    umount -l /.oldroot
    rmdir /.oldroot
    exec /usr/bin/env -i "$@"
' fresh "$root" "${envv[@]}" bash -c 'cd /root/eai-sandbox && ./scripts/test.sh -L "$1"' test "$labels"
rc=$?
set -e
echo "== fresh check: test.sh exit $rc after $((SECONDS - t1)) s in the chroot"
exit "$rc"
