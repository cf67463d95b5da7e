#!/bin/sh
# Checks the floors of the core (docs/architecture.md, "The floors of the
# core"): the rooms (files) of src/core stand on floors, and a room calls and
# includes rooms on its own floor or below, never above.
#
#   sh scripts/check-floors.sh TABLE KNOWN REPOSITORY OBJECT...
#
# TABLE is scripts/core-floors.txt: one line a floor, its number and then the
# files on it; every .c and .h file of REPOSITORY/src/core must be in it once,
# and every file it names must exist. Three checks:
#   calls     every symbol an object of src/core uses (nm's undefined symbols)
#             and another file of src/core defines must be defined on the
#             caller's floor or below. An object's file is its path after
#             /src/core/ (CMake keeps the source path:
#             .../usched_obj.dir/src/core/sched.c.o); objects of the other
#             areas are read past (scripts/check-calls.sh checks those).
#   includes  every #include of a file of src/core that names a header of
#             src/core ("core/x.h", <core/x.h>, "x.h", "../core/x.h") must name
#             one on the including file's floor or below: a header's inline
#             functions are calls into its room that nm does not see.
#   circles   no files of src/core call each other in a circle (nm's calls,
#             directly or through other files), even on one floor.
# KNOWN lists the exceptions, one per line, with the reason after a '#':
#   call FROM TO SYMBOL       an upward call (FROM and TO: file names, sched.c)
#   include FROM HEADER       an upward include
#   circle FILE FILE...       a circle, its files in any order
# Each must still exist (one that is gone must leave the list, so it only
# shrinks) and nothing else may break the rule.
# Exit status: 0 the rule holds; 1 it is broken; 2 bad usage.
set -eu

