#!/usr/bin/env bash
# Go conformance runner (sdk/conformance/README.md), called by
# sdk/conformance/run.sh with EAI_URL, EAI_API_KEY, EAI_API_KEY_B and
# EAI_CONFORMANCE_SCENARIOS exported: vets the module, runs every scenario,
# then the seed's Go snippet against the same live eaid.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
export GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local
export GOCACHE=${GOCACHE:-/tmp/eai-sdk-go-cache}
go vet ./...
rc=0
go run ./conformance || rc=1
echo "== go: seed snippet against $EAI_URL"
EAI_SDK_LIVE=1 go test -count=1 -v -run 'TestSeed' . || rc=1
exit $rc
