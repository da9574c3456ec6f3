#!/usr/bin/env bash
# TypeScript SDK: npm ci (the pinned typescript devDependency), build ESM + CJS +
# .d.ts with tsc, then the unit tests with node --test (no server needed).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ! -x node_modules/.bin/tsc ]] || [[ package-lock.json -nt node_modules/.package-lock.json ]]; then
    npm ci --no-audit --no-fund --loglevel=error
fi
npm run --silent build
node --test test/
