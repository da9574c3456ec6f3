#!/bin/sh
# The shared storage contract suite (tests/storage) against PostgreSQL, as
# the application role.  Usage: run_contract.sh <test_storage_contract exe>
if [ -z "${EAI_TEST_PG_APP_URL:-}" ]; then
    echo "SKIP: no PostgreSQL (EAI_TEST_PG_APP_URL unset; start one with tests/support/pg_cluster.sh)"
    exit 77
fi
EAI_TEST_STORAGE="$EAI_TEST_PG_APP_URL" exec "$1"
