#!/bin/sh
# Checks the model of the park/wake protocol (model/park.pml) with SPIN:
# first the protocol as the code has it, in each configuration, which must
# hold; then every mutant (the model with one protective step removed),
# which must give a counterexample. Ends with "model: N of N mutants caught".
#
#   sh model/run.sh [OUTDIR]        (default: a temporary folder)
#   MODEL_FULL=1 sh model/run.sh    adds the configurations too long for CI
#                                   (half an hour or more, up to 12 GB)
#   MODEL_MEMLIM=MB                 memory for one search (default 4096, or
#                                   12288 with MODEL_FULL=1)
#   MODEL_JOBS=N                    searches at once (default: one per CPU,
#                                   or one with MODEL_FULL=1)
#
# Needs spin and a C compiler (scripts/deps.sh test installs spin). Exit
# status: 0 when the protocol holds and every mutant is caught; 1 otherwise;
# 2 when a tool is missing.
set -u
here=$(cd "$(dirname "$0")" && pwd)
for tool in spin "${CC:-cc}"; do
    command -v "$tool" >/dev/null 2>&1 || { echo "model: $tool is not installed (sh scripts/deps.sh test)" >&2; exit 2; }
done
out=${1:-}
if [ -z "$out" ]; then
    out=$(mktemp -d "${TMPDIR:-/tmp}/usched-model.XXXXXX")
    trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out" || exit 1
cp "$here/park.pml" "$out/" || exit 1
cd "$out" || exit 1

