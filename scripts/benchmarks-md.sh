#!/bin/sh
# Generates BENCHMARKS.md from `usched bench WORKLOAD --policy usched --peers
# --json` runs of every workload: per workload a table of each system's
# median over the runs and its ratio to usched, the machine, and the exact
# commands. Peers must be built first (bench/peers/build.sh DIR, then
# --peers-dir DIR or USCHED_PEERS_DIR, or DIR = the CLI's folder + /peers).
#
# usage: scripts/benchmarks-md.sh [-b USCHED_BINARY] [-o OUTPUT] [-r RUNS]
#                                 [-d SECONDS] [-w 'WORKLOAD ...'] [-- BENCH_ARGS...]
#   -b  the usched CLI (default: build/usched)
#   -o  output file (default: BENCHMARKS.md; '-' for stdout)
#   -r  runs per system (default 5)
#   -d  --duration: length of pairs/select, cap of pingpong/spawn (default 2)
#   -w  workloads (default: all ten)
#   after --, more `usched bench` arguments (e.g. --peers-dir DIR)
set -eu

bin=build/usched
out=BENCHMARKS.md
runs=5
dur=2
workloads="pairs select build fib skynet pingpong yield spawn echo echo100"
usage() {
    sed -n '2,/^set -eu/p' "$0" | sed -e '/^set -eu/d' -e 's/^# \{0,1\}//' >&2
    exit 2
}
while getopts b:o:r:d:w:h opt; do
    case $opt in
    b) bin=$OPTARG ;;
    o) out=$OPTARG ;;
    r) runs=$OPTARG ;;
    d) dur=$OPTARG ;;
    w) workloads=$OPTARG ;;
    *) usage ;;
    esac
done
shift $((OPTIND - 1))
[ "${1:-}" = -- ] && shift
if [ ! -x "$bin" ]; then
    echo "benchmarks-md.sh: usched binary '$bin' not found or not executable (build first, or -b PATH)" >&2
    exit 2
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# medians FILE: one line per system, in order of first appearance:
#   system<TAB>median<TAB>unit<TAB>higher_is_better<TAB>runs<TAB>note<TAB>paired
# paired: the median over runs of usched's advantage over the system in the
# same round (run 1 against run 1, ...), empty when no round has both.
medians() {
    awk '
    # median(a, n): sorts a[1..n] (insertion sort) and returns its median
    function median(a, n,   i, j, t) {
        for (i = 2; i <= n; i++)
            for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    function field(k,   m) {
        if (match($0, "\"" k "\":\"[^\"]*\"")) { m = substr($0, RSTART, RLENGTH); sub("^\"" k "\":\"", "", m); sub("\"$", "", m); return m }
        if (match($0, "\"" k "\":[^,}]*")) { m = substr($0, RSTART, RLENGTH); sub("^\"" k "\":", "", m); return m }
        return ""
    }
    {
        s = field("system")
        if (!(s in seen)) { seen[s] = 1; order[++n] = s }
        unit[s] = field("unit"); hib[s] = field("higher_is_better")
        if (field("skipped") != "") { note[s] = "skipped: " field("skipped"); next }
        if (field("failed") != "") { note[s] = "failed: " field("failed"); next }
        v = field("value")
        if (v != "" && v != "null") { vals[s, ++cnt[s]] = v + 0; byrun[s, field("run")] = v + 0 }
        if (field("run") + 0 > nruns) nruns = field("run") + 0
    }
    END {
        for (i = 1; i <= n; i++) {
            s = order[i]; c = cnt[s] + 0
            split("", sv)
            for (a = 1; a <= c; a++) sv[a] = vals[s, a]
            med = c == 0 ? "" : median(sv, c)
            k = 0
            split("", pr)
            for (r = 1; r <= nruns; r++)
                if (((s, r) in byrun) && (("usched", r) in byrun) && byrun[s, r] > 0 && byrun["usched", r] > 0)
                    pr[++k] = hib[s] == "true" ? byrun["usched", r] / byrun[s, r] : byrun[s, r] / byrun["usched", r]
            paired = k == 0 ? "" : sprintf("%.2fx", median(pr, k))
            printf "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", s, med, unit[s], hib[s], c, note[s], paired
        }
    }' "$1"
}

# table FILE: the markdown table of one workload; appends losses to $tmp/losses
table() {
    medians "$1" | awk -F '\t' -v w="$2" -v losses="$tmp/losses" '
    function fmt(x) { return x >= 100 ? sprintf("%.0f", x) : sprintf("%.2f", x) }
    {
        sys[NR] = $1; med[NR] = $2; unit[NR] = $3; hib[NR] = $4; cnt[NR] = $5; note[NR] = $6; pair[NR] = $7
        if ($1 == "usched" && $2 != "") ref = $2 + 0
    }
    END {
        print "| system | median | unit | usched advantage | paired | runs | note |"
        print "|---|---:|---|---:|---:|---:|---|"
        for (i = 1; i <= NR; i++) {
            if (med[i] == "") { printf "| %s | - | %s | - | - | 0 | %s |\n", sys[i], unit[i], note[i]; continue }
            v = med[i] + 0; r = ""
            if (ref > 0 && v > 0) {
                x = hib[i] == "true" ? ref / v : v / ref
                r = sprintf("%.2fx", x)
                if (sys[i] != "usched" && x < 1) {
                    r = r " (loses)"
                    printf "- %s: %s is %.2fx better than usched (%s vs %s %s)\n", w, sys[i], 1 / x, fmt(v), fmt(ref), unit[i] >> losses
                }
            }
            printf "| %s | %s | %s | %s | %s | %d | %s |\n", sys[i], fmt(v), unit[i], r, pair[i] == "" ? "-" : pair[i], cnt[i], note[i]
        }
    }'
}

# xfer FILE: the cross-CPU probes of one workload's runs (usched bench's
# xfer_ns), as a sentence; nothing when the runs had no probe.
xfer() {
    awk '
    match($0, /"xfer_ns":[0-9.]+/) { x[++n] = substr($0, RSTART + 10, RLENGTH - 10) + 0 }
    END {
        if (!n) exit
        for (a = 2; a <= n; a++)
            for (b = a; b > 1 && x[b - 1] > x[b]; b--) { t = x[b]; x[b] = x[b - 1]; x[b - 1] = t }
        printf "Cross-CPU round trip before each run: min %.0f, median %.0f, max %.0f ns", x[1], x[int((n + 1) / 2)], x[n]
        if (x[n] > 2 * x[1]) printf " (the host moved the CPUs between runs: the paired column compares like runs)"
        print "."
    }' "$1"
}

# load_sentence START END NPROC: what the machine was doing, from the 1-minute
# load averages at start and end: quiet only when both stayed below 0.5.
load_sentence() {
    awk -v s="${1%% *}" -v e="${2%% *}" -v n="$3" 'BEGIN {
        if (s == "unknown" || e == "unknown") {
            print "The load average could not be read, so whether other work shared the machine is unknown."
        } else if (s + 0 >= 0.5 || e + 0 >= 0.5) {
            printf "The machine was not quiet: its 1-minute load average was %s at the start and %s at the\n", s, e
            printf "end, on %d CPUs, so other processes used the CPUs while the benchmark ran. The\n", n
            print "ratios (interleaved runs) hold up better than the absolute numbers."
        } else {
            printf "The machine was quiet: its 1-minute load average was %s at the start and %s at the\n", s, e
            printf "end, on %d CPUs.\n", n
        }
    }'
}

