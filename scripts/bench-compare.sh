#!/usr/bin/env bash
# Compares Go benchmarks between two commits with benchstat, the way these
# machines need: both test binaries are built first, then run in alternation
# (old, new, old, new, ...) for ROUNDS rounds of one count each, so that a
# drift of the machine's speed lands on both sides alike instead of on
# whichever ran second. benchstat then reports each benchmark's median and
# the change with its confidence interval.
#
#   scripts/bench-compare.sh [-n ROUNDS] [-t BENCHTIME] [-c CPU] OLD NEW PKG [BENCH]
#
#   OLD, NEW    commits (anything git rev-parse takes; NEW may be "." for the working tree)
#   PKG         one package, e.g. ./jose
#   BENCH       a -bench regexp (default: every benchmark of PKG)
#   -n ROUNDS   alternations (default 8: benchstat wants at least 6 per side)
#   -t BENCHTIME  -benchtime per run (default 200ms)
#   -c CPU      pin the benchmarks to this CPU with taskset (default: not pinned)
#
# The raw results stay in the directory printed at the end.
set -euo pipefail

rounds=8 benchtime=200ms cpu=""
while getopts "n:t:c:" opt; do
	case $opt in
	n) rounds=$OPTARG ;;
	t) benchtime=$OPTARG ;;
	c) cpu=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
if [[ $# -lt 3 ]]; then
	sed -n '9,17p' "$0" >&2
	exit 2
fi
old=$1 new=$2 pkg=$3 bench=${4:-.}
# benchstat, at the version this repository was checked with.
benchstat=${BENCHSTAT:-golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da}

root=$(git rev-parse --show-toplevel)
work=$(mktemp -d "${TMPDIR:-/tmp}/bench-compare.XXXXXX")
cleanup() {
	for side in old new; do
		[[ -d $work/$side-tree ]] && git -C "$root" worktree remove --force "$work/$side-tree" >/dev/null 2>&1 || true
	done
}
trap cleanup EXIT

build() { # side commit
	local side=$1 commit=$2 tree
	if [[ $commit == "." ]]; then
		tree=$root
	else
		tree=$work/$side-tree
		git -C "$root" worktree add --detach --quiet "$tree" "$commit"
	fi
	(cd "$tree" && go test -c -o "$work/$side.test" "$pkg")
	echo "$side: $(git -C "$tree" rev-parse --short HEAD)$([[ $commit == "." ]] && echo ' + working tree')" >>"$work/sides.txt"
}
build old "$old"
build new "$new"

run() { # side
	local cmd=("$work/$1.test" -test.run '^$' -test.bench "$bench" -test.benchmem -test.benchtime "$benchtime" -test.count 1)
	[[ -n $cpu ]] && cmd=(taskset -c "$cpu" "${cmd[@]}")
	# A package's benchmarks read testdata relative to its directory.
	(cd "$root/$pkg" && "${cmd[@]}") >>"$work/$1.txt"
}
for i in $(seq 1 "$rounds"); do
	printf 'round %d of %d\r' "$i" "$rounds" >&2
	run old
	run new
done
echo >&2
cat "$work/sides.txt"
go run "$benchstat" "$work/old.txt" "$work/new.txt"
echo "raw results: $work/old.txt $work/new.txt" >&2
