#!/bin/sh
# Checks the dependency rule between the layers (docs/architecture.md) on the
# compiled objects, where a hand-written prototype cannot hide a call: every
# symbol an object of one area uses (nm's undefined symbols) and another area
# defines must be defined in an area it may use.
#
#   sh scripts/check-calls.sh RULES_SCRIPT KNOWN OBJECT...
#
# RULES_SCRIPT is scripts/check-includes.sh, whose RULES table this script
# reads so that includes and calls follow one table. KNOWN lists the crossings
# that are known to break the rule, one per line: "FROM TO SYMBOL  # why";
# each must still exist (a crossing that is gone must leave the list, so it
# only shrinks) and nothing else may break the rule. An object's area is the
# folder under src/ in its path (CMake keeps the source path:
# .../usched_obj.dir/src/core/sched.c.o). Public symbols (usched_ followed by
# a letter: the API of include/) may be used by every area.
# Exit status: 0 the rule holds; 1 it is broken; 2 bad usage.
set -eu

if [ $# -lt 3 ]; then
    echo "usage: check-calls.sh RULES_SCRIPT KNOWN OBJECT..." >&2
    exit 2
fi
rules_script=$1 known=$2
shift 2
for f in "$rules_script" "$known"; do
    if [ ! -f "$f" ]; then
        echo "check-calls: '$f' is not a file" >&2
        exit 2
    fi
done
command -v nm >/dev/null 2>&1 || { echo "check-calls: nm (binutils) is not installed" >&2; exit 2; }

# The RULES table of check-includes.sh: "area: areas it may use".
rules=$(sed -n "/^RULES='/,/^'/p" "$rules_script" | sed '1d;$d')
[ -n "$rules" ] || { echo "check-calls: no RULES table in '$rules_script'" >&2; exit 2; }

syms=$(mktemp)
trap 'rm -f "$syms"' EXIT
n=0
for o in "$@"; do
    case $o in
        */src/*/*) p=${o##*/src/}; area=${p%%/*} ;;
        *) echo "check-calls: '$o' is not an object of a src/ area (no /src/AREA/ in its path)" >&2; exit 2 ;;
    esac
    [ -f "$o" ] || { echo "check-calls: object '$o' does not exist (build the library first)" >&2; exit 2; }
    # D name area file | U name area file
    nm "$o" | awk -v a="$area" -v f="src/${p%.o}" '
        $1 == "U" { print "U", $2, a, f; next }
        NF == 3 && $2 ~ /^[TDBRVWCG]$/ { print "D", $3, a, f }' >>"$syms"
    n=$((n + 1))
done

printf '%s\n' "$rules" | awk -v known="$known" -v syms="$syms" '
    BEGIN {
        while ((getline line < known) > 0) {
            sub(/#.*/, "", line)
            if (split(line, k, " ") < 3) continue
            listed[k[1] " " k[2] " " k[3]] = 1
        }
        while ((getline line < syms) > 0) {
            split(line, x, " ")
            if (x[1] == "D") { def[x[2]] = x[3]; deffile[x[2]] = x[4] }
            else { nu++; un[nu] = x[2]; ua[nu] = x[3]; uf[nu] = x[4] }
        }
    }
    { a = $1; sub(/:$/, "", a); may[a] = " " a " "; for (i = 2; i <= NF; i++) may[a] = may[a] $i " " }
    END {
        bad = 0
        for (i = 1; i <= nu; i++) {
            s = un[i]; from = ua[i]
            if (!(s in def)) continue                  # libc, hwloc, ...
            to = def[s]
            if (to == from || s ~ /^usched_[a-z]/) continue
            if (index(may[from], " " to " ")) continue
            key = from " " to " " s
            if (key in listed) { seen[key] = 1; continue }
            printf "%s: uses %s (%s, %s): %s may not call %s; %s may use:%s\n", \
                uf[i], s, deffile[s], to, from, to, from, may[from] == "" ? " nothing" : substr(may[from], length(from) + 2)
            bad++
        }
        for (key in listed) if (!(key in seen)) {
            printf "%s: \"%s\" is listed as a known crossing but no object makes it any more: take it off the list\n", known, key
            bad++
        }
        nk = 0; for (key in seen) nk++
        if (bad) { printf "check-calls: %d crossing(s) break the dependency rule (docs/architecture.md)\n", bad > "/dev/stderr"; exit 1 }
        printf "check-calls: every call between areas follows the dependency rule (%d known crossing(s) listed in %s)\n", nk, known
    }' || exit 1
echo "check-calls: $n objects read"
