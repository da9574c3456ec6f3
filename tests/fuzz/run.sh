#!/usr/bin/env bash
# Run every libFuzzer target of a build tree for a bounded time, or for a
# bounded number of runs.
#   tests/fuzz/run.sh [--runs N] <build-dir> [seconds per target, default 15] [target ...]
# With --runs N each target stops after N inputs (libFuzzer -runs=N), or at the
# time bound if that comes first: give a large one for long runs, e.g.
#   tests/fuzz/run.sh --runs 10000000 build-fuzz 86400
# Each target starts from its committed seed corpus (tests/fuzz/corpus/<t>),
# copied to a scratch directory so runs never grow the committed seeds.
# Two targets at a time.  Crash/leak/timeout inputs are kept under
# <build-dir>/fuzz/artifacts/<t>/; the script exits 1 when any target failed.
set -u
runs=()
if [[ ${1:-} == --runs ]]; then
    [[ ${2:-} =~ ^[0-9]+$ ]] || { echo "run.sh: --runs needs a number" >&2; exit 2; }
    runs=(-runs="$2")
    shift 2
fi
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: run.sh <build-dir> [seconds] [target ...]}
secs=${2:-15}
shift $(($# >= 2 ? 2 : $#))
bin="$build/fuzz"
if (($# > 0)); then
    targets=("$@")
else
    targets=()
    for f in "$bin"/fuzz_*; do
        [[ -x $f ]] && targets+=("${f##*/fuzz_}")
    done
fi
if ((${#targets[@]} == 0)); then
    echo "run.sh: no fuzz targets in $bin" >&2
    exit 1
fi
scratch=$(mktemp -d /tmp/eai-fuzz.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

run_one() {
    local t=$1 corpus="$scratch/$1" art="$build/fuzz/artifacts/$1"
    mkdir -p "$corpus" "$art"
    [[ -d $here/corpus/$t ]] && cp -r "$here/corpus/$t/." "$corpus/"
    "$bin/fuzz_$t" -max_total_time="$secs" "${runs[@]}" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
        -print_final_stats=1 -artifact_prefix="$art/" "$corpus" >"$scratch/$t.log" 2>&1
    local rc=$?
    local execs
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$scratch/$t.log" | grep -o '[0-9]*$')
    local speed
    speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$scratch/$t.log" | grep -o '[0-9]*$')
    local cov
    cov=$(grep -o 'cov: [0-9]*' "$scratch/$t.log" | tail -1)
    if ((rc == 0)); then
        echo "fuzz_$t: ok, ${execs:-?} execs (${speed:-?}/s), $cov, corpus $(ls "$corpus" | wc -l)"
    else
        echo "fuzz_$t: FAILED (exit $rc); artifacts in $art"
        grep -E 'ERROR|invariant failed|runtime error|SUMMARY' "$scratch/$t.log" | head -20
        tail -40 "$scratch/$t.log"
    fi
    return $rc
}

fail=0
i=0
pids=()
names=()
for t in "${targets[@]}"; do
    run_one "$t" > "$scratch/$t.out" 2>&1 &
    pids+=($!)
    names+=("$t")
    i=$((i + 1))
    if ((i % 2 == 0)); then
        for k in "${!pids[@]}"; do
            wait "${pids[$k]}" || fail=1
            cat "$scratch/${names[$k]}.out"
        done
        pids=()
        names=()
    fi
done
for k in "${!pids[@]}"; do
    wait "${pids[$k]}" || fail=1
    cat "$scratch/${names[$k]}.out"
done
exit $fail
