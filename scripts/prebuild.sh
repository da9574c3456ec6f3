#!/usr/bin/env bash
# The third-party programs and images the suite's tests use, each built once
# per version into its cache, in the background of scripts/test.sh:
#
#   step      what                                          by                             cache
#   runsc     runsc and its containerd shim                 tools/runtime/build.sh         /var/cache/eai-runtime
#   cluster   Kubernetes, etcd, containerd, pause, busybox  tests/cluster/cluster.sh build /var/cache/eai-cluster
#   helm      Helm 3                                        tests/cluster/cluster.sh build /var/cache/eai-cluster
#   coredns   CoreDNS                                       tests/cluster/cluster.sh build /var/cache/eai-cluster
#   pg-image  the bundled PostgreSQL's root filesystem      tests/cluster/pg-image.sh      /var/cache/eai-cluster
#   otelcol   the test OpenTelemetry Collector              tests/obs/otelcol/build.sh     /var/cache/eai-otelcol
#
#   scripts/prebuild.sh [STEP...]      (default: every step, in that order)
#
# On a warm machine each step finds its cache and returns within seconds.  On
# a fresh one they are about 13 minutes of builds on 2 cores (README "A cold
# machine") that would otherwise run inside the serial tests needing them,
# nothing else running; here they run at nice 19 while the sanitizer,
# fuzz and sandbox stages leave CPU free.  Every builder takes a lock on its
# cache, so a test needing a binary that is still being built waits for it
# and never builds it twice.  A failed step is reported and the next one
# runs: the test that needs it tries again and fails with its own message.
# Exit status: the number of failed steps.
# Needs Go >= 1.26 at /usr/local/go (or EAI_GO) for every step but pg-image.
source "$(dirname "$0")/lib.sh"
need_root
cd "$EAI_ROOT"
steps=("$@")
((${#steps[@]})) || steps=(runsc cluster helm coredns pg-image otelcol)
export EAI_GO=${EAI_GO:-/usr/local/go/bin/go}
failed=0
for s in "${steps[@]}"; do
    case $s in
        runsc) cmd=(tools/runtime/build.sh) ;;
        cluster) cmd=(tests/cluster/cluster.sh build) ;;
        helm | coredns) cmd=(tests/cluster/cluster.sh build "$s") ;;
        pg-image) cmd=(tests/cluster/pg-image.sh) ;;
        otelcol) cmd=(tests/obs/otelcol/build.sh) ;;
        *) echo "prebuild: unknown step $s (runsc cluster helm coredns pg-image otelcol)" >&2; exit 2 ;;
    esac
    t0=$SECONDS
    if nice -n 19 "${cmd[@]}" </dev/null; then
        echo "prebuild: $s ready after $((SECONDS - t0)) s"
    else
        rc=$?
        echo "prebuild: $s FAILED (exit $rc) after $((SECONDS - t0)) s: ${cmd[*]}"
        failed=$((failed + 1))
    fi
done
exit "$failed"
