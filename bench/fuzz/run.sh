#!/usr/bin/env bash
# The heavy fuzz tier (docs/FUZZ.md): builds the cargo-fuzz targets of fuzz/ (release, debug
# assertions and overflow checks on, no sanitizer: the code under test is safe Rust), checks that
# overflow checks are really on, then runs each target for SECONDS (one after another: the
# machine's cores are shared) with libFuzzer's memory and time limits, from the committed seeds
# (fuzz/seeds/TARGET) plus the target's generated corpus (fuzz/corpus/TARGET, git-ignored).
# Prints execs, exec/s, cov/ft and crashes per target; exits non-zero on any crash, OOM or
# timeout (the input is in fuzz/artifacts/TARGET/).
#
#   bench/fuzz/run.sh [SECONDS=240] [TARGET ...]
#
# Needs cargo-fuzz (`cargo install cargo-fuzz --locked`) and a C++ compiler; stable rustc with
# RUSTC_BOOTSTRAP=1 (set here).
set -u
cd "$(dirname "$0")/../.." || exit 2
secs=${1:-240}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(wire_reports server_api client_config schema_csv)
export RUSTC_BOOTSTRAP=1
flags=(-O --debug-assertions --sanitizer none)
(cd fuzz && cargo fuzz build "${flags[@]}") || { echo "build failed" >&2; exit 2; }
triple=$(rustc -vV | sed -n 's/^host: //p')
bin=fuzz/target/$triple/release

# cargo-fuzz's release build turns debug assertions (hence overflow checks) on only with
# --debug-assertions: prove it, with a target whose every input overflows a u8.
if ! "$bin/overflow_check" -runs=1 2>&1 | grep -q "attempt to add with overflow"; then
    echo "overflow checks are off in the fuzz build" >&2
    exit 2
fi
rm -f crash-* 2>/dev/null

status=0
rows=()
for t in "${targets[@]}"; do
    mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t"
    log="fuzz/artifacts/$t/run.log"
    touch "fuzz/artifacts/$t/.start"
    "$bin/$t" "fuzz/corpus/$t" "fuzz/seeds/$t" -max_total_time="$secs" -rss_limit_mb=2048 \
        -malloc_limit_mb=2048 -timeout=10 -print_final_stats=1 -artifact_prefix="fuzz/artifacts/$t/" \
        >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)
    cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1 | sed 's/cov: //; s/ ft: /\//')
    crashes=$(find "fuzz/artifacts/$t" -newer "fuzz/artifacts/$t/.start" \( -name 'crash-*' -o -name 'oom-*' \
        -o -name 'timeout-*' -o -name 'leak-*' \) | wc -l)
    if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ]; then
        status=1
        echo "== $t: exit $rc, see $log" >&2
        grep -E "panicked|ERROR|SUMMARY|Test unit written" "$log" | head -5 >&2
    fi
    rows+=("| $t | ${execs:-?} | ${rate:-?} | ${cov:-?} | ${rss:-?} | $crashes (exit $rc) |")
done

echo
echo "fuzz tier: ${secs} s per target, $(rustc --version), cargo-fuzz $(cargo fuzz --version | awk '{print $2}')"
echo "| target | execs | exec/s | cov/ft | peak RSS MB | crashes |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
exit $status