if [ $# -lt 4 ]; then
    echo "usage: check-floors.sh TABLE KNOWN REPOSITORY OBJECT..." >&2
    exit 2
fi
table=$1 known=$2 root=$3
shift 3
for f in "$table" "$known"; do
    if [ ! -f "$f" ]; then
        echo "check-floors: '$f' is not a file" >&2
        exit 2
    fi
done
if [ ! -d "$root/src/core" ]; then
    echo "check-floors: '$root' has no src/core/ folder (give the repository's root)" >&2
    exit 2
fi
command -v nm >/dev/null 2>&1 || { echo "check-floors: nm (binutils) is not installed" >&2; exit 2; }
# read from the repository's root below: absolute, named as given
table_name=$table known_name=$known
table=$(cd "$(dirname "$table")" && pwd)/$(basename "$table")
known=$(cd "$(dirname "$known")" && pwd)/$(basename "$known")

. "$(dirname "$0")/paths.sh" # normalise

# One record a line:
#   F FILE               a file of src/core
#   D SYMBOL FILE        FILE's object defines SYMBOL
#   U SYMBOL FILE        FILE's object uses SYMBOL
#   I FILE LINE HEADER   FILE includes HEADER of src/core at LINE
recs=$(mktemp)
trap 'rm -f "$recs"' EXIT
n=0
for o in "$@"; do
    case $o in
        */src/core/*) file=${o##*/src/core/}; file=${file%.o} ;;
        */src/*/*) continue ;;
        *) echo "check-floors: '$o' is not an object of a src/ area (no /src/AREA/ in its path)" >&2; exit 2 ;;
    esac
    [ -f "$o" ] || { echo "check-floors: object '$o' does not exist (build the library first)" >&2; exit 2; }
    nm "$o" | awk -v f="$file" '
        $1 == "U" { print "U", $2, f; next }
        NF == 3 && $2 ~ /^[TDBRVWCG]$/ { print "D", $3, f }' >>"$recs"
    n=$((n + 1))
done

cd "$root"
files=$(find src/core -maxdepth 1 -type f \( -name '*.c' -o -name '*.h' \) | sort)
for f in $files; do
    echo "F ${f#src/core/}" >>"$recs"
    # one line an include: NUMBER q|a PATH (q: "...", a: <...>)
    awk '/^[ \t]*#[ \t]*include[ \t]*["<]/ {
        l = $0; sub(/^[^"<]*/, "", l); k = substr(l, 1, 1) == "\"" ? "q" : "a"
        l = substr(l, 2); sub(/[">].*/, "", l); print FNR, k, l }' "$f" |
    while read -r no kind inc; do
        if [ "$kind" = q ]; then cands="src/core/$inc src/$inc include/$inc"; else cands="include/$inc src/$inc"; fi
        for cand in $cands; do
            [ -f "$cand" ] || continue
            target=$(normalise "$cand")
            case $target in
                src/core/*/*) ;;
                src/core/*) echo "I ${f#src/core/} $no ${target#src/core/}" ;;
            esac
            break
        done
    done >>"$recs"
done

awk -v table="$table" -v known="$known" -v tname="$table_name" -v kname="$known_name" '
    function sorted(list,    a, m, i, j, x, s) { # the words of list, sorted, one space apart
        m = split(list, a, " ")
        for (i = 2; i <= m; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
        s = ""; for (i = 1; i <= m; i++) s = s (i > 1 ? " " : "") a[i]
        return s
    }
    BEGIN {
        bad = 0
        while ((getline line < table) > 0) {
            sub(/#.*/, "", line)
            m = split(line, w, " ")
            if (m == 0) continue
            if (w[1] !~ /^[0-9]+$/) { printf "%s: \"%s\" does not start with a floor number\n", tname, line; bad++; continue }
            for (i = 2; i <= m; i++) {
                if (w[i] in floor) { printf "%s: %s is on two lines\n", tname, w[i]; bad++ }
                floor[w[i]] = w[1] + 0
            }
        }
        while ((getline line < known) > 0) {
            sub(/#.*/, "", line)
            m = split(line, k, " ")
            if (m == 0) continue
            if (k[1] == "call" && m == 4) key = "call " k[2] " " k[3] " " k[4]
            else if (k[1] == "include" && m == 3) key = "include " k[2] " " k[3]
            else if (k[1] == "circle" && m >= 3) { key = ""; for (i = 2; i <= m; i++) key = key " " k[i]; key = "circle " sorted(key) }
            else { printf "%s: \"%s\" is not \"call FROM TO SYMBOL\", \"include FROM HEADER\" or \"circle FILE FILE...\"\n", kname, line; bad++; continue }
            listed[key] = 1
        }
    }
    $1 == "F" { isfile[$2] = 1; if (!($2 in floor)) { printf "src/core/%s: has no floor in %s\n", $2, tname; bad++ } }
    $1 == "D" { def[$2] = $3 }
    $1 == "U" { nu++; un[nu] = $2; uf[nu] = $3 }
    $1 == "I" { ni++; if_[ni] = $2; il[ni] = $3; ih[ni] = $4 }
    END {
        for (f in floor) if (!(f in isfile)) { printf "%s: %s has a floor but is not a file of src/core\n", tname, f; bad++ }
        # calls
        nn = 0
        for (i = 1; i <= nu; i++) {
            s = un[i]; from = uf[i]
            if (!(s in def)) continue                  # other areas, libc, ...
            to = def[s]
            if (to == from) continue
            if (!(from in node)) { node[from] = ++nn; name[nn] = from }
            if (!(to in node)) { node[to] = ++nn; name[nn] = to }
            e = node[from] SUBSEP node[to]
            reach[e] = 1; esyms[e] = esyms[e] " " s
            if (!(from in floor) || !(to in floor) || floor[to] <= floor[from]) continue
            key = "call " from " " to " " s
            if (key in listed) { seen[key] = 1; continue }
            printf "src/core/%s: uses %s (src/core/%s): %s (floor %d) may not call %s (floor %d)\n", \
                from, s, to, from, floor[from], to, floor[to]
            bad++
        }
        # includes
        for (i = 1; i <= ni; i++) {
            from = if_[i]; h = ih[i]
            if (!(from in floor) || !(h in floor) || floor[h] <= floor[from]) continue
            key = "include " from " " h
            if (key in listed) { seen[key] = 1; continue }
            printf "src/core/%s:%s: #include core/%s: %s (floor %d) may not include %s (floor %d)\n", \
                from, il[i], h, from, floor[from], h, floor[h]
            bad++
        }
        # circles: the files that reach each other through calls
        for (v = 1; v <= nn; v++) for (i = 1; i <= nn; i++) if ((i SUBSEP v) in reach)
            for (j = 1; j <= nn; j++) if ((v SUBSEP j) in reach) reach[i SUBSEP j] = 1
        for (i = 1; i <= nn; i++) {
            if (!((i SUBSEP i) in reach)) continue
            members = ""
            for (j = 1; j <= nn; j++) if (((i SUBSEP j) in reach) && ((j SUBSEP i) in reach)) members = members " " name[j]
            key = "circle " sorted(members)
            if (key in done) continue
            done[key] = 1
            if (key in listed) { seen[key] = 1; continue }
            m = split(sorted(members), c, " ")
            how = ""
            for (a = 1; a <= m; a++) for (b = 1; b <= m; b++) {
                e = node[c[a]] SUBSEP node[c[b]]
                if (a != b && e in esyms) how = how "; " c[a] " -> " c[b] ":" esyms[e]
            }
            printf "src/core: %s call each other in a circle (%s)\n", sorted(members), substr(how, 3)
            bad++
        }
        for (key in listed) if (!(key in seen)) {
            printf "%s: \"%s\" is listed as a known exception but is not found any more: take it off the list\n", kname, key
            bad++
        }
        nk = 0; for (key in seen) nk++
        if (bad) { printf "check-floors: %d break(s) of the floors of the core (docs/architecture.md)\n", bad > "/dev/stderr"; exit 1 }
        printf "check-floors: every call and include of src/core keeps to the floors (%d known exception(s) listed in %s)\n", nk, kname
    }' "$recs" || exit 1
echo "check-floors: $n objects of src/core read"
