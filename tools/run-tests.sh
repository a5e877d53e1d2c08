#!/bin/sh
# run-tests.sh BIN... — run Criterion test binaries, then tests/cli/*.sh;
# print a summary, exit non-zero if any failed.
#
# Environment: BUILD (absolute build dir; sets MXP_MANIFEST to its manifest
# unless already set), SANITIZE (as given to make; selects sanitizer options),
# TEST_TIMEOUT (seconds one binary may run, default 600).
# XDG_CONFIG_HOME / XDG_CACHE_HOME point at fresh temporary directories, so no
# test reads or writes the user's config or cache.
#
# Sanitizers and Criterion: Criterion runs every test in a forked worker and
# trusts the worker's own report once the test body finished, so a sanitizer
# report must fail the test *inside* the body or be caught here:
#   - ASan/UBSan/TSan: halt_on_error + abort_on_error turn the first report
#     into SIGABRT inside the test -> Criterion counts a CRASH -> exit 1.
#   - LSan: tests/sanitizer/criterion_leakcheck.c runs a leak check after
#     each test body and fails the test.
#   - Safety net: reports go to log files (log_path) in a per-binary
#     directory; any report file left there (e.g. a leak or race in a
#     teardown, or at worker exit) fails the binary and is printed.
# The options below are the defaults; a caller's *SAN_OPTIONS are appended
# (later settings win), except log_path, which this script owns.
set -u
: "${BUILD:=$(pwd)/build}"
fail=0; n=0; failed=""
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export XDG_CONFIG_HOME="$tmp/config" XDG_CACHE_HOME="$tmp/cache"
export MXP_MANIFEST="${MXP_MANIFEST:-$BUILD/plugins/manifest.yaml}"
mkdir -p "$XDG_CONFIG_HOME" "$XDG_CACHE_HOME"

supp() { # supp KIND: suppressions option for tests/sanitizer/KIND.supp if present
    [ -f "tests/sanitizer/$1.supp" ] && printf ':suppressions=%s' "$(pwd)/tests/sanitizer/$1.supp"
}
set_san_options() { # set_san_options LOGDIR
    common="halt_on_error=1:abort_on_error=1:print_summary=1:log_path=$1/report"
    export ASAN_OPTIONS="$common:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1${USER_ASAN_OPTIONS:+:$USER_ASAN_OPTIONS}"
    export LSAN_OPTIONS="print_suppressions=0$(supp lsan)${USER_LSAN_OPTIONS:+:$USER_LSAN_OPTIONS}"
    export UBSAN_OPTIONS="$common:print_stacktrace=1$(supp ubsan)${USER_UBSAN_OPTIONS:+:$USER_UBSAN_OPTIONS}"
    export TSAN_OPTIONS="$common:second_deadlock_stack=1$(supp tsan)${USER_TSAN_OPTIONS:+:$USER_TSAN_OPTIONS}"
}
USER_ASAN_OPTIONS="${ASAN_OPTIONS:-}"; USER_LSAN_OPTIONS="${LSAN_OPTIONS:-}"
USER_UBSAN_OPTIONS="${UBSAN_OPTIONS:-}"; USER_TSAN_OPTIONS="${TSAN_OPTIONS:-}"

for t in "$@"; do
    n=$((n + 1))
    why=""
    if [ -n "${SANITIZE:-}" ]; then
        logdir="$tmp/san.$n"; mkdir -p "$logdir"
        set_san_options "$logdir"
    fi
    # Not -q: it also silences the workers' stderr, hiding which assertion
    # failed and any sanitizer report.  Default verbosity prints failures
    # and one synthesis line per binary.
    echo "--- $t"
    # A hang fails its binary after TEST_TIMEOUT s instead of eating CI's budget.
    timeout -k 10 "${TEST_TIMEOUT:-600}" "$t" --jobs=2
    rc=$?
    if [ "$rc" -eq 124 ]; then why="timed out after ${TEST_TIMEOUT:-600} s (a hang)"
    elif [ "$rc" -eq 137 ]; then why="killed (SIGKILL: ignored the timeout's SIGTERM, or the OOM killer)"
    elif [ "$rc" -ne 0 ]; then why="exit status $rc"; fi
    if [ -n "${SANITIZE:-}" ] && [ -n "$(ls -A "$logdir")" ]; then
        for f in "$logdir"/*; do echo "--- sanitizer report ($t, $(basename "$f"))" >&2; cat "$f" >&2; done
        why="${why:+$why, }sanitizer report"
    fi
    if [ -n "$why" ]; then
        fail=$((fail + 1)); failed="$failed $t"
        echo "FAILED: $t ($why)" >&2
    fi
done
if [ -n "${SANITIZE:-}" ]; then
    echo "--- skipping tests/cli/*.sh under SANITIZE=$SANITIZE (the CLI suite and python.sh: a sanitized libmxplug in Python would need the sanitizer runtime LD_PRELOADed)"
else
    for s in tests/cli/*.sh; do
        [ -f "$s" ] || continue
        n=$((n + 1))
        if ! BUILD="$BUILD" sh "$s"; then
            fail=$((fail + 1)); failed="$failed $s"
            echo "FAILED: $s" >&2
        fi
    done
fi
echo "run-tests: $((n - fail))/$n test programs passed${SANITIZE:+ (SANITIZE=$SANITIZE)}"
[ "$fail" -eq 0 ] || { echo "failed:$failed" >&2; exit 1; }
