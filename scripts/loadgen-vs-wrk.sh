#!/usr/bin/env bash
# Does 'keygate bench load' measure what wrk measures? Issue 12's criterion:
# on the no-op reference server its closed-loop requests/s agree with wrk's
# within 10%.
#
# One 'keygate bench server --mode noop' runs on CPU SERVER_CPU with
# GOMAXPROCS=1 for the whole test; wrk (-t1) and 'keygate bench load' take
# turns on CPU CLIENT_CPU with the same connections and durations, RUNS
# rounds, so that drift on a shared machine hits both alike. Each run gets
# its warm-up (wrk: a separate run of WARMUP first; bench load: --warmup on
# the same connections). Each run also measures the share of the two CPUs
# that other processes took meanwhile; a round in which it passed NOISY (%)
# for either tool is noisy (on a shared machine wrk's one thread loses more
# to other processes than bench load does) and is run again, up to
# MAX_ROUNDS rounds in all. It prints each run, the two medians over the
# quiet rounds (over all rounds, with a warning, when none was quiet), their
# ratio and PASS when the ratio is within 10% of 1 (exit 1 otherwise).
#
#   scripts/loadgen-vs-wrk.sh                       # 3 rounds of 10 s each (~2 min, ~4 when noisy)
#   DURATION=5s RUNS=1 scripts/loadgen-vs-wrk.sh    # smoke
#
# Settings (environment):
#   CONNS=50 DURATION=10s WARMUP=2s RUNS=3   connections, measured run, warm-up, quiet rounds wanted
#   NOISY=10 MAX_ROUNDS=2*RUNS               a noisy round's threshold (%), rounds at most
#   SERVER_CPU=0 CLIENT_CPU=1                taskset CPUs
#   PORT=18081                               the reference server's loopback port
#   TIMEOUT=2s                               per-request timeout of both tools
#   OUT=DIR                                  keep the raw outputs
#   MAX_SECONDS=600                          refuse a configuration estimated to run longer (at most 600)
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CONNS=${CONNS:-50}
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-2s}
RUNS=${RUNS:-3}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
PORT=${PORT:-18081}
TIMEOUT=${TIMEOUT:-2s}
OUT=${OUT:-}
MAX_SECONDS=${MAX_SECONDS:-600}
NOISY=${NOISY:-10}

DUR_S=$(secs "$DURATION")
WARM_S=$(secs "$WARMUP")
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer"
[[ $CONNS =~ ^[1-9][0-9]*$ ]] || die "CONNS must be a positive integer"
MAX_ROUNDS=${MAX_ROUNDS:-$((2 * RUNS))}
[[ $MAX_ROUNDS =~ ^[1-9][0-9]*$ ]] && ((MAX_ROUNDS >= RUNS)) || die "MAX_ROUNDS must be an integer >= RUNS"
[[ $NOISY =~ ^[0-9]+$ ]] || die "NOISY must be a whole percentage"
((DUR_S > 0)) || die "DURATION must be at least 1s"
((MAX_SECONDS <= 600)) || die "MAX_SECONDS must be at most 600 (10 minutes)"
estimate=$((30 + MAX_ROUNDS * 2 * (WARM_S + DUR_S + 2)))
((estimate <= MAX_SECONDS)) || die "estimated ${estimate}s is over MAX_SECONDS=$MAX_SECONDS; shorten DURATION, RUNS or MAX_ROUNDS"

check_host wrk go taskset curl awk sort timeout /usr/bin/time
check_ports PORT

WORK=$(mktemp -d "${TMPDIR:-/tmp}/keygate-loadgen-vs-wrk.XXXXXX")
SERVER_PID=""
WRK_PID=""
OUT_SKIP=(keygate)
install_cleanup

log "building keygate"
(cd "$ROOT" && go build -o "$WORK/keygate" ./cmd/keygate)
KG=$WORK/keygate
URL=http://127.0.0.1:$PORT/

taskset -c "$SERVER_CPU" env GOMAXPROCS=1 "$KG" bench server --mode noop --listen "127.0.0.1:$PORT" >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 100); do
	kill -0 "$SERVER_PID" 2>/dev/null || die "the server exited at start: $(tail -5 "$WORK/server.log")"
	[[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 1 -H "$BENCH_MARKER" "$URL") == 200 ]] && break
	sleep 0.1
done
[[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 1 -H "$BENCH_MARKER" "$URL") == 200 ]] || die "the server did not answer 200 within 10s"

client() { timeout --kill-after=5 $((WARM_S + DUR_S + 60)) taskset -c "$CLIENT_CPU" "$@"; }

# busy_ticks: user+nice+system+irq+softirq+steal ticks of SERVER_CPU and CLIENT_CPU together.
busy_ticks() { awk -v a="cpu$SERVER_CPU" -v b="cpu$CLIENT_CPU" '$1 == a || $1 == b { t += $2 + $3 + $4 + $7 + $8 + $9 } END { print t }' /proc/stat; }
TCK=$(getconf CLK_TCK)

