#!/bin/sh
# The benchmark paths the test suite does not run, at smoke size, every
# result checked (.ci/run's stage "bench"):
#   1. scripts/deps-peers.sh: the peers' toolchains and the real clients and
#      servers from Debian (dbench, PostgreSQL 15, redis, wrk, nginx)
#   2. the CLI, Release with -Werror, in BUILD (default build-ci-bench)
#   3. bench/peers/build.sh BUILD/peers: every peer must build (pthreads,
#      omp, tbb, boostfiber, go, goserve, tokio); a skipped one fails
#   4. bench/peers/run-all.sh: every peer on every workload it supports
#      (the table of bench/peers/README.md) must pass its own check; one it
#      does not support must answer "unsupported" (exit 3), nothing else
#   5. `usched bench W --policy usched --peers --json --runs 1 --duration 1`
#      (tbench: 2 s, a 1-s run reports 0 MB/sec) for the
#      network workloads (tbench, pgbench select-only and tpcb-like, redis,
#      http: usched's servers, the Go server peer, tbench_srv, PostgreSQL
#      after initdb and pgbench -i, redis-server, nginx), echo and echo100
#      (usched, pthreads, go, tokio) and fib with --cutoff on its peers:
#      each system named must give a non-zero figure in every run, none may
#      fail, and only the skips listed here are allowed (a peer that lacks
#      the workload; tpcb-like is usched's alone). usched bench itself exits
#      non-zero when usched's run fails, e.g. when tpcb-like's balances
#      (abalance, tbalance, bbalance, history delta) disagree after a run.
# Prints one line per check and a summary; exits 1 if any check failed.
#
#   scripts/ci-bench.sh [BUILD]
set -u
cd "$(dirname "$0")/.." || exit 1
build=${1:-build-ci-bench}
peers=$build/peers
failures=0
summary=""

note() {
    summary="$summary$1
"
    echo "ci-bench: $1"
}
pass() { note "ok      $1"; }
fail() {
    note "FAILED  $1"
    failures=$((failures + 1))
}
# step NAME CMD...: runs CMD, passes or fails NAME by its exit status
step() {
    name=$1
    shift
    echo "ci-bench: == $name: $*"
    if "$@"; then pass "$name"; else fail "$name (exit $?)"; fi
}

# ---- 1-3: packages, CLI, peers ----------------------------------------------------------
step "deps-peers.sh" sh scripts/deps-peers.sh
step "deps.sh" sh scripts/deps.sh
step "configure $build" cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DUSCHED_WERROR=ON
step "build the CLI" cmake --build "$build" -j2 --target usched_cli
bin=$build/usched
[ -x "$bin" ] || { fail "no CLI at $bin"; printf '%s' "$summary"; exit 1; }

echo "ci-bench: == bench/peers/build.sh $peers"
bench/peers/build.sh "$peers" >"$build/peers-build.out" 2>&1
rc=$?
cat "$build/peers-build.out"
skipped=$(sed -n 's/^peers skipped: *//p' "$build/peers-build.out")
if [ $rc -ne 0 ]; then
    fail "bench/peers/build.sh (exit $rc; log $peers/build.log)"
elif [ "$skipped" != none ]; then
    fail "bench/peers/build.sh: skipped $skipped (every peer must build in CI)"
else
    pass "bench/peers/build.sh: $(sed -n 's/^peers built: *//p' "$build/peers-build.out")"
fi

# ---- 4: every peer on every workload it supports ----------------------------------------
# bench/peers/README.md's table; run-all.sh runs the eight in-memory workloads
supports() {
    case $1 in
    pthreads)   echo "pingpong spawn pairs select build yield" ;;
    go)         echo "pingpong spawn skynet fib pairs select build yield" ;;
    tbb | omp)  echo "fib spawn skynet" ;;
    boostfiber) echo "pingpong pairs skynet yield" ;;
    tokio)      echo "pingpong pairs spawn skynet yield" ;;
    esac
}
PEERS="pthreads go tbb omp boostfiber tokio"
echo "ci-bench: == bench/peers/run-all.sh $peers"
bench/peers/run-all.sh "$peers" >"$build/run-all.out" 2>&1
rc=$?
cat "$build/run-all.out"
for p in $PEERS; do
    if [ ! -x "$peers/peer-$p" ]; then
        fail "peer $p: not built"
        continue
    fi
    bad=""
    for w in pingpong spawn skynet fib pairs select build yield; do
        case " $(supports "$p") " in
        *" $w "*) grep -q "^RESULT workload=$w system=$p .*check=ok " "$build/run-all.out" || bad="$bad $w(no passing result)" ;;
        *) grep -q "^skipped: peer-$p $w " "$build/run-all.out" || bad="$bad $w(not answered as unsupported)" ;;
        esac
    done
    if [ -n "$bad" ]; then fail "peer $p:$bad"; else pass "peer $p: $(supports "$p")"; fi