# The configurations, one per line: NAME WHEN DEFINES. WHEN is ci (always
# checked), full (with MODEL_FULL=1: too long for CI) or mut (only for a
# mutant, never searched whole: too long even for MODEL_FULL=1).
#   futex:  two workers; fibers that hand work on and finish; no hog, so no
#           monitor
#   hog:    one fiber computes for ever and the monitor is off: the time
#           before the monitor looks, when only the wake-ups bring a parked
#           CPU to work beside the hog
#   cheap:  hog with the cheap-victim rule (steal.c, V1-V4): a thief may
#           leave the queues of a victim running a fiber that is not a
#           hog, and must then not park beside them (V3)
#   chain3: three workers, two hogs, fibers that only spawn, the first fiber
#           queued before the workers start: the chains (SC, P3C) that
#           wake a third CPU for work a woken one leaves behind
#   mon:    one hog and the stall monitor, which looks every period and
#           must itself never sleep while a CPU runs; its looks only where
#           nothing else moves (NEARLY=0: with one more look at any moment
#           the search passed 106 million states without finishing)
#   gq3:    three workers, every kind of hand-off: a burst of pushes on the
#           shared queue all naming one idle CPU (GQK)
#   poll:   the I/O poller, io_poller=percpu: two workers, fibers that
#           spawn once in all and wait on descriptors twice in all (each
#           homed on any CPU, ready some time or never), the first fiber
#           queued before the workers start; no hog
#   pollsh: the same with io_poller=shared: one set, its poller role and
#           the deferral while another CPU spins
#   timer:  the I/O poller (percpu) with one descriptor wait and one
#           sleep: a park waits until the CPU's earliest timer
#   pollx, pollshx: poll and pollsh with every kind of hand-off, two of
#           them
#   pollsho: pollsh with the outside thread and one descriptor wait: a
#           third party to wake a CPU that took the role while another
#           still reads the eventfd (B3)
#   monio:  the stall monitor with the I/O poller (percpu): one hog, one
#           spawn and one descriptor wait; looks only where nothing else
#           moves (NEARLY=0)
#   monsh:  monio with io_poller=shared: a ready event must not wait in the
#           one set for the whole stall when the wakep of the stall's first
#           look missed a CPU in the middle of its park (MSH)
#   montmr: the stall monitor with timers: one hog, one spawn, one sleep
#   monall: the monitor with the poller and timers at once
#   cont:   hog with the contention verdict flipping twice at any moment,
#           one hand-off (contx: two)
#   stop:   futex with shutdown: once no fiber is live, usched_destroy's
#           stop and wake of every worker
#   stopsh: the same with the I/O poller (shared) and one descriptor wait
#   monhold: monio with the busy-victim rule (steal.c, V6-V7) and two
#           spawns: a thief with waiters in its own set may leave a busy
#           victim's queue out of its looks and its P3, and park beside
#           it; never a victim the monitor saw stalled (HLS)
#   contio: monio with the contention verdict: a contended CPU, parking
#           without spinning, still polls once (CP)
#   named:  futex with named fibers: no fiber runs on two workers at once
#           or runs unqueued, no fiber is queued twice, each queue holds
#           the fibers placed there; a thief takes any fiber from a next
#           slot, as the code does (futex: the same without names, in
#           MODEL_FULL=1 only: named checks all it checks)
#   bound:  named with the last fiber bound to CPU 0: it runs only there
#           and is never left beside a parked CPU 0 (a thief that takes
#           it from a next slot sends it home, BST)
#   bmon:   bound with a hog and the monitor (NEARLY=0): the monitor
#           sends a bound fiber in a stalled CPU's inbox back (BMV)
#   bound4: bound with four hand-offs, the third fiber bound: a spawn
#           that displaces a bound fiber from the next slot (BRG)
#   c4:     bound with the contention verdict (one flip) and the monitor
#           (one look at any moment), without a hog, one hand-off, the
#           first fiber queued at the start: the monitor serves a
#           contended CPU awake between fibers (C4) while that CPU parks
#           (BKH)
CONFIGS='
futex   full -DNF=2 -DNHOG=0
named   ci   -DNAMED -DNF=2 -DNHOG=0
bound   ci   -DNAMED -DBOUND -DNF=2 -DNHOG=0
hog     ci   -DNF=2 -DNHOG=1 -DNO_MONITOR
cheap   ci   -DCHEAP -DNF=2 -DNHOG=1 -DNO_MONITOR
chain3  ci   -DN=3 -DNF=2 -DNHOG=2 -DNO_MONITOR -DSPAWNS_ONLY -DNO_OUTSIDE
poll    full -DIO -DNIO=2 -DNF=1 -DNHOG=0 -DSPAWNS_ONLY -DNO_OUTSIDE
pollsh  full -DIO -DIO_SHARED -DNIO=2 -DNF=1 -DNHOG=0 -DSPAWNS_ONLY -DNO_OUTSIDE
timer   full -DIO -DTIMERS -DNT=1 -DNIO=1 -DNF=1 -DNHOG=0 -DSPAWNS_ONLY -DNO_OUTSIDE
mon     full -DNF=2 -DNHOG=1 -DNEARLY=0
gq3     full -DN=3 -DNF=2 -DNHOG=2 -DNO_MONITOR -DNO_OUTSIDE
pollx   full -DIO -DNIO=2 -DNF=2 -DNHOG=0 -DNO_OUTSIDE
pollshx full -DIO -DIO_SHARED -DNIO=2 -DNF=2 -DNHOG=0 -DNO_OUTSIDE
monio   ci   -DIO -DNIO=1 -DNF=1 -DNHOG=1 -DSPAWNS_ONLY -DNO_OUTSIDE -DNEARLY=0
montmr  ci   -DTIMERS -DNT=1 -DNF=1 -DNHOG=1 -DSPAWNS_ONLY -DNO_OUTSIDE -DNEARLY=0
cont    full -DCONTEND -DNF=1 -DNHOG=1 -DNO_MONITOR
stop    full -DSTOP -DNF=2 -DNHOG=0
stopsh  ci   -DIO -DIO_SHARED -DNIO=1 -DNF=1 -DNHOG=0 -DSPAWNS_ONLY -DNO_OUTSIDE -DSTOP
contio  full -DIO -DCONTEND -DNIO=1 -DNF=1 -DNHOG=1 -DSPAWNS_ONLY -DNO_OUTSIDE -DNEARLY=0
pollsho full -DIO -DIO_SHARED -DNIO=1 -DNF=1 -DNHOG=0 -DSPAWNS_ONLY
monall  full -DIO -DTIMERS -DNT=1 -DNIO=1 -DNF=1 -DNHOG=1 -DSPAWNS_ONLY -DNO_OUTSIDE -DNEARLY=0
contx   full -DCONTEND -DNF=2 -DNHOG=1 -DNO_MONITOR
bmon    full -DNAMED -DBOUND -DNF=2 -DNHOG=1 -DNEARLY=0
bound4  mut  -DNAMED -DBOUND -DNF=4 -DBOUNDF=2 -DNHOG=0
c4      ci   -DNAMED -DBOUND -DCONTEND -DC4 -DNF=1 -DNCF=1 -DNHOG=0 -DNO_OUTSIDE -DNEARLY=1
monhold ci   -DIO -DHOLD -DNIO=1 -DNF=2 -DNHOG=1 -DSPAWNS_ONLY -DNO_OUTSIDE -DNEARLY=0
monsh   ci   -DIO -DIO_SHARED -DNIO=1 -DNF=1 -DNHOG=1 -DSPAWNS_ONLY -DNO_OUTSIDE -DNEARLY=0
pack    ci   -DPACK -DNF=1 -DNHOG=1 -DNEARLY=0 -DSPAWNS_ONLY -DNO_OUTSIDE
packb   ci   -DPACK -DNAMED -DBOUND -DNF=1 -DNHOG=1 -DNEARLY=0 -DNO_OUTSIDE
packx   full -DPACK -DNF=2 -DNHOG=1 -DNEARLY=0 -DSPAWNS_ONLY -DNO_OUTSIDE
pack3   mut  -DN=3 -DPACK -DNPF=1 -DNF=1 -DNHOG=1 -DNEARLY=0 -DSPAWNS_ONLY -DNO_OUTSIDE
'
# Configurations where the code as it is today must give a counterexample:
# a lost wake-up the model found (docs/model.md, "What the model found")
# and the code does not fix yet. When the code is fixed, the fix goes into
# the model and the line goes (none now: monsh was one, fixed by MSH).
KNOWN='
'
# Each mutant and the configuration that must catch it: MUTANT CONFIG (the
# longest searches first, so that none is left running alone at the end).
# The configurations marked full are checked whole only with MODEL_FULL=1,
# and bound4 never; their mutants' searches stop at their first
# counterexample.
MUTANTS='
B3  pollsho
CP  contio
MIO monio
HLS monhold
MSH monsh
P2  futex
P3  futex
W2  futex
W3  futex
WP1 hog
WP3 hog
GQW hog
CHV cheap
SC  chain3
P3C chain3
WM  mon
M2  mon
M5  mon
GQK gq3
W3B poll
P3N poll
FDK poll
FD2 poll
UNC pollsh
ROLE pollsh
TMR timer
MT  montmr
C3  cont
STP stop
KIO stopsh
NXC named
BST bound
BMV bmon
BRG bound4
BKH c4
PKS pack
PKU pack
PKW pack3
'
full=${MODEL_FULL:-0}
# Memory for one search (MB): the full configurations need more, and their
# states compressed (COLLAPSE: about a sixth slower, half the memory); the
# CI searches, at most about 10 million states, do without.
memlim=${MODEL_MEMLIM:-$([ "$full" = 1 ] && echo 12288 || echo 4096)}
collapse=$([ "$full" = 1 ] && echo -DCOLLAPSE)

