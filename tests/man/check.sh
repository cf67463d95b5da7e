#!/bin/sh
# Usage: check.sh MAN_DIR LIBUSCHED_SO USCHED_CLI
# Checks the manual in MAN_DIR (man/ of the source tree):
#  1. every symbol libusched.so exports (nm -D --defined-only) has
#     man3/<symbol>.3: a page, or a one-line ".so man3/<group>.3" link to the
#     page whose NAME section lists it; and every man3 page is such a symbol;
#  2. every page renders without a warning, with groff -ww -z -man and with
#     man -l (which follows the .so links);
#  3. usched(1) has a section for every command of `usched --help` and names
#     every long option of `usched <command> --help`;
#  4. usched-policies(7) names every policy of `usched policies` and every
#     knob of `usched knobs`.
# Prints every problem, each naming the symbol, page, command or option, and
# exits 1 if there was any.
set -u
man=$1 lib=$2 cli=$3
# A cross build runs the CLI under its emulator (tests/CMakeLists.txt).
if [ -n "${USCHED_TEST_EMULATOR:-}" ]; then
    real_cli=$cli
    cli=usched_cli_emulated
    # shellcheck disable=SC2086
    usched_cli_emulated() { $USCHED_TEST_EMULATOR "$real_cli" "$@"; }
fi
export LC_ALL=C.UTF-8 MANWIDTH=80
errors=0
err=$(mktemp "${TMPDIR:-/tmp}/usched-man.XXXXXX")
trap 'rm -f "$err"' EXIT
problem() { echo "man check: $*" >&2; errors=$((errors + 1)); }

# The names listed in a page's NAME section (the line after .SH NAME, up to \-).
name_list() {
    sed -n '/^\.SH NAME/{n;p;q}' "$1" | sed 's/ \\-.*//; s/,/ /g'
}

syms=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRV]$/ {sub(/@.*/, "", $3); print $3}' | grep -v '^USCHED_[0-9.]*$' | sort -u)
[ -n "$syms" ] || { echo "man check: no exported symbols in $lib" >&2; exit 1; }

# ---- 1. a page for every exported symbol ------------------------------------------
for s in $syms; do
    page=$man/man3/$s.3
    if [ ! -f "$page" ]; then
        problem "$s: exported by libusched.so but man/man3/$s.3 is missing (write the page, or a one-line '.so man3/<group>.3' link to the page that documents $s and list $s in that page's NAME section; see man/README.md)"
        continue
    fi
    doc=$page
    first=$(head -n 1 "$page")
    case "$first" in
    .so\ *)
        [ "$(wc -l <"$page")" -eq 1 ] || problem "man/man3/$s.3: a .so link must be one line"
        doc=$man/${first#.so }
        if [ ! -f "$doc" ]; then
            problem "man/man3/$s.3 links to $first, which does not exist"
            continue
        fi
        ;;
    esac
    case " $(name_list "$doc") " in
    *" $s "*) ;;
    *) problem "$s: ${doc#"$man"/} (the page for man/man3/$s.3) does not list $s in its NAME section" ;;
    esac
done
for page in "$man"/man3/*.3; do
    s=$(basename "$page" .3)
    echo "$syms" | grep -qx "$s" ||
        problem "man/man3/$s.3: libusched.so exports no symbol $s (a removed or renamed function? remove or rename the page)"
done

# ---- 2. every page renders without warnings -------------------------------------------
for page in "$man"/man1/*.1 "$man"/man3/*.3 "$man"/man7/*.7; do
    rel=${page#"$man"/}
    if [ "$(head -c 4 "$page")" != ".so " ]; then
        out=$(groff -ww -z -man "$page" 2>&1)
        [ -z "$out" ] || problem "$rel: groff -ww -z -man warns: $out"
    fi
    # man -l resolves .so links relative to the manual's root.
    lines=$(cd "$man" && man --warnings=w -l "$rel" 2>"$err" | wc -l)
    [ ! -s "$err" ] || problem "$rel: man -l warns: $(cat "$err")"
    [ "$lines" -gt 5 ] || problem "$rel: man -l renders only $lines lines"
done

# ---- 3. usched(1) covers the CLI -----------------------------------------------------
u1=$man/man1/usched.1
cmds=$("$cli" --help | sed -n '/^Commands:/,/^$/p' | awk 'NF > 1 {print $1}')
[ -n "$cmds" ] || problem "'$cli --help' lists no commands"
for c in $cmds; do
    grep -q "^\.SS \"usched $c[ \"]" "$u1" ||
        problem "usched(1): no section '.SS \"usched $c ...\"' for the command '$c' of 'usched --help'"
    for o in $("$cli" "$c" --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
        roff=$(echo "$o" | sed 's/-/\\\\-/g')
        grep -q -- "$roff" "$u1" ||
            problem "usched(1): option $o of 'usched $c --help' is not documented"
    done
done

# ---- 4. usched-policies(7) covers policies and knobs ---------------------------------
p7=$man/man7/usched-policies.7
for p in $("$cli" policies | awk '{print $1}'); do
    grep -q "^\.B $p\$" "$p7" || problem "usched-policies(7): no '.B $p' entry for policy '$p' of 'usched policies'"
done
for k in $("$cli" knobs | awk 'NR > 1 && $0 !~ /^ / {print $1}'); do
    grep -q "^\.BR $k " "$p7" || problem "usched-policies(7): no '.BR $k ...' entry for knob '$k' of 'usched knobs'"
done

if [ "$errors" -gt 0 ]; then
    echo "man check: $errors problem(s)" >&2
    exit 1
fi
echo "man check: $(echo "$syms" | wc -l) exported symbols, each with a page; every page renders cleanly"
