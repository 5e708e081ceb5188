#!/usr/bin/env bash
# Counts the instructions a server executes per request, under valgrind's
# cachegrind: the figure that does not move when the machine is busy, so a
# change of a few percent shows where requests/s cannot show it. The server
# runs twice, once answering WARM requests and once WARM+N; the difference
# divided by N is the cost of a request in steady state, start-up and
# warm-up cancelled out. Requests come from 'keygate bench load' on 4
# connections.
#
#   scripts/instructions.sh URL CMD [ARGS...]
#
#   URL      what to load, e.g. http://127.0.0.1:18090/auth (CMD must listen there)
#   CMD      the server, e.g. ./keygate serve --config kg.yaml, or
#            ./keygate bench server --mode noop --listen 127.0.0.1:18090
#   VALUES   a file of values, one per request, sent as HEADER (default: none)
#   HEADER   default 'Authorization: Bearer {{value}}'
#   N, WARM  measured and warm-up requests (default 6000 and 2000)
#   KEYGATE  the keygate binary that generates the load (default: built from this tree)
#   KEEP     1: keep the two cachegrind files (their directory is printed), for cg_diff
#
# Prints one line: instructions per request, and the two totals. Needs
# valgrind (Debian: apt-get install valgrind). User-space instructions
# only: what the kernel does for a request (TCP, epoll) is not counted.
set -euo pipefail
if [[ $# -lt 2 ]]; then
	sed -n '10,20p' "$0" >&2
	exit 2
fi
url=$1
shift
N=${N:-6000} WARM=${WARM:-2000} HEADER=${HEADER:-'Authorization: Bearer {{value}}'}
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/instructions.XXXXXX")
if [[ -z ${KEYGATE:-} ]]; then
	(cd "$(dirname "$0")/.." && go build -o "$work/keygate" ./cmd/keygate)
	KEYGATE=$work/keygate
fi
export KEYGATE_BENCH_MARKER=${KEYGATE_BENCH_MARKER:-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')}
hostport=${url#http://}
hostport=${hostport%%/*}

# count N: the server's instructions over its life with N requests.
count() {
	local n=$1 out=$work/cg.$1 pid
	shift
	GOMAXPROCS=1 valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file="$out" "$@" >"$work/log.$n" 2>&1 &
	pid=$!
	for _ in $(seq 600); do
		curl -s -o /dev/null --max-time 2 "http://$hostport/" && break
		kill -0 "$pid" 2>/dev/null || { echo "the server exited: $(tail -n 5 "$work/log.$n")" >&2; exit 1; }
		sleep 0.2
	done
	local load=("$KEYGATE" bench load --url "$url" --connections 4 --requests "$n" --duration 0s --warmup 0s --timeout 60s --format line)
	if [[ -n ${VALUES:-} ]]; then
		load+=(-H "$HEADER" --values "$VALUES")
	fi
	"${load[@]}" | grep -q " 2xx=$n " || echo "warning: not every answer of the $n was 2xx" >&2
	kill -INT "$pid"
	wait "$pid" || true
	awk '/^summary:/ { print $2 }' "$out"
}
cmd=("$@")
a=$(set -- "$WARM" "${cmd[@]}"; count "$@")
b=$(set -- "$((WARM + N))" "${cmd[@]}"; count "$@")
awk -v a="$a" -v b="$b" -v n="$N" -v w="$WARM" 'BEGIN { printf "%.0f instructions per request (%d in all with %d requests, %d with %d more)\n", (b - a) / n, a, w, b, n }'
if [[ ${KEEP:-} == 1 ]]; then
	echo "cachegrind files: $work/cg.$WARM and $work/cg.$((WARM + N))"
else
	rm -rf "$work"
fi