defines_of() { printf '%s\n' "$CONFIGS$KNOWN" | awk -v n="$1" '$1 == n { $1 = $2 = ""; print }'; }
# names NAME-LIST: the configurations of a list that run now
names() { printf '%s\n' "$1" | awk -v full="$full" 'NF && ($2 == "ci" || ($2 == "full" && full == 1)) { print $1 }'; }

# check NAME DEFINES...: runs the full state-space search; prints the
# verdict line; returns 0 when no error was found, 1 when one was, 2 when
# the search could not run
check() {
    name=$1
    shift
    t0=$(date +%s)
    # shellcheck disable=SC2068
    if ! spin -a $@ park.pml >"$name.spin" 2>&1; then
        echo "model: $name: spin failed:"; cat "$name.spin"; return 2
    fi
    # shellcheck disable=SC2086
    if ! "${CC:-cc}" "$opt" -DSAFETY $collapse -DMEMLIM="$memlim" -w -o "pan_$name" pan.c >"$name.cc" 2>&1; then
        echo "model: $name: the verifier did not build:"; cat "$name.cc"; return 2
    fi
    # shellcheck disable=SC2086
    "./pan_$name" -m1000000 $panw >"$name.pan" 2>&1
    errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$name.pan")
    states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' "$name.pan")
    if [ -z "$errors" ]; then
        echo "model: $name: the search did not finish:"; tail -5 "$name.pan"; return 2
    fi
    secs=$(($(date +%s) - t0))
    # (a search that found an error stops there: "not completed" is then expected)
    if [ "$errors" -eq 0 ] && grep -qi "search not completed\|max search depth too small" "$name.pan"; then
        echo "model: $name: the search was cut short:"; grep -i "search not completed\|max search depth\|memlim" "$name.pan"; return 2
    fi
    echo "$name: $states states, ${secs}s, errors: $errors"
    [ "$errors" -eq 0 ]
}

