#!/bin/sh
# Generates BENCHMARKS.md from `usched bench WORKLOAD --policy usched --peers
# --json` runs of every workload: per workload (and per point of the network
# workloads' sweeps) a table of each system's median over the runs and its
# ratio to usched, the machine, the builds compared, every loss, and the
# exact commands. usched runs in a fresh process per run (--fresh), as the
# peers do, except in the network workloads, whose usched server runs in the
# bench process (their clients and the other servers are processes of their
# own). Peers must be built first (bench/peers/build.sh DIR, then --peers-dir
# DIR or USCHED_PEERS_DIR, or DIR = the CLI's folder + /peers).
#
# Everything from the line "<!-- generated part ends -->" of the old OUTPUT
# on (hand-written sections) is kept, after the generated part.
#
# usage: scripts/benchmarks-md.sh [-b USCHED_BINARY] [-o OUTPUT] [-r RUNS]
#                                 [-d SECONDS] [-w 'WORKLOAD ...'] [-W] [-u MS] [-- BENCH_ARGS...]
#   -b  the usched CLI (default: build/usched)
#   -o  output file (default: BENCHMARKS.md; '-' for stdout)
#   -r  runs per system (default 5)
#   -d  --duration: length of pairs/select and of a network run, cap of
#       pingpong/spawn (default 2; whole seconds: wrk takes no fractions)
#   -w  workloads (default: all, with the variants below); a workload may
#       carry its own arguments after a colon, comma-separated:
#       'fib:--n,32,--cutoff,4'
#   -W  run usched inside the bench process (no --fresh)
#   -u  --warmup: ms every CPU spins before each run (default 300; a virtual
#       machine's CPU that idled runs slower for a few hundred ms; 0: none)
#   after --, more `usched bench` arguments (e.g. --peers-dir DIR)
set -eu

bin=build/usched
out=BENCHMARKS.md
runs=5
dur=2
# fib with the spawn-bound cutoff beside the default; spawn, skynet and fib
# with every child run as a fiber (--no-inline) beside the inline joins, and
# spawn with usched_spawn_call (--call), OpenMP's rule
workloads="pairs select build fib fib:--n,32,--cutoff,4 fib:--n,32,--cutoff,4,--no-inline skynet
           skynet:--no-inline pingpong yield spawn spawn:--no-inline spawn:--call echo echo100 tbench pgbench
           redis http"
fresh=--fresh
warmup=300
usage() {
    sed -n '2,/^set -eu/p' "$0" | sed -e '/^set -eu/d' -e 's/^# \{0,1\}//' >&2
    exit 2
}
while getopts b:o:r:d:w:Wu:h opt; do
    case $opt in
    b) bin=$OPTARG ;;
    o) out=$OPTARG ;;
    r) runs=$OPTARG ;;
    d) dur=$OPTARG ;;
    w) workloads=$OPTARG ;;
    W) fresh="" ;;
    u) warmup=$OPTARG ;;
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
        if (field("spawns") != "") { spawns[s] += field("spawns"); inl[s] += field("joins_inline") }
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
            joins = spawns[s] > 0 ? sprintf("%.1f%% of %.0f children joined inline", 100 * inl[s] / spawns[s], spawns[s] / (c ? c : 1)) : ""
            printf "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", s, med, unit[s], hib[s], c, note[s], paired, joins
        }
    }' "$1"
}

