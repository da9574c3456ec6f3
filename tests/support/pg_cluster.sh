#!/usr/bin/env bash
# Throwaway PostgreSQL 15 cluster for tests.
#
#   tests/support/pg_cluster.sh start DIR   # prints `export EAI_TEST_PG_OWNER_URL=... EAI_TEST_PG_APP_URL=...`
#   tests/support/pg_cluster.sh stop DIR    # stops it (the data stays in DIR; rm -rf it yourself)
#   tests/support/pg_cluster.sh env DIR     # prints the exports of a running cluster
#
# The cluster runs as the `postgres` user (PostgreSQL refuses root), listens
# only on a unix socket inside DIR (plus 127.0.0.1 on the chosen free port),
# and has: database `eai` owned by `eai_owner` (login), and `eai_app` (login,
# NOSUPERUSER NOBYPASSRLS), the role the server connects as.  Local socket and
# loopback connections use trust authentication: never use this outside tests.
# `start` on a DIR whose cluster already runs just prints the URLs again, so a
# CI run can start it once and reuse it.
set -euo pipefail

PGBIN=${EAI_PG_BIN:-/usr/lib/postgresql/15/bin}
cmd=${1:-}
dir=${2:-}
if [[ -z "$cmd" || -z "$dir" ]]; then
    echo "usage: $0 start|stop|env DIR" >&2
    exit 2
fi

as_pg() {
    if [[ $(id -u) -eq 0 ]]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

print_env() {
    local port sock
    port=$(cat "$dir/port")
    sock="$dir/sock"
    echo "export EAI_TEST_PG_OWNER_URL='postgresql://eai_owner@/eai?host=$sock&port=$port'"
    echo "export EAI_TEST_PG_APP_URL='postgresql://eai_app@/eai?host=$sock&port=$port'"
    echo "export EAI_TEST_PG_SUPER_URL='postgresql://postgres@/postgres?host=$sock&port=$port'"
}

running() {
    [[ -f "$dir/data/postmaster.pid" ]] && as_pg "$PGBIN/pg_ctl" -D "$dir/data" status >/dev/null 2>&1
}

case "$cmd" in
start)
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    if running; then
        print_env
        exit 0
    fi
    if [[ ${#dir} -gt 80 ]]; then
        echo "pg_cluster: '$dir' is too long for a unix socket path" >&2
        exit 1
    fi
    if [[ $(id -u) -eq 0 ]]; then
        chown postgres: "$dir"
    fi
    chmod 0755 "$dir"
    if [[ ! -f "$dir/data/PG_VERSION" ]]; then
        as_pg "$PGBIN/initdb" -D "$dir/data" -U postgres --auth=trust \
            --encoding=UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 || {
            cat "$dir/initdb.log" >&2
            exit 1
        }
    fi
    as_pg mkdir -p "$dir/sock"
    started=0
    for _ in $(seq 1 20); do
        port=$((20000 + RANDOM % 40000))
        if ss -Hltn "sport = :$port" 2>/dev/null | grep -q .; then
            continue
        fi
        if as_pg "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
            -o "-p $port -k $dir/sock -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100" \
            start >/dev/null 2>&1; then
            started=1
            break
        fi
    done
    if [[ $started -ne 1 ]]; then
        echo "pg_cluster: could not start PostgreSQL (see $dir/server.log)" >&2
        tail -n 20 "$dir/server.log" >&2 || true
        exit 1
    fi
    echo "$port" >"$dir/port"
    psql=("$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir/sock" -p "$port" -U postgres)
    as_pg "${psql[@]}" -d postgres >/dev/null <<'SQL'
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'eai_owner') THEN
    CREATE ROLE eai_owner LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEROLE;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'eai_app') THEN
    CREATE ROLE eai_app LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEROLE NOCREATEDB;
  END IF;
END $$;
SELECT 'CREATE DATABASE eai OWNER eai_owner'
 WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'eai') \gexec
REVOKE ALL ON DATABASE eai FROM PUBLIC;
GRANT CONNECT ON DATABASE eai TO eai_app;
SQL
    as_pg "${psql[@]}" -d eai >/dev/null <<'SQL'
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
SQL
    print_env
    ;;
stop)
    if [[ -d "$dir/data" ]] && running; then
        as_pg "$PGBIN/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop >/dev/null
    fi
    ;;
env)
    dir=$(cd "$dir" && pwd)
    running || { echo "pg_cluster: no cluster running in $dir" >&2; exit 1; }
    print_env
    ;;
*)
    echo "usage: $0 start|stop|env DIR" >&2
    exit 2
    ;;
esac