: >"$tmp/losses"
: >"$tmp/body"
load_start=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)
for w in $workloads; do
    cmd="usched bench $w --policy usched --peers --json --runs $runs --duration $dur${*:+ $*}"
    echo "benchmarks-md.sh: $cmd" >&2
    # shellcheck disable=SC2086
    if ! "$bin" bench "$w" --policy usched --peers --json --runs "$runs" --duration "$dur" "$@" >"$tmp/$w.json"; then
        echo "benchmarks-md.sh: '$cmd' failed" >&2
        exit 1
    fi
    {
        echo "## $w"
        echo
        echo '```'
        echo "$cmd"
        echo '```'
        echo
        table "$tmp/$w.json" "$w"
        echo
        x=$(xfer "$tmp/$w.json")
        if [ -n "$x" ]; then echo "$x"; echo; fi
    } >>"$tmp/body"
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)

{
    echo "# usched benchmarks"
    echo
    echo "Generated by \`scripts/benchmarks-md.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "from commit \`$(git rev-parse --short HEAD 2>/dev/null || echo unknown)\`. Do not edit by hand: rerun the script."
    echo
    echo "Each table gives every system's median over $runs runs of one workload"
    echo "(bench/WORKLOADS.md defines the work, identical for usched and the peers), all runs"
    echo "interleaved in one \`usched bench\` invocation. *usched advantage* is how many times"
    echo "usched is better than that system (its time divided by usched's, or usched's"
    echo "throughput divided by its): below 1.00x the system beats usched, marked \"loses\"."
    echo "*paired* is the median of the same ratio taken run by run (usched's run 1 against the"
    echo "system's run 1, made just after it, and so on). On a virtual machine whose host moves"
    echo "its CPUs, the cost of passing a cache line between two CPUs changes by up to 5x from one"
    echo "minute to the next; \`usched bench\` measures it before every run (the cross-CPU round"
    echo "trip under each table), and runs made one after the other mostly saw the same machine."
    echo "pingpong and spawn runs are capped at the --duration (the result is per operation)."
    load_sentence "$load_start" "$load_end" "$(nproc)"
    echo
    echo "## Machine"
    echo
    echo '```'
    echo "nproc: $(nproc)"
    echo "load average (1, 5, 15 min) at start: $load_start; at end: $load_end"
    echo "kernel: $(uname -srm)"
    if command -v lscpu >/dev/null 2>&1; then
        lscpu | grep -E '^(Architecture|Model name|CPU\(s\)|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)|NUMA node\(s\)|L1d|L2|L3|Hypervisor vendor|Virtualization type)' || true
    fi
    echo '```'
    echo
    echo "## Where usched loses"
    echo
    if [ -s "$tmp/losses" ]; then cat "$tmp/losses"; else echo "Nowhere in these runs."; fi
    echo
    cat "$tmp/body"
} >"$tmp/out.md"

if [ "$out" = - ]; then cat "$tmp/out.md"; else cp "$tmp/out.md" "$out" && echo "benchmarks-md.sh: wrote $out" >&2; fi
