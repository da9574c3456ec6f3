#!/bin/sh
# Builds the offline Helm renderer from Debian's Go packages (no downloads)
# and runs the chart tests.  Usage: run.sh <build dir>
# Needs: golang-go golang-github-masterminds-sprig-dev golang-gopkg-yaml.v3-dev,
# node 20 and `npm ci` done in this folder.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: run.sh BUILD_DIR}/helm
mkdir -p "$out"
GOCODE=${EAI_GOCODE:-/usr/share/gocode}
GO111MODULE=off GOPATH="$GOCODE" GOCACHE="$out/go-cache" GOFLAGS= GOPROXY=off \
  go build -o "$out/helm-render" "$here/render/main.go"
cd "$here"
HELM_RENDER="$out/helm-render" exec node --test test/
