#!/bin/sh
# Checks every #include of src/, include/, servers/ and tools/ against the
# dependency rule between the layers (docs/architecture.md), and names each
# offending line. Both forms count: "..." and <...> (src/ is on the library's
# include path, so <core/core.h> would compile from anywhere in src/).
# scripts/check-calls.sh reads the RULES table below and checks the calls
# between the compiled objects against it.
#
#   sh scripts/check-includes.sh [REPOSITORY]     (default: the current folder)
#
# A file's area is its folder under src/ (src/arch/<isa>/ is arch), include
# (the public headers, which may include only each other), servers (the
# example servers, on the public API only), bench (tools/bench/, the
# benchmark harness) or tools (the CLI).
# Every area may include its own files and the public headers of include/;
# beyond that, only what RULES lists for it. An include is resolved as the
# compiler does: "..." next to the including file, else under src/, include/,
# servers/ or tools/bench/ (the CLI's include path); <...> under include/ or
# src/ (any other is a system header).
# Exit status: 0 the rule holds; 1 it is broken (one line per include); 2 bad
# usage.
set -eu

root=${1:-.}
if [ ! -d "$root/src" ]; then
    echo "check-includes: '$root' has no src/ folder (give the repository's root)" >&2
    exit 2
fi
cd "$root"

# area: the areas it may include besides itself and include/. Upward is
# forbidden: the table is the order of the layers, lowest first.
RULES='
include:
arch:
tracefmt:
base: arch
topo: base
rq: base arch
stats: base
core: base arch topo rq stats tracefmt
sync: base arch core
io: base arch core sync
policy:
servers: base
bench: peer servers
tools: bench servers tracefmt
'

area_of() {
    case $1 in
        include/*) echo include ;;
        bench/peers/common/*) echo peer ;;
        servers/*) echo servers ;;
        tools/bench/*) echo bench ;;
        src/*/*) p=${1#src/}; echo "${p%%/*}" ;;
        tools/*) echo tools ;;
        *) echo other ;;
    esac
}

allowed() { # allowed FROM TO
    [ "$1" = "$2" ] || [ "$2" = include ] && return 0
    may=$(printf '%s\n' "$RULES" | sed -n "s/^$1:[[:space:]]*//p")
    for a in $may; do [ "$a" = "$2" ] && return 0; done
    return 1
}

. "$(dirname "$0")/paths.sh" # normalise

found=$(mktemp)
trap 'rm -f "$found"' EXIT
files=$(find src include servers tools -type f \( -name '*.c' -o -name '*.h' -o -name '*.S' \) | sort)
for f in $files; do
    from=$(area_of "$f")
    dir=$(dirname "$f")
    # one line an include: NUMBER q|a PATH (q: "...", a: <...>)
    awk '/^[ \t]*#[ \t]*include[ \t]*["<]/ {
        l = $0; sub(/^[^"<]*/, "", l); k = substr(l, 1, 1) == "\"" ? "q" : "a"
        l = substr(l, 2); sub(/[">].*/, "", l); print FNR, k, l }' "$f" |
    while read -r no kind inc; do
        if [ "$kind" = q ]; then
            cands="$dir/$inc src/$inc include/$inc servers/$inc tools/bench/$inc" angle=
        else
            # <...> is a system header unless it names a file of include/ or src/
            [ -f "include/$inc" ] || [ -f "src/$inc" ] || continue
            cands="include/$inc src/$inc" angle=1
        fi
        target=
        for cand in $cands; do
            if [ -f "$cand" ]; then target=$(normalise "$cand"); break; fi
        done
        if [ -z "$target" ] && [ -n "$angle" ]; then
            continue    # a system header
        elif [ -z "$target" ]; then
            echo "$f:$no: #include \"$inc\" is not a file of the repository (next to it, under src/ or include/)"
            echo x >&3
            continue
        fi
        to=$(area_of "$target")
        if ! allowed "$from" "$to"; then
            may=$(printf '%s\n' "$RULES" | sed -n "s/^$from:[[:space:]]*//p")
            echo "$f:$no: #include $inc: $from may not include $to ($target); $from may include: ${may:-nothing} and include/"
            echo x >&3
        fi
    done
done 3>"$found"
n=$(wc -l < "$found")
if [ "$n" -gt 0 ]; then
    echo "check-includes: $n include(s) break the dependency rule (docs/architecture.md)" >&2
    exit 1
fi
echo "check-includes: every include of src/, include/, servers/ and tools/ follows the dependency rule"