done
[ $rc -eq 0 ] || fail "bench/peers/run-all.sh (exit $rc): $(tail -n 1 "$build/run-all.out")"

# ---- 5: usched bench with the real servers and the peers --------------------------------
# field NAME LINE: a JSON field's value (string or number) in one --json line
field() {
    printf '%s\n' "$2" | sed -n "s/.*\"$1\":\"\\{0,1\\}\\([^\",}]*\\).*/\\1/p"
}

# bench NAME 'SYSTEMS' 'SKIPPED' ARGS...: runs usched bench ARGS --json; each
# of SYSTEMS must have a non-zero value in every line of it; systems in
# SKIPPED must be skipped; any other system, a failure or a skip fails.
bench() {
    name=$1 want=$2 skip=$3
    shift 3
    out=$build/bench-$(echo "$name" | tr ' /' '__').json
    echo "ci-bench: == usched bench $*"
    t0=$(date +%s)
    "$bin" bench --policy usched --json --runs 1 --duration 1 --peers --peers-dir "$peers" "$@" >"$out" 2>"$out.err"
    rc=$?
    secs=$(($(date +%s) - t0))
    cat "$out.err" >&2
    bad=""
    [ $rc -eq 0 ] || bad="$bad usched bench exit $rc ($(tail -n 1 "$out.err"));"
    for s in $want; do
        n=0
        while IFS= read -r line; do
            [ "$(field system "$line")" = "$s" ] || continue
            n=$((n + 1))
            v=$(field value "$line")
            f=$(field failed "$line")
            k=$(field skipped "$line")
            if [ -n "$f" ] || [ -n "$k" ]; then
                bad="$bad $s ${f:+failed: $f}${k:+skipped: $k};"
            elif ! awk -v v="$v" 'BEGIN { exit !(v + 0 > 0) }'; then
                bad="$bad $s value '$v';"
            fi
        done <"$out"
        [ $n -gt 0 ] || bad="$bad $s: no result;"
    done
    for s in $skip; do
        grep "\"system\":\"$s\"" "$out" | grep -q '"skipped":' || bad="$bad $s: expected a skip;"
    done
    others=$(sed -n 's/.*"system":"\([^"]*\)".*/\1/p' "$out" | sort -u)
    for s in $others; do
        case " $want $skip " in *" $s "*) ;; *) bad="$bad $s: not expected here;" ;; esac
    done
    lines=$(grep -c . "$out")
    if [ -n "$bad" ]; then
        fail "bench $name ($lines runs, ${secs}s):$bad"
    else
        pass "bench $name ($lines runs, ${secs}s): $want"
    fi
}

# tbench reports 0 MB/sec for a 1-second run (its warm-up): 2 seconds
bench "tbench" "usched go tbench_srv" "" tbench --clients 2 --duration 2
bench "pgbench select-only" "usched go postgres" "" pgbench --clients 2
bench "pgbench tpcb-like" "usched" "go postgres" pgbench --script tpcb-like --clients 2 --layout unpinned
bench "redis" "usched go redis-server" "" redis --clients 10 --pipeline 1
bench "http" "usched go nginx" "" http --clients 10
bench "echo" "usched pthreads go tokio" "tbb omp boostfiber" echo
bench "echo100" "usched pthreads go tokio" "tbb omp boostfiber" echo100
bench "fib --cutoff 6" "usched go tbb omp" "pthreads boostfiber tokio" fib --n 24 --cutoff 6
bench "skynet --no-inline" "usched go tbb omp boostfiber tokio" "pthreads" skynet --n 10000 --no-inline

echo "==== ci-bench summary"
printf '%s' "$summary"
if [ $failures -ne 0 ]; then
    echo "ci-bench: $failures check(s) FAILED"
    exit 1
fi
echo "ci-bench: all checks passed"
