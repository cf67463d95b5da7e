#!/bin/sh
# The model and the code name the same protective steps: every label
# "[model: NAME]" of model/park.pml appears in a comment of src/ and every
# one of src/ appears in the model.
#
#   sh model/labels.sh [REPOSITORY]
set -eu
root=${1:-.}
t=$(mktemp -d "${TMPDIR:-/tmp}/usched-labels.XXXXXX")
trap 'rm -rf "$t"' EXIT
grep -o '\[model: [A-Z0-9]*\]' "$root/model/park.pml" | sort -u >"$t/model"
grep -rho '\[model: [A-Z0-9]*\]' "$root/src" | sort -u >"$t/code"
rc=0
only=$(comm -23 "$t/model" "$t/code")
[ -z "$only" ] || { echo "labels: in model/park.pml but in no comment of src/:"; printf '  %s\n' "$only"; rc=1; }
only=$(comm -13 "$t/model" "$t/code")
[ -z "$only" ] || { echo "labels: in src/ but not in model/park.pml:"; printf '  %s\n' "$only"; rc=1; }
[ "$rc" -eq 0 ] && echo "labels: the model and the code name the same $(wc -l <"$t/model") steps"
exit "$rc"