# job KIND NAME CONFIG: one search (KIND: holds, known or mutant) in the
# folder NAME (spin and pan write their files beside the model), its verdict
# line into NAME.log and check's status into NAME.rc
job() {
    # a mutant's search stops at its first counterexample, mostly within a
    # million states: the compiler's time, not the search's, counts there
    # (and a smaller hash table, 2^21 slots, quicker to set up)
    mut='' opt=-O2 panw=''
    [ "$1" = mutant ] && mut=-DMUT_${2#mut_} opt=-O0 panw=-w21
    if ! { mkdir -p "$2" && cp park.pml "$2/"; }; then
        echo 2 >"$2.rc"
        return
    fi
    # shellcheck disable=SC2046,SC2086
    (cd "$2" && check "$2" $mut $(defines_of "$3")) >"$2.log" 2>&1
    echo $? >"$2.rc"
}

# The searches, in the order their verdicts are printed: KIND NAME CONFIG.
list=$(
    for cfg in $(names "$CONFIGS"); do echo "holds $cfg $cfg"; done
    for cfg in $(names "$KNOWN"); do echo "known $cfg $cfg"; done
    printf '%s\n' "$MUTANTS" | awk 'NF { print "mutant mut_" $1, $2 }'
)
# verdict KIND NAME CONFIG: prints a finished search's verdict; counts
verdict() {
    cat "$2.log"
    rc=$(cat "$2.rc")
    case $1 in
    holds)
        if [ "$rc" -eq 0 ]; then
            echo "model: the protocol holds ($3)"
        else
            echo "model: FAILED: the protocol breaks in configuration $3 (trail: spin -t -p $(defines_of "$3") park.pml in $out/$3)"
            fail=1
        fi ;;
    known)
        if [ "$rc" -eq 1 ]; then
            echo "model: the known lost wake-up is found ($3)"
        else
            echo "model: FAILED: configuration $3 no longer finds the known lost wake-up (docs/model.md)"
            fail=1
        fi ;;
    mutant)
        n=$((n + 1))
        if [ "$rc" -eq 1 ]; then
            caught=$((caught + 1))
            echo "model: mutant ${2#mut_} (configuration $3): caught"
        else
            echo "model: FAILED: mutant ${2#mut_} (configuration $3) gives no counterexample"
            fail=1
        fi ;;
    esac
}

# Searches at once: one per CPU; one with MODEL_FULL=1, whose searches each
# take gigabytes (MODEL_JOBS sets it). A search starts as soon as one ends
# (a token in a FIFO for each free place); the verdicts are printed in
# order once every search has ended.
jobs=${MODEL_JOBS:-$([ "$full" = 1 ] && echo 1 || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)}
fail=0 n=0 caught=0
mkfifo .tokens || exit 1
exec 3<>.tokens
rm -f .tokens
i=0
while [ "$i" -lt "$jobs" ]; do echo >&3; i=$((i + 1)); done
while read -r kind name cfg; do
    read -r _ <&3
    { job "$kind" "$name" "$cfg"; echo >&3; } </dev/null &
done <<EOF
$list
EOF
wait
exec 3>&-
while read -r kind name cfg; do
    [ -n "$kind" ] && verdict "$kind" "$name" "$cfg"
done <<EOF
$list
EOF
echo "model: $caught of $n mutants caught"
exit "$fail"
