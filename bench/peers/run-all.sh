#!/bin/sh
# Smoke run: every built peer (DIR/peer-*) on every workload, small sizes.
#
#   bench/peers/run-all.sh [DIR] [-- extra peer arguments]
#
# DIR defaults to build/peers under the repository (where build.sh puts them).
# Prints each RESULT line; exit status 3 counts as "skipped". Fails (exit 1) if
# any run exits otherwise non-zero, prints check=FAIL, or prints no RESULT line.
# The last line is "N passed, N failed, N skipped".
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=$root/build/peers
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
	dir=$1
	shift
fi
[ $# -gt 0 ] && [ "$1" = "--" ] && shift

# workload and its small-size arguments
sizes() {
	case $1 in
	pingpong) echo "--n 20000" ;;
	spawn)    echo "--n 20000" ;;
	skynet)   echo "--n 10000" ;;
	fib)      echo "--n 25" ;;
	pairs)    echo "--duration 0.2" ;;
	select)   echo "--duration 0.2" ;;
	build)    echo "--n 200" ;;
	yield)    echo "--n 20000" ;;
	esac
}
WORKLOADS="pingpong spawn skynet fib pairs select build yield"

passed=0
failed=0
skipped=0
found=0
for peer in "$dir"/peer-*; do
	[ -x "$peer" ] || continue
	# the Go server of the network workloads (usched bench tbench ... --peers),
	# not a workload peer
	[ "$(basename "$peer")" = peer-goserve ] && continue
	found=1
	for w in $WORKLOADS; do
		# shellcheck disable=SC2046
		out=$(timeout 120 "$peer" "$w" $(sizes "$w") "$@" 2>/dev/null)
		rc=$?
		name=$(basename "$peer")
		if [ $rc -eq 3 ]; then
			skipped=$((skipped + 1))
			echo "skipped: $name $w ($out)"
		elif [ $rc -eq 0 ] && echo "$out" | grep -q '^RESULT .* check=ok '; then
			passed=$((passed + 1))
			echo "$out" | grep '^RESULT '
		else
			failed=$((failed + 1))
			echo "FAIL: $name $w (exit $rc): $out"
		fi
	done
done
if [ $found -eq 0 ]; then
	echo "no peers in $dir: run bench/peers/build.sh $dir first"
	exit 1
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
