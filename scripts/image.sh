#!/usr/bin/env bash
# The eaid container image, from Debian packages, without a container engine
# (issue 14; docs/images.md "The eaid container image").
#
#   scripts/image.sh [OUT.tar]        # default build/eaid-image.tar
#
# 1. builds eaid and its plugins (Release, no tests) in build-image/;
# 2. makes the root filesystem with `mmdebstrap --variant=essential
#    --format=tar bookworm` plus the runtime libraries eaid links, eaid in
#    /usr/bin, plugins in /usr/lib/eai/plugins, the request schemas in
#    /usr/share/eai/contracts/v1, a user `eaid` (uid/gid 10001)
#    owning /var/lib/eai, neutral /etc/hostname and /etc/resolv.conf; every
#    library eaid and its plugins need is checked with ldd inside the root;
# 3. writes an OCI image layout (one gzip layer, config with User 10001:10001,
#    Entrypoint eaid, Cmd serve) and packs it as an OCI archive whose index
#    names the tag, so the reference is ghcr.io/eai-sandbox/eaid:<version>,
#    the Helm chart's default (override: EAI_IMAGE_REPOSITORY);
# 4. prints the reference and the manifest digest (also written to
#    OUT.digest) at the end.
#
# Reproducible: SOURCE_DATE_EPOCH is the commit's time (mmdebstrap's tar
# output is then bit-for-bit reproducible for the same package versions; pin
# them with EAI_IMAGE_MIRROR=http://snapshot.debian.org/archive/debian/<ts>/);
# file times are clamped, tars sorted with numeric owners, gzip without names
# or times, JSON written in a fixed order.  Same commit, same checkout path,
# same packages: same digest.
#
# Push: skopeo copy oci-archive:build/eaid-image.tar docker://REGISTRY/eaid:TAG
source "$(dirname "$0")/lib.sh"
need_root
cd "$EAI_ROOT"
out=${1:-$EAI_ROOT/build/eaid-image.tar}
repo=${EAI_IMAGE_REPOSITORY:-ghcr.io/eai-sandbox/eaid}
version=$(sed -n 's/^project([^)]*VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt | head -n 1)
[[ -n $version ]] || { echo "$0: no project VERSION in CMakeLists.txt" >&2; exit 1; }
tag=${EAI_IMAGE_TAG:-$version}
mirror=${EAI_IMAGE_MIRROR:-http://deb.debian.org/debian}
# The runtime libraries of eaid and its plugins (checked with ldd below; libcurl4 and
# libarchive13 are opened with dlopen at first use, still needed).
runtime_pkgs=libevent-2.1-7,libevent-pthreads-2.1-7,libevent-openssl-2.1-7,libjansson4,libyaml-0-2,libcurl4,libsqlite3-0,libssl3,libpcre2-8-0,libarchive13,libpq5,ca-certificates

apt_install "${EAI_BUILD_PACKAGES[@]}" mmdebstrap python3 gzip
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)

echo "== build eaid for the image ($EAI_ROOT/build-image)"
cmake -S "$EAI_ROOT" -B "$EAI_ROOT/build-image" -DCMAKE_BUILD_TYPE=Release -DEAI_BUILD_TESTS=OFF >/dev/null
cmake --build "$EAI_ROOT/build-image" -j2 >/dev/null

work=$(mktemp -d /var/tmp/eai-image.XXXXXX)
trap 'rm -rf --one-file-system "$work"' EXIT
mkdir -p "$work/layout/blobs/sha256"

cat >"$work/customize.sh" <<'EOF'
#!/bin/sh
# mmdebstrap customize hook: $1 is the root filesystem.
set -eu
root=$1
install -D -m 0755 "$EAI_IMG_BUILD/eaid" "$root/usr/bin/eaid"
mkdir -p "$root/usr/lib/eai/plugins"
for p in "$EAI_IMG_BUILD"/plugins/eai-*.so; do
    install -m 0644 "$p" "$root/usr/lib/eai/plugins/"
done
# The JSON Schemas eaid validates requests with (found at ../share/eai/contracts/v1).
mkdir -p "$root/usr/share/eai/contracts"
cp -R "$EAI_IMG_SRC/contracts/v1" "$root/usr/share/eai/contracts/"
chmod -R go=rX,u+rw "$root/usr/share/eai"
echo 'eaid:x:10001:10001:eai-sandbox:/var/lib/eai:/usr/sbin/nologin' >>"$root/etc/passwd"
echo 'eaid:x:10001:' >>"$root/etc/group"
echo 'eaid:!:0::::::' >>"$root/etc/shadow"
install -d -m 0750 -o 10001 -g 10001 "$root/var/lib/eai"
printf 'eaid\n' >"$root/etc/hostname"
printf '# the runtime (Kubernetes, runsc) provides the resolver\n' >"$root/etc/resolv.conf"
# Every library found, inside the root.
libs=$(chroot "$root" sh -c 'ldd /usr/bin/eaid /usr/lib/eai/plugins/*.so' 2>&1) || {
    echo "$libs" >&2
    exit 1
}
# libcurl and libarchive are opened with dlopen at their first use
# (core/base/dynlib.h): ldd of eaid does not list them, so they are found
# by soname here and their own libraries checked the same way.
for so in libcurl.so.4 libarchive.so.13; do
    path=$(chroot "$root" /sbin/ldconfig -p | awk -v so="$so" '$1 == so { print $NF; exit }')
    if [ -z "$path" ]; then
        echo "image: $so missing (eaid opens it with dlopen)" >&2
        exit 1
    fi
    libs="$libs
$(chroot "$root" ldd "$path" 2>&1)" || exit 1
done
if echo "$libs" | grep 'not found' >&2; then
    echo "image: missing runtime libraries (above)" >&2
    exit 1
fi
chroot "$root" /usr/bin/eaid version >/dev/null
# No caches or logs that differ between builds.
rm -rf "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/* "$root"/var/log/* "$root"/tmp/*
# (-xdev: proc, sys and dev are mounted while hooks run)
find "$root" -xdev \( -path "$root/proc" -o -path "$root/sys" -o -path "$root/dev" \) -prune -o \
    -newermt "@$SOURCE_DATE_EPOCH" -print0 | xargs -0r touch -h -d "@$SOURCE_DATE_EPOCH"
EOF
chmod 0755 "$work/customize.sh"

echo "== mmdebstrap --variant=essential bookworm + runtime libraries"
EAI_IMG_BUILD="$EAI_ROOT/build-image" EAI_IMG_SRC="$EAI_ROOT" mmdebstrap --quiet --variant=essential --format=tar \
    --include="$runtime_pkgs" --customize-hook="$work/customize.sh \"\$1\"" \
    bookworm "$work/rootfs.tar" "$mirror"

echo "== OCI image layout"
python3 - "$work" "$repo" "$tag" "$revision" "$SOURCE_DATE_EPOCH" "$mirror" <<'EOF'
import datetime, gzip, hashlib, json, os, sys
work, repo, tag, revision, sde, mirror = sys.argv[1:7]
created = datetime.datetime.fromtimestamp(int(sde), datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
blobs = os.path.join(work, "layout", "blobs", "sha256")

def put(data):
    h = hashlib.sha256(data).hexdigest()
    with open(os.path.join(blobs, h), "wb") as f:
        f.write(data)
    return "sha256:" + h, len(data)

def js(o):
    return json.dumps(o, sort_keys=True, separators=(",", ":")).encode()

with open(os.path.join(work, "rootfs.tar"), "rb") as f:
    raw = f.read()
diff_id = "sha256:" + hashlib.sha256(raw).hexdigest()
layer, layer_size = put(gzip.compress(raw, compresslevel=9, mtime=0))
labels = {"org.opencontainers.image.source": "https://github.com/eai-sandbox/eai-sandbox",
          "org.opencontainers.image.revision": revision, "org.opencontainers.image.version": tag,
          "org.opencontainers.image.title": "eaid", "org.opencontainers.image.created": created}
config = {"created": created, "architecture": "amd64", "os": "linux",
          "config": {"User": "10001:10001", "Entrypoint": ["/usr/bin/eaid"], "Cmd": ["serve"],
                     "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                             "EAI_PLUGIN_DIR=/usr/lib/eai/plugins", "EAI_CONTRACTS_DIR=/usr/share/eai/contracts/v1",
                             "EAI_DATA_DIR=/var/lib/eai"],
                     "WorkingDir": "/var/lib/eai", "ExposedPorts": {"8080/tcp": {}}, "Labels": labels},
          "rootfs": {"type": "layers", "diff_ids": [diff_id]},
          "history": [{"created": created,
                       "created_by": "scripts/image.sh: mmdebstrap --variant=essential bookworm " + mirror}]}
cfg, cfg_size = put(js(config))
manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cfg, "size": cfg_size},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layer,
                        "size": layer_size}],
            "annotations": labels}
