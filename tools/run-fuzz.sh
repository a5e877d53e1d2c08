#!/bin/sh
# run-fuzz.sh replay|fuzz BUILD NAME... — drive the libFuzzer harnesses
# $BUILD/fuzz/fuzz_<name> (built by make from tests/fuzz/fuzz_<name>.c).
#   replay  run each harness once over tests/fuzz/corpus/<name>/ (-runs=0:
#           load and execute every input, no mutation); a crash, leak or
#           sanitizer report fails.  Part of `make test`.
#   fuzz    fuzz each harness for FUZZ_SECONDS (default 30) seconds; new
#           inputs go to $BUILD/fuzz/corpus/<name>/ (the checked-in seed
#           corpus is read, never written), crash inputs to
#           $BUILD/fuzz/artifacts/.  Copy a good new input into the seed
#           corpus by hand; a crash input becomes a regression seed once fixed.
#           With FUZZ_TOTAL_SECONDS set (CI: 240), that total is split evenly
#           across the harnesses instead, each getting at least
#           FUZZ_MIN_SECONDS (default 10); when there are more harnesses than
#           total / min, a rotating subset of total / min of them runs (the
#           start of the window moves with the day of the year, so every
#           harness gets its turn) and the others are listed as skipped.  The
#           total stays bounded however many harnesses are added.
# Optional tests/fuzz/<name>.dict is passed as -dict.  With no names, says so
# and succeeds.
set -u
mode=${1:?usage: run-fuzz.sh replay|fuzz BUILD NAME...}
build=${2:?usage: run-fuzz.sh replay|fuzz BUILD NAME...}
shift 2
[ $# -eq 0 ] && { echo "run-fuzz: no harnesses in tests/fuzz/ (skipped)"; exit 0; }
secs=${FUZZ_SECONDS:-30}
total=${FUZZ_TOTAL_SECONDS:-}
if [ "$mode" = fuzz ] && [ -n "$total" ]; then
    min=${FUZZ_MIN_SECONDS:-10}
    n=$#
    secs=$((total / n))
    if [ "$secs" -lt "$min" ]; then
        secs=$min
        k=$((total / min)); [ "$k" -lt 1 ] && k=1
        start=$(( $(date +%j | sed 's/^0*//') % n ))
        i=0; picked=""; skipped=""
        for name in "$@"; do
            off=$(( (i - start + n) % n ))
            if [ "$off" -lt "$k" ]; then picked="$picked $name"; else skipped="$skipped $name"; fi
            i=$((i + 1))
        done
        echo "fuzz: $n harnesses, budget ${total}s at ${min}s each: running $k this time; skipped (rotation):$skipped"
        # shellcheck disable=SC2086
        set -- $picked
    fi
    echo "fuzz: ${secs}s per harness, $# harness(es), budget ${total}s"
fi
# Harnesses that need ops (symbol_json) find the build tree's packs.
[ -f "$build/plugins/manifest.yaml" ] && export MXP_MANIFEST="${MXP_MANIFEST:-$build/plugins/manifest.yaml}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
fail=0
for name in "$@"; do
    bin="$build/fuzz/fuzz_$name"
    seeds="tests/fuzz/corpus/$name"
    mkdir -p "$seeds"
    dict=""
    [ -f "tests/fuzz/$name.dict" ] && dict="-dict=tests/fuzz/$name.dict"
    case "$mode" in
    replay)
        n=$(find "$seeds" -type f | wc -l)
        if "$bin" -runs=0 $dict "$seeds" >"$build/fuzz/replay-$name.log" 2>&1; then
            echo "fuzz-replay: $name: $n input(s) ok"
        else
            cat "$build/fuzz/replay-$name.log" >&2
            echo "FAILED: fuzz-replay $name" >&2; fail=1
        fi ;;
    fuzz)
        work="$build/fuzz/corpus/$name"; art="$build/fuzz/artifacts"
        mkdir -p "$work" "$art"
        echo "fuzz: $name for ${secs}s"
        if ! "$bin" -max_total_time="$secs" -print_final_stats=1 -artifact_prefix="$art/$name-" \
                $dict "$work" "$seeds" >"$build/fuzz/fuzz-$name.log" 2>&1; then
            tail -n 60 "$build/fuzz/fuzz-$name.log" >&2
            echo "FAILED: fuzz $name (inputs in $art)" >&2; fail=1
        else
            grep -E '^stat::number_of_executed_units|^stat::new_units_added' "$build/fuzz/fuzz-$name.log" \
                | sed "s/^/fuzz: $name: /"
        fi ;;
    *) echo "run-fuzz: unknown mode '$mode'" >&2; exit 2 ;;
    esac
done
exit $fail