# measured name cmd...: runs a measured client run on CLIENT_CPU with its
# output in $WORK/name, and sets OTHERS to the share (%) of the two CPUs'
# time that neither the server nor the client took (other processes; the
# kernel's loopback work is charged to the server and client as system time,
# or to the CPUs as irq time, which counts as other here).
measured() {
	local name=$1 b0 s0 b1 s1 t0 t1
	shift
	b0=$(busy_ticks) s0=$(proc_ticks "$SERVER_PID") t0=$(date +%s.%N)
	client /usr/bin/time -o "$WORK/$name.time" -f '%U %S' "$@" >"$WORK/$name" 2>"$WORK/$name.stderr" ||
		die "$1 failed: $(tail -3 "$WORK/$name" "$WORK/$name.stderr")"
	b1=$(busy_ticks) s1=$(proc_ticks "$SERVER_PID") t1=$(date +%s.%N)
	OTHERS=$(awk -v b="$((b1 - b0))" -v s="$((s1 - s0))" -v tck="$TCK" -v w="$(calc "$t1 - $t0" 3)" \
		'{ o = ((b - s) / tck - ($1 + $2)) / (2 * w) * 100; printf "%.0f", o < 0 ? 0 : o }' "$WORK/$name.time")
}

# wrk_rps round: a warm-up run, then the measured run; sets RPS.
wrk_rps() {
	local out=wrk-$1.txt
	if ((WARM_S > 0)); then
		client wrk -t1 -c"$CONNS" -d"$WARMUP" --timeout "$TIMEOUT" -H "$BENCH_MARKER" "$URL" >"$WORK/$out.warmup" 2>&1 ||
			die "wrk failed: $(tail -3 "$WORK/$out.warmup")"
	fi
	measured "$out" wrk -t1 -c"$CONNS" -d"$DURATION" --timeout "$TIMEOUT" -H "$BENCH_MARKER" "$URL"
	! grep -qE 'Socket errors|Non-2xx' "$WORK/$out" || log "wrk reported errors: $(grep -E 'Socket errors|Non-2xx' "$WORK/$out" | tr '\n' ' ')"
	RPS=$(awk '/^Requests\/sec:/ { print $2 }' "$WORK/$out")
	[[ -n $RPS ]] || die "wrk printed no Requests/sec"
}

# load_rps round: one bench load step (its own warm-up); sets RPS, and
# NOTE to its CPU use and errors.
load_rps() {
	local out=load-$1.json
	measured "$out" "$KG" bench load --url "$URL" --connections "$CONNS" --duration "$DURATION" --warmup "$WARMUP" \
		--timeout "$TIMEOUT" --json
	read -r RPS NOTE < <(awk '
		/"requests_per_s":/ { gsub(/,/, "", $2); rps = $2 }
		/"percent":/ { gsub(/,/, "", $2); cpu = $2 }
		/"(connect|read|write|timeout|parse|3xx|4xx|5xx|other)":/ { gsub(/,/, "", $2); bad += $2 }
		END { printf "%s generator CPU %.0f%%, errors + non-2xx %d\n", rps, cpu, bad }' "$WORK/$out")
	[[ -n $RPS ]] || die "bench load printed no requests_per_s"
}

RESULTS=$WORK/results.tsv
printf 'tool\tround\trps\tothers_pct\tquiet\n' >"$RESULTS"
log "$RUNS quiet rounds (at most $MAX_ROUNDS) of wrk and bench load, $CONNS connections, ${WARMUP} warm-up + ${DURATION} each, server on CPU $SERVER_CPU, clients on CPU $CLIENT_CPU (at most ~$(((estimate + 59) / 60)) min)"
quiet=0
round=0
while ((quiet < RUNS && round < MAX_ROUNDS)); do
	round=$((round + 1))
	wrk_rps "$round"
	w_rps=$RPS w_others=$OTHERS
	log "round $round: wrk        $(fmt_n "$w_rps") req/s (other processes ${w_others}% of the two CPUs)"
	load_rps "$round"
	log "round $round: bench load $(fmt_n "$RPS") req/s (other processes ${OTHERS}% of the two CPUs; $NOTE)"
	q=1
	((w_others <= NOISY && OTHERS <= NOISY)) || q=0
	quiet=$((quiet + q))
	((q)) || log "round $round is noisy (over $NOISY%)"
	printf 'wrk\t%d\t%s\t%s\t%d\nload\t%d\t%s\t%s\t%d\n' "$round" "$w_rps" "$w_others" "$q" "$round" "$RPS" "$OTHERS" "$q" >>"$RESULTS"
done
stop_server

use=1 # medians over the quiet rounds, or all when none was quiet
((quiet > 0)) || use=0
med() { awk -F'\t' -v t="$1" -v u="$use" 'NR > 1 && $1 == t && $5 >= u { print $3 }' "$RESULTS" | sort -g |
	awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
wm=$(med wrk)
lm=$(med load)
ratio=$(calc "$lm / $wm" 3)
verdict=$(awk -v r="$ratio" 'BEGIN { print (r >= 0.9 && r <= 1.1) ? "PASS" : "FAIL" }')
over="$quiet quiet rounds of $round"
((quiet > 0)) || over="all $round rounds, none quiet"
echo "wrk median:        $(fmt_n "$wm") req/s ($(wrk -v 2>&1 | head -n 1 | cut -d' ' -f1-2), -t1 -c$CONNS; $over)"
echo "bench load median: $(fmt_n "$lm") req/s (--connections $CONNS; $over)"
echo "ratio bench load / wrk: $ratio  $verdict (within 10%)"
((quiet >= RUNS)) || echo "warning: only $quiet of the $RUNS quiet rounds wanted (other processes took over $NOISY% of the two CPUs); the figures are suspect"
[[ $verdict == PASS ]]