man, man_size = put(js(manifest))
index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
         "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": man,
                        "size": man_size, "annotations": {"org.opencontainers.image.ref.name": tag,
                                                          "io.containerd.image.name": repo + ":" + tag}}]}
with open(os.path.join(work, "layout", "index.json"), "wb") as f:
    f.write(js(index))
with open(os.path.join(work, "layout", "oci-layout"), "wb") as f:
    f.write(js({"imageLayoutVersion": "1.0.0"}))
with open(os.path.join(work, "digest"), "w") as f:
    f.write(man + "\n")
EOF
find "$work/layout" -print0 | xargs -0 touch -h -d "@$SOURCE_DATE_EPOCH"
mkdir -p "$(dirname "$out")"
tar -C "$work/layout" --sort=name --owner=0 --group=0 --numeric-owner --mode=go=rX,u+rw \
    --mtime="@$SOURCE_DATE_EPOCH" --format=posix \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
    -cf "$out.part" .
mv "$out.part" "$out"
digest=$(cat "$work/digest")
echo "$digest" >"$out.digest"
echo "$repo:$tag" >"$out.ref"
echo "== image $repo:$tag ($(du -h "$out" | cut -f1), OCI archive $out)"
echo "push:   skopeo copy oci-archive:$out docker://$repo:$tag"
echo "digest: $digest"