# table FILE NAME JOINS: the markdown table of one workload; appends losses
# to $tmp/losses. JOINS 1: usched's note gives the share of its children
# joined inline (joins_inline over spawns, per run).
table() {
    medians "$1" | awk -F '\t' -v w="$2" -v joins="${3:-0}" -v losses="$tmp/losses" '
    function fmt(x) { return x >= 100 ? sprintf("%.0f", x) : sprintf("%.2f", x) }
    {
        sys[NR] = $1; med[NR] = $2; unit[NR] = $3; hib[NR] = $4; cnt[NR] = $5; note[NR] = $6; pair[NR] = $7
        if (joins && $8 != "") note[NR] = note[NR] (note[NR] == "" ? "" : "; ") $8
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

# sample_others N: appends N samples, 0.1 s apart, of how many processes other
# than the sampler itself were running or runnable (/proc/stat's
# procs_running, less the sampling shell) to $tmp/others. Taken before the first
# workload and after each (so between workloads and after the last), when no
# process of the benchmark runs: the load average cannot say this, as its
# last minute counts the benchmark's own processes.
sample_others() {
    j=0
    while [ "$j" -lt "$1" ]; do
        # read and echo are built in: the shell is the one running sampler
        if [ -r /proc/stat ]; then
            while read -r key val rest; do
                [ "$key" = procs_running ] && echo $((val - 1)) >>"$tmp/others"
            done </proc/stat
        fi
        j=$((j + 1))
        sleep 0.1
    done
}

# load_sentence NPROC: what else the machine was doing, from $tmp/others:
# quiet when other processes averaged below 0.25 runnable and never more than
# one; heavily loaded when they averaged NPROC or more.
load_sentence() {
    awk -v n="$1" '
    { sum += $1; if ($1 > max) max = $1; cnt++ }
    END {
        if (cnt == 0) {
            print "Whether other work shared the machine is unknown (/proc/stat could not be read)."
            exit
        }
        m = sum / cnt
        printf "Processes other than the benchmark, sampled %d times before, between and after the\n", cnt
        printf "workloads (procs_running in /proc/stat), averaged %.2f running or runnable, at most %d,\n", m, max
        if (m >= n) {
            printf "on %d CPUs: the machine was heavily loaded. Absolute numbers are many times those of a\n", n
            print "quiet machine (the cross-CPU round trip under each table shows how much the CPUs were"
            print "shared), the ratios move by tens of percent from one run to the next, and a ratio within"
            print "1.5x of 1.00x is not a finding."
        } else if (m >= 0.25 || max > 1) {
            printf "on %d CPUs: the machine was not quiet, and other processes used the CPUs while the\n", n
            print "benchmark ran. The ratios (interleaved runs) hold up better than the absolute numbers."
        } else {
            printf "on %d CPUs: the machine was quiet.\n", n
        }
    }' "$tmp/others"
}

# points FILE: splits a network workload's --json lines by sweep point into
# FILE.1, FILE.2, ... (in order) and prints "N<TAB>the point's words" per point
points() {
    awk -v base="$1" '
    function field(k,   m) {
        if (match($0, "\"" k "\":\"[^\"]*\"")) { m = substr($0, RSTART, RLENGTH); sub("^\"" k "\":\"", "", m); sub("\"$", "", m); return m }
        if (match($0, "\"" k "\":[^,}]*")) { m = substr($0, RSTART, RLENGTH); sub("^\"" k "\":", "", m); return m }
        return ""
    }
    {
        c = field("clients")
        p = c " client" (c == 1 ? "" : "s")
        if (field("pipeline") != "") p = p ", pipeline " field("pipeline")
        if (field("script") != "") p = p ", " field("script")
        p = p ", " field("layout")
        if (!(p in idx)) { idx[p] = ++n; print n "\t" p }
        print > (base "." idx[p])
    }' "$1"
}

# builds PEERS_DIR: the "Builds" section: how usched and each peer were built
# and linked, read from the CLI's CMakeCache.txt, build.sh's log and ldd
builds() {
    cache=$(dirname "$bin")/CMakeCache.txt
    dyn() { ldd "$1" 2>/dev/null | awk '$1 !~ /^(linux-vdso|\/lib64\/ld-linux)/ { printf "%s%s", sep, $1; sep = ", " }'; }
    echo "| system | built with | linkage |"
    echo "|---|---|---|"
    if [ -f "$cache" ]; then
        type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$cache")
        tflags=$(sed -n "s/^CMAKE_C_FLAGS_$(echo "$type" | tr '[:lower:]' '[:upper:]'):[A-Z]*=//p" "$cache")
        cflags=$(sed -n 's/^CMAKE_C_FLAGS:[A-Z]*=//p' "$cache")
        cc=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$cache")
        lto=$(sed -n 's/^USCHED_LTO:[A-Z]*=//p' "$cache")
        ccv=$("$cc" --version 2>/dev/null | head -n 1)
        echo "| usched | CMake $type: \`$cc $cflags $tflags\` ($ccv), USCHED_LTO=$lto (link-time optimisation of library and CLI with GCC) | libusched linked statically into the CLI; dynamic: $(dyn "$bin") |"
    else
        echo "| usched | unknown (no CMakeCache.txt beside $bin) | dynamic: $(dyn "$bin") |"
    fi
    for p in "$1"/peer-*; do
        [ -x "$p" ] || continue
        name=${p##*/peer-}
        cmd=$(grep "^== $name: " "$1/build.log" 2>/dev/null | tail -n 1 | sed -e "s/^== $name: //" -e "s|$root/||g" -e "s|$1/||g")
        case $name in
        go | goserve) how="Go $(go version 2>/dev/null | awk '{print $3}'), \`go build\` (gc's defaults)" ;;
        tokio) how="\`cargo build --release\` (opt-level 3, $(rustc --version 2>/dev/null || echo rustc))" ;;
        *) how=${cmd:+\`$cmd\`} ;;
        esac
        d=$(dyn "$p")
        echo "| $name | ${how:-unknown (built by CMake)} | ${d:-static} |"
    done
}

root=$(pwd)
peers_dir=${USCHED_PEERS_DIR:-$(dirname "$bin")/peers}
prev=""
for a in "$@"; do
    [ "$prev" = --peers-dir ] && peers_dir=$a
    case $a in --peers-dir=*) peers_dir=${a#--peers-dir=} ;; esac
    prev=$a
done

: >"$tmp/losses"
: >"$tmp/body"
: >"$tmp/others"
load_start=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)
sample_others 10
i=0
for spec in $workloads; do
    i=$((i + 1))
    w=${spec%%:*}
    extra=""
    case $spec in *:*) extra=$(echo "${spec#*:}" | tr ',' ' ') ;; esac
    net=0
    case $w in tbench | pgbench | redis | http) net=1 ;; esac
    f=$fresh
    [ $net = 1 ] && f=""
    title="$w${extra:+ $extra}"
    cmd="usched bench $title --policy usched --peers --json --runs $runs --duration $dur --warmup $warmup${f:+ $f}${*:+ $*}"
    echo "benchmarks-md.sh: $cmd" >&2
    # shellcheck disable=SC2086
    if ! "$bin" bench "$w" $extra --policy usched --peers --json --runs "$runs" --duration "$dur" --warmup "$warmup" $f "$@" >"$tmp/$i.json"; then
        echo "benchmarks-md.sh: '$cmd' failed" >&2
        exit 1
    fi
    sample_others 5
    joins=0
    case $w in fib | skynet | spawn) joins=1 ;; esac
    {
        echo "## $title"
        echo
        echo '```'
        echo "$cmd"
        echo '```'
        echo
        if [ $net = 1 ]; then
            echo "usched's server runs in the bench process; the client, the Go peer and the"
            echo "real server are processes of their own. One table per point of the sweep."
            echo
            points "$tmp/$i.json" >"$tmp/$i.points"
            while IFS="$(printf '\t')" read -r k point; do
                echo "### $w: $point"
                echo
                table "$tmp/$i.json.$k" "$w, $point" 0
                echo
            done <"$tmp/$i.points"
        else
            if [ -n "$f" ]; then
                echo "usched ran in a fresh process per run (\`--fresh\`), as every peer does."
            else
                echo "usched ran inside the bench process, the peers as fresh processes."
            fi
            echo
            table "$tmp/$i.json" "$title" $joins
            echo
        fi
        x=$(xfer "$tmp/$i.json")
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
    echo "In spawn, skynet and fib, usched's note gives the share of its children that a join ran"
    echo "inline, on the joiner's stack, because they had not started (\`joins_inline\` over"
    echo "\`spawns\`; oneTBB and OpenMP run most tasks that way too, Go, Tokio and Boost.Fiber never);"
    echo "the \`--no-inline\` tables run every child as a fiber (bench/WORKLOADS.md). fib with the"
    echo "default cutoff (12) spends most of its time in serial leaves, code compiled by gcc on one"
    echo "side and by Go's gc on the other; the \`--cutoff 4\` tables are the spawn-bound case."
    load_sentence "$(nproc)"
    echo
    echo "## Machine"
    echo
    echo '```'
    echo "nproc: $(nproc)"
    echo "load average (1, 5, 15 min) at start: $load_start; at end: $load_end (the benchmark's own included)"
    echo "kernel: $(uname -srm)"
    if command -v lscpu >/dev/null 2>&1; then
        lscpu | grep -E '^(Architecture|Model name|CPU\(s\)|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)|NUMA node\(s\)|L1d|L2|L3|Hypervisor vendor|Virtualization type)' || true
    fi
    echo '```'
    echo
    echo "## Builds"
    echo
    builds "$peers_dir"
    echo
    echo "## Where usched loses"
    echo
    echo "In every table of this run below, the network points included, by the medians (the"
    echo "sections after the generated ones are earlier, separate runs, each with its own findings):"
    echo
    if [ -s "$tmp/losses" ]; then cat "$tmp/losses"; else echo "Nowhere in these runs."; fi
    echo
    cat "$tmp/body"
    echo "<!-- generated part ends -->"
    # the hand-written sections of the old file
    if [ "$out" != - ] && [ -f "$out" ]; then sed -n '/^<!-- generated part ends -->$/,$p' "$out" | sed 1d; fi
} >"$tmp/out.md"

if [ "$out" = - ]; then cat "$tmp/out.md"; else cp "$tmp/out.md" "$out" && echo "benchmarks-md.sh: wrote $out" >&2; fi
