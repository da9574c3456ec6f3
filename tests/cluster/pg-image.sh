#!/usr/bin/env bash
# The bundled PostgreSQL's image for the real cluster (docs/helm.md, "Real
# cluster"): no container registry but the local one is reachable, so the
# chart's default docker.io/library/postgres:15-bookworm is replaced by an
# image made here from Debian's postgresql-15 (bookworm, the same major
# version and base), with the part of the official image's interface the
# chart uses:
#   - POSTGRES_USER / POSTGRES_PASSWORD / POSTGRES_DB create the superuser and
#     the database on an empty PGDATA; then every /docker-entrypoint-initdb.d/*.sh
#     runs (sourced when not executable) and *.sql goes through psql, with a
#     server listening on the Unix socket only, as the official entrypoint does;
#   - PGDATA (default /var/lib/postgresql/data), user postgres uid/gid 999,
#     the socket in /var/run/postgresql, host connections with scram-sha-256;
#   - psql, pg_isready, postgres on PATH (/usr/local/bin links).
#
#   tests/cluster/pg-image.sh            build once into $EAI_CLUSTER_CACHE/images-postgres-15 (rootfs)
#   tests/cluster/pg-image.sh push       build if needed, push as $REGISTRY/eai-cluster/postgres:15-bookworm
#                                        (the cluster must be up); prints the reference
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${EAI_CLUSTER_CACHE:-/var/cache/eai-cluster}
MIRROR=${EAI_IMAGE_MIRROR:-http://deb.debian.org/debian}
DIR=$CACHE/images-postgres-15
REF=eai-cluster/postgres:15-bookworm

say() { echo "pg-image: $*" >&2; }
die() { say "error: $*"; exit 1; }
[[ $(id -u) -eq 0 ]] || die "run as root (mmdebstrap)"

# what the image is made from: this script (its hook and entrypoint included)
stamp=$(sha256sum "$0" | cut -c1-16)

build() {
    if [[ -f $DIR/stamp && $(<"$DIR/stamp") == "$stamp" && -d $DIR/rootfs ]]; then
        return 0
    fi
    command -v mmdebstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap >&2
    local t0=$SECONDS work
    rm -rf "$DIR"
    mkdir -p "$DIR"
    work=$(mktemp -d "$CACHE/pg-image.XXXXXX")
    # shellcheck disable=SC2064
    trap "rm -rf --one-file-system '$work'" EXIT
    cat >"$work/entrypoint.sh" <<'EOF'
#!/bin/sh
# docker-entrypoint.sh of tests/cluster/pg-image.sh: the official postgres
# image's first-start steps that the eai-sandbox chart relies on.
set -eu
: "${PGDATA:=/var/lib/postgresql/data}"
: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=$POSTGRES_USER}"
export PGDATA
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    [ -n "${POSTGRES_PASSWORD:-}" ] || { echo "entrypoint: POSTGRES_PASSWORD is empty" >&2; exit 1; }
    mkdir -p "$PGDATA"
    chmod 0700 "$PGDATA"
    pw=$(mktemp)
    printf '%s\n' "$POSTGRES_PASSWORD" >"$pw"
    initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pw" -E UTF8 --locale=C.UTF-8 \
        --auth-local=trust --auth-host=scram-sha-256 >/dev/null
    rm -f "$pw"
    printf "listen_addresses = '*'\n" >>"$PGDATA/postgresql.conf"
    printf 'host all all all scram-sha-256\n' >>"$PGDATA/pg_hba.conf"
    pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -k /var/run/postgresql" -w start >/dev/null
    if [ "$POSTGRES_DB" != postgres ]; then
        psql -v ON_ERROR_STOP=1 -U "$POSTGRES_USER" -d postgres -v db="$POSTGRES_DB" <<'SQL'
CREATE DATABASE :"db";
SQL
    fi
    for f in /docker-entrypoint-initdb.d/*; do
        case $f in
            *.sh) if [ -x "$f" ]; then echo "entrypoint: running $f"; "$f"; else echo "entrypoint: sourcing $f"; . "$f"; fi ;;
            *.sql) echo "entrypoint: running $f"; psql -v ON_ERROR_STOP=1 -U "$POSTGRES_USER" -d "$POSTGRES_DB" -f "$f" ;;
            *) [ -e "$f" ] && echo "entrypoint: ignoring $f" ;;
        esac
    done
    pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
    echo "entrypoint: initialised $PGDATA"
fi
exec postgres -D "$PGDATA" "$@"
EOF
    cat >"$work/customize.sh" <<'EOF'
#!/bin/sh
set -eu
root=$1 work=$2
# postgres as uid/gid 999 (the official image's), owning what it owned
old_u=$(chroot "$root" id -u postgres)
old_g=$(chroot "$root" id -g postgres)
sed -i "s/^postgres:x:$old_u:$old_g:/postgres:x:999:999:/" "$root/etc/passwd"
sed -i "s/^postgres:x:$old_g:/postgres:x:999:/" "$root/etc/group"
find "$root" -xdev \( -path "$root/proc" -o -path "$root/sys" -o -path "$root/dev" \) -prune -o \
    \( -uid "$old_u" -o -gid "$old_g" \) -print0 | xargs -0r chown -h 999:999
# the Debian cluster the package made: the image initialises its own PGDATA
rm -rf "$root/var/lib/postgresql/15" "$root/etc/postgresql/15"
install -d -m 0775 -o 999 -g 999 "$root/var/run/postgresql" "$root/var/lib/postgresql/data" "$root/docker-entrypoint-initdb.d"
for b in postgres initdb pg_ctl psql pg_isready createdb; do
    ln -sf "/usr/lib/postgresql/15/bin/$b" "$root/usr/local/bin/$b"
done
install -m 0755 "$work/entrypoint.sh" "$root/usr/local/bin/docker-entrypoint.sh"
rm -rf "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/* "$root"/var/log/*
EOF
    chmod 0755 "$work/customize.sh"
    say "mmdebstrap bookworm + postgresql-15 (first time on this machine)"
    mmdebstrap --quiet --variant=essential --include=postgresql-15 \
        --customize-hook="$work/customize.sh \"\$1\" $work" bookworm "$DIR/rootfs.new" "$MIRROR" >&2 ||
        die "mmdebstrap failed"
    mv "$DIR/rootfs.new" "$DIR/rootfs"
    echo "$((SECONDS - t0))" >"$DIR/build-seconds"
    echo "$stamp" >"$DIR/stamp"
    say "built in $((SECONDS - t0)) s: $DIR/rootfs"
}

# One build at a time (scripts/prebuild.sh builds in the background while
# the suite runs): a second caller waits, then finds the root filesystem built.
mkdir -p "$CACHE"
exec {lock}>"$CACHE/.pg-image.lock"
flock -n "$lock" || { say "another build is under way; waiting for it"; flock "$lock"; }
build
exec {lock}>&-
if [[ ${1:-} == push ]]; then
    "$HERE/cluster.sh" push "$DIR/rootfs" "$REF" /usr/local/bin/docker-entrypoint.sh
fi
