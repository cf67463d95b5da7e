#!/bin/sh
# Fuzzes every target of tests/fuzz with libFuzzer (tests/fuzz/README.md).
#   sh scripts/fuzz.sh [SECONDS] [TARGET...]
# Builds build-fuzz/ with clang (-DUSCHED_FUZZ=ON: ASan+UBSan, coverage),
# then for each target (default: all): replays its corpus (tests/fuzz/corpus/
# <name>/), then fuzzes for SECONDS (default $FUZZ_SECONDS, else 30; 0 =
# replay only) with the dictionary, new inputs kept in build-fuzz/corpus/
# <name>/ (never written into the repository). A crash, leak, timeout,
# out-of-memory or broken promise stops with exit status 1, names the input
# saved in build-fuzz/artifacts/ and prints it in base64 (so a CI log is
# enough to recover it: base64 -d): fix the bug, then add that input to
# tests/fuzz/corpus/<name>/.
# FUZZ_SEED=N fixes libFuzzer's random seed: the same commit then tries the
# same inputs in the same order (a slower machine stops earlier in the same
# sequence), so what CI's stage finds (FUZZ_SEED=1) a developer finds too,
# with a fresh FUZZ_BUILD. Unset, each run starts from a new seed.
# Needs clang and libclang-rt-14-dev (scripts/deps.sh test).
set -eu
secs=${1:-${FUZZ_SECONDS:-30}}
[ $# -gt 0 ] && shift
case "$secs" in
*[!0-9]* | '') echo "fuzz.sh: seconds '$secs': not a whole number" >&2; exit 2 ;;
esac
seed=
case "${FUZZ_SEED-}" in
'') ;;
*[!0-9]*) echo "fuzz.sh: FUZZ_SEED '$FUZZ_SEED': not a whole number" >&2; exit 2 ;;
*) seed="-seed=$FUZZ_SEED" ;;
esac
here=$(cd "$(dirname "$0")/.." && pwd)
out=${FUZZ_BUILD:-$here/build-fuzz}
sh "$here/scripts/deps.sh" test >/dev/null
CC=clang cmake -S "$here" -B "$out" -DUSCHED_FUZZ=ON -DUSCHED_WERROR=ON \
    -DUSCHED_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$out" -j"${JOBS:-2}" --target fuzz_targets >/dev/null
targets=${*:-$(cd "$here/tests/fuzz" && ls fuzz_*.c | sed 's/^fuzz_//; s/\.c$//')}
mkdir -p "$out/artifacts"
# Options common to every run: inputs up to 4 KiB, 10 s per input at most,
# 2 GiB of memory; UBSan and ASan stop at the first report.
common="-max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=0"
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=detect_leaks=1
export LSAN_OPTIONS=suppressions=$here/tests/fuzz/lsan.supp
for t in $targets; do
    exe=$(find "$out" -name "fuzz_$t" -type f -perm -u+x | head -n 1)
    seeds="$here/tests/fuzz/corpus/$t"
    if [ -z "$exe" ] || [ ! -d "$seeds" ]; then
        echo "fuzz.sh: target '$t': no program or no corpus (tests/fuzz/corpus/$t)" >&2
        exit 2
    fi
    start=$(date +%s)
    # Replay: every corpus input once.
    if ! "$exe" $common -runs=0 -artifact_prefix="$out/artifacts/$t-" "$seeds" \
        >"$out/fuzz_$t.log" 2>&1; then
        echo "fuzz.sh: $t: a corpus input fails:" >&2
        tail -n 30 "$out/fuzz_$t.log" >&2
        exit 1
    fi
    n=$(find "$seeds" -type f | wc -l)
    if [ "$secs" -gt 0 ]; then
        mkdir -p "$out/corpus/$t"
        if ! "$exe" $common $seed -max_total_time="$secs" -dict="$here/tests/fuzz/usched.dict" \
            -close_fd_mask=3 -artifact_prefix="$out/artifacts/$t-" \
            "$out/corpus/$t" "$seeds" >"$out/fuzz_$t.log" 2>&1; then
            echo "fuzz.sh: $t: finding (log: $out/fuzz_$t.log):" >&2
            grep -E "ERROR|SUMMARY|broken promise|runtime error|Test unit written|==[0-9]+==" \
                "$out/fuzz_$t.log" | head -n 20 >&2
            for a in $(sed -n 's/.*Test unit written to //p' "$out/fuzz_$t.log"); do
                echo "fuzz.sh: $t: the input, $(wc -c <"$a") bytes, in base64 (base64 -d to recover):" >&2
                base64 "$a" >&2
            done
            exit 1
        fi
        runs=$(grep -o 'Done [0-9]* runs' "$out/fuzz_$t.log" | tail -n 1)
        cov=$(grep -o 'cov: [0-9]*' "$out/fuzz_$t.log" | tail -n 1)
        echo "fuzz.sh: $t: $n corpus inputs replayed; ${runs:-no runs} in ${secs} s, $cov ($(($(date +%s) - start)) s)"
    else
        echo "fuzz.sh: $t: $n corpus inputs replayed ($(($(date +%s) - start)) s)"
    fi
done
