#!/bin/sh
# The exported ABI is the reviewed list: the functions the public headers
# declare, the global names of the version script and the shared library's
# dynamic symbols (each under the script's version) must be the same set.
#
#   sh tests/lint/abi.sh LIBRARY.so VERSION_SCRIPT INCLUDE_DIR
set -eu
lib=${1:?usage: abi.sh LIBRARY.so VERSION_SCRIPT INCLUDE_DIR}
map=${2:?usage: abi.sh LIBRARY.so VERSION_SCRIPT INCLUDE_DIR}
inc=${3:?usage: abi.sh LIBRARY.so VERSION_SCRIPT INCLUDE_DIR}
t=$(mktemp -d "${TMPDIR:-/tmp}/usched-abi.XXXXXX")
trap 'rm -rf "$t"' EXIT

# Declared: every usched_ name followed by "(" in the preprocessed headers.
for h in "$inc/usched.h" "$inc/usched/policy.h"; do
    cpp -P -I"$inc" "$h"
done | grep -oE '\busched_[a-z0-9_]+[[:space:]]*\(' | sed 's/[[:space:]]*($//' | sort -u >"$t/declared"
# Listed: the names between "global:" and "local:" of the script.
sed 's:/\*.*\*/::' "$map" | awk '/global:/ { g = 1; next } /local:/ { g = 0 } g' |
    tr -d ' \t;' | grep -v '^$' | sort -u >"$t/listed"
# Exported: the library's defined dynamic symbols, with their versions.
nm -D --defined-only --with-symbol-versions "$lib" | awk '$3 !~ /^USCHED_[0-9.]+$/ { print $3 }' >"$t/raw"
sed 's/@.*//' "$t/raw" | grep -v '^USCHED_' | sort -u >"$t/exported"
unversioned=$(grep -v '@' "$t/raw" | grep -v '^USCHED_' || true)

rc=0
report() { # report FILE_A FILE_B WHAT
    d=$(comm -23 "$1" "$2")
    if [ -n "$d" ]; then
        echo "abi: $3:"; printf '  %s\n' $d; rc=1
    fi
}
report "$t/declared" "$t/listed" "declared in include/ but not in $map"
report "$t/listed" "$t/declared" "in $map but declared in no public header"
report "$t/listed" "$t/exported" "in $map but not exported by $lib"
report "$t/exported" "$t/listed" "exported by $lib but not in $map"
if [ -n "$unversioned" ]; then
    echo "abi: exported without a version (is the version script linked?):"; printf '  %s\n' $unversioned; rc=1
fi
[ "$rc" -eq 0 ] && echo "abi: $(wc -l <"$t/listed") functions: declared, listed and exported alike"
exit "$rc"
