#!/usr/bin/env bash
# Loopback load test of keygate's forward-auth path (GET /auth with a bearer
# token) against reference servers on the same HTTP stack, for the issue 3
# targets:
#   (a) cache hits: keygate >= 70% of the requests/s of a no-op net/http
#       server (200, empty body);
#   (b) a distinct ES256 token on every request: keygate >= 90% of the bound
#       1/(1/noop + 1/raw), raw being one core's raw ES256 verifies/s measured
#       in the same session; also reported against raw alone and against a
#       measured "no-op + one raw ES256 verify per request" server;
#   (c) at HIGH_CONNS (10,000) connections keygate keeps >= 90% of the
#       high-to-CONNS throughput ratio the no-op server keeps, with no socket
#       errors and no non-2xx responses.
#
# The server runs on CPU SERVER_CPU with GOMAXPROCS=1, the load generator
# (keygate bench load, GOMAXPROCS=1) on CPU CLIENT_CPU;
# every server is a fresh process per run (so keygate's cache starts empty),
# gets a warm-up, then a measured run; scenarios are interleaved round by
# round so that drift on a shared machine hits them alike. The table gives
# the median of RUNS runs, and the spread (max-min)/median.
#
#   scripts/loadtest.sh                              # full: 3 runs of 10 s (~5 min)
#   DURATION=5s WARMUP=1s RUNS=1 scripts/loadtest.sh # smoke (~1 min)
#   PROFILE_SECONDS=5 scripts/loadtest.sh            # also profile keygate under unique tokens
#
# Settings (environment):
#   DURATION=10s WARMUP=2s RUNS=3     measured run, warm-up and rounds
#   CONNS=100 HIGH_CONNS=10000        connections; HIGH_CONNS=0 skips (c)
#   SERVER_CPU=0 CLIENT_CPU=1         taskset CPUs
#   WRK_TIMEOUT=2s                    the generator's per-request timeout (a timeout is an error)
#   RAW_DURATION=3s                   each in-process raw ES256 measurement
#   PORT=18080 ADMIN_PORT=19090       loopback ports the servers use
#   PROFILE_SECONDS=0                 >0: CPU profile of keygate under unique tokens
#   OUT=DIR                           keep results, generator output, logs and the profile
#   MAX_SECONDS=720                   refuse a configuration estimated to run longer
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-2s}
RUNS=${RUNS:-3}
CONNS=${CONNS:-100}
HIGH_CONNS=${HIGH_CONNS:-10000}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
WRK_TIMEOUT=${WRK_TIMEOUT:-2s}
RAW_DURATION=${RAW_DURATION:-3s}
PORT=${PORT:-18080}
ADMIN_PORT=${ADMIN_PORT:-19090}
PROFILE_SECONDS=${PROFILE_SECONDS:-0}
OUT=${OUT:-}
MAX_SECONDS=${MAX_SECONDS:-720}



DUR_S=$(secs "$DURATION")
WARM_S=$(secs "$WARMUP")
RAW_S=$(secs "$RAW_DURATION")
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer"
((DUR_S > 0 && RAW_S > 0)) || die "DURATION and RAW_DURATION must be at least 1s"

# Scenarios: name, server (keygate, noop, es256), tokens (fixed: one; unique: one per request), connections.
SCENARIOS=(
	"noop noop fixed $CONNS"
	"noop-unique noop unique $CONNS"
	"keygate-hit keygate fixed $CONNS"
	"es256 es256 unique $CONNS"
	"keygate-unique keygate unique $CONNS"
)
if ((HIGH_CONNS > 0)); then
	SCENARIOS+=("noop-high noop fixed $HIGH_CONNS" "keygate-hit-high keygate fixed $HIGH_CONNS")
fi

estimate=$((60 + RUNS * (RAW_S + 1 + ${#SCENARIOS[@]} * (WARM_S + DUR_S + 2))))
((PROFILE_SECONDS > 0)) && estimate=$((estimate + PROFILE_SECONDS + WARM_S + 10))
((estimate <= MAX_SECONDS)) || die "estimated ${estimate}s is over MAX_SECONDS=$MAX_SECONDS; shorten DURATION or RUNS"

# --- tools -----------------------------------------------------------------

check_host go taskset curl awk sort timeout

# Every connection is a file descriptor in the load generator and in the server.
want_fds=$((HIGH_CONNS > CONNS ? HIGH_CONNS + 4096 : CONNS + 4096))
hard=$(ulimit -Hn)
if [[ $hard != unlimited ]] && ((hard < want_fds)); then
	ulimit -Hn "$want_fds" 2>/dev/null || die "ulimit -Hn is $hard; $want_fds file descriptors are needed (run as root or lower HIGH_CONNS)"
fi
soft=$(ulimit -Sn)
if [[ $soft != unlimited ]] && ((soft < want_fds)); then
	ulimit -Sn "$want_fds"
fi

check_ports PORT ADMIN_PORT

# --- clean-up --------------------------------------------------------------

WORK=$(mktemp -d "${TMPDIR:-/tmp}/keygate-loadtest.XXXXXX")
SERVER_PID=""
WRK_PID=""


OUT_SKIP=("tokens-*" token-hit.txt issuer.pem data keygate)
install_cleanup

# --- build and set up ------------------------------------------------------

log "building keygate"
(cd "$ROOT" && go build -o "$WORK/keygate" ./cmd/keygate)
KG=$WORK/keygate
"$KG" keys generate --alg ES256 --out "$WORK/issuer.pem" >/dev/null

ISSUER=https://auth.example.com/
AUDIENCE=https://api.example.com
cat >"$WORK/config.yaml" <<EOF
listen: 127.0.0.1:$PORT
admin_listen: 127.0.0.1:$ADMIN_PORT
data_dir: $WORK/data
issuers:
  - issuer: $ISSUER
    key_files: [$WORK/issuer.pem]
    algorithms: [ES256]
    audiences: [$AUDIENCE]
EOF


# raw_rate prints one core's raw ES256 verifies/s (crypto/ecdsa.VerifyASN1,
# pre-parsed key, fixed signing input), measured in process on SERVER_CPU.
raw_rate() {
	pinned "$KG" bench verify --raw --goroutines 1 --duration "$1" | awk '$1 == "ES256" { print $2 }'
}

# Enough distinct tokens that keygate, which verifies each on one core and so
# can never beat the raw rate, does not run out: 1.5x a quick raw measurement.
sizing=$(raw_rate 1s)
[[ $sizing =~ ^[0-9]+$ ]] || die "keygate bench verify --raw printed no ES256 rate"
rate=$((sizing > 5000 ? sizing : 5000))
n_warm=$((rate * WARM_S * 3 / 2 + CONNS + 1000))
n_run=$((rate * (DUR_S > PROFILE_SECONDS + 4 ? DUR_S : PROFILE_SECONDS + 4) * 3 / 2 + CONNS + 1000))
log "raw ES256 about $sizing/s on CPU $SERVER_CPU: minting $n_warm warm-up and $n_run measurement tokens"
mint() {
	"$KG" bench tokens --key "$WORK/issuer.pem" --iss "$ISSUER" --aud "$AUDIENCE" --n "$1" --out "$2" >/dev/null
}
mint 1 "$WORK/token-hit.txt"
mint "$n_warm" "$WORK/tokens-warm.txt"
mint "$n_run" "$WORK/tokens-run.txt"

URL=http://127.0.0.1:$PORT/auth
# The admin token /debug/pprof/ requires (PROFILE_SECONDS).
ADMIN_TOKEN=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')

# --- one run ---------------------------------------------------------------

start_server() { # kind log
	# taskset and env exec, so $! is the server itself.
	case $1 in
	keygate) taskset -c "$SERVER_CPU" env GOMAXPROCS=1 KEYGATE_ADMIN_TOKEN="$ADMIN_TOKEN" KEYGATE_PPROF=true "$KG" serve --config "$WORK/config.yaml" >"$2" 2>&1 & ;;
	noop | es256) taskset -c "$SERVER_CPU" env GOMAXPROCS=1 "$KG" bench server --mode "$1" --listen "127.0.0.1:$PORT" >"$2" 2>&1 & ;;
	*) die "unknown server $1" ;;
	esac
	SERVER_PID=$!
	for _ in $(seq 1 100); do
		kill -0 "$SERVER_PID" 2>/dev/null || die "$1 server exited at start: $(tail -5 "$2")"
		if [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://127.0.0.1:$PORT/healthz") != 000 ]]; then
			return 0
		fi
		sleep 0.1
	done
	die "$1 server did not answer within 10s"
}

# expect_200 token: the server must accept the token before it is loaded.
expect_200() {
	local code
	code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -H "$BENCH_MARKER" -H "Authorization: Bearer $1" "$URL")
	[[ $code == 200 ]] || die "GET /auth answered $code, not 200, to a valid token"
}

# run_step output conns duration script tokens: keygate bench load (run_load)
# with the token file's one token in a fixed header (script fixed), or each
# of its tokens in turn (script unique).
run_step() {
	local out=$1 conns=$2 duration=$3 script=$4 tokens=$5
	if [[ $script == unique ]]; then
		POOL_N=$(wc -l <"$tokens") run_load "$out" "$conns" "$duration" --url "$URL" \
			-H 'Authorization: Bearer {{value}}' --values "$tokens"
	else
		run_load "$out" "$conns" "$duration" --url "$URL" -H "Authorization: Bearer $(head -n 1 "$tokens")"
	fi
}

RESULTS=$WORK/results.tsv
printf 'scenario\trun\tconns\trps\terrors\tnon2xx\twraps\tp50_us\tp99_us\tserver_cpu_pct\tother_cpu_pct\n' >"$RESULTS"

run_scenario() { # round name kind script conns
	local round=$1 name=$2 kind=$3 script=$4 conns=$5
	local warm_tokens=$WORK/token-hit.txt run_tokens=$WORK/token-hit.txt
	if [[ $script == unique ]]; then
		warm_tokens=$WORK/tokens-warm.txt run_tokens=$WORK/tokens-run.txt
	fi
	start_server "$kind" "$WORK/$name-$round.log"
	expect_200 "$(head -n 1 "$warm_tokens")"
	if ((WARM_S > 0)); then
		run_step "$WORK/$name-$round.warmup.txt" "$conns" "$WARMUP" "$script" "$warm_tokens"
	fi
	local before after
	before="$(proc_ticks "$SERVER_PID") $(cpu_ticks "$SERVER_CPU")"
	run_step "$WORK/$name-$round.load.txt" "$conns" "$DURATION" "$script" "$run_tokens"
	after="$(proc_ticks "$SERVER_PID") $(cpu_ticks "$SERVER_CPU")"
	stop_server
	sed -n 's/^RESULT //p' "$WORK/$name-$round.load.txt" | awk -v name="$name" -v run="$round" -v conns="$conns" \
		-v before="$before" -v after="$after" '{
		for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		split(before, b, " "); split(after, a, " ")
		# The server process'"'"'s CPU time, and the user+system time of its core
		# that other processes took, as shares of the core (interrupt and
		# softirq time, mostly loopback networking, is in neither).
		total = (a[2] - b[2]) + (a[3] - b[3]) + (a[4] - b[4])
		srv = total > 0 ? (a[1] - b[1]) / total * 100 : 0
		other = total > 0 ? ((a[2] - b[2]) - (a[1] - b[1])) / total * 100 : 0
		if (other < 0) other = 0
		printf "%s\t%d\t%d\t%.1f\t%d\t%d\t%d\t%d\t%d\t%.1f\t%.1f\n", name, run, conns,
			v["requests"] / (v["duration_us"] / 1e6), v["connect"] + v["read"] + v["write"] + v["timeout"],
			v["status"], v["wraps"], v["p50_us"], v["p99_us"], srv, other }' >>"$RESULTS"
	log "$(tail -n 1 "$RESULTS" | awk -F'\t' '{ printf "%-17s run %d: %8.0f req/s  errors %d  non-2xx %d  wraps %d  p50 %d us  p99 %d us  server CPU %.0f%%  other on its core %.0f%%", $1, $2, $4, $5, $6, $7, $8, $9, $10, $11 }')"
}

# proc_ticks pid: user+system CPU ticks of a process.
# cpu_ticks cpu: "user+nice+system irq+softirq+steal idle+iowait" ticks of one CPU.
cpu_ticks() { awk -v c="cpu$1" '$1 == c { print $2 + $3 + $4, $7 + $8 + $9, $5 + $6 }' /proc/stat; }

# --- measure ---------------------------------------------------------------

UPTIME_BEFORE=$(uptime)
log "load before: $UPTIME_BEFORE"
log "${#SCENARIOS[@]} scenarios x $RUNS runs, ${WARMUP} warm-up + ${DURATION} each (at most ~$(((estimate + 59) / 60)) min)"
LOADS=()
for round in $(seq 1 "$RUNS"); do
	LOADS+=("$(cut -d' ' -f1-3 /proc/loadavg)")
	r=$(raw_rate "$RAW_DURATION")
	[[ -n $r ]] || die "raw ES256 measurement failed"
	printf 'raw-es256\t%d\t0\t%s\t0\t0\t0\t0\t0\t0\t0\n' "$round" "$r" >>"$RESULTS"
	log "raw ES256         run $round: $r verifies/s (in process, 1 goroutine, CPU $SERVER_CPU)"
	for s in "${SCENARIOS[@]}"; do
		# shellcheck disable=SC2086 # fields
		run_scenario "$round" $s
	done
done
UPTIME_AFTER=$(uptime)
log "load after: $UPTIME_AFTER"

# --- profile ---------------------------------------------------------------

if ((PROFILE_SECONDS > 0)); then
	log "profiling keygate under unique tokens for ${PROFILE_SECONDS}s"
	start_server keygate "$WORK/profile.log"
	expect_200 "$(head -n 1 "$WORK/tokens-warm.txt")"
	((WARM_S > 0)) && run_step "$WORK/profile.warmup.txt" "$CONNS" "$WARMUP" unique "$WORK/tokens-warm.txt"
	(
		sleep 2
		curl -sf --max-time $((PROFILE_SECONDS + 20)) -H "Authorization: Bearer $ADMIN_TOKEN" -o "$WORK/cpu.pprof" \
			"http://127.0.0.1:$ADMIN_PORT/debug/pprof/profile?seconds=$PROFILE_SECONDS"
	) &
	prof_pid=$!
	run_step "$WORK/profile.load.txt" "$CONNS" "$((PROFILE_SECONDS + 4))s" unique "$WORK/tokens-run.txt"
	wait "$prof_pid" || die "could not fetch the CPU profile"
	stop_server
	(cd "$ROOT" && go tool pprof -top -nodecount=30 "$KG" "$WORK/cpu.pprof") >"$WORK/profile-top.txt" 2>&1 || true
	(cd "$ROOT" && go tool pprof -top -cum -nodecount=30 "$KG" "$WORK/cpu.pprof") >"$WORK/profile-cum.txt" 2>&1 || true
fi

# --- report ----------------------------------------------------------------

med() { stat "$1" 4 | cut -d' ' -f1; }
errs() { # socket errors + non-2xx over every run of a scenario
	echo $(($(stat "$1" 5 | cut -d' ' -f4 | cut -d. -f1) + $(stat "$1" 6 | cut -d' ' -f4 | cut -d. -f1)))
}
verdict() { # ok-condition
	if [[ $(awk "BEGIN { print ($1) ? 1 : 0 }") == 1 ]]; then echo PASS; else echo FAIL; fi
}

describe() {
	case $1 in
	noop) echo "no-op net/http server, fixed token header" ;;
	noop-unique) echo "no-op net/http server, distinct token per request" ;;
	keygate-hit) echo "keygate /auth, cache hits (one token)" ;;
	es256) echo "no-op + one raw ES256 verify per request" ;;
	keygate-unique) echo "keygate /auth, distinct ES256 token per request" ;;
	noop-high) echo "no-op net/http server, fixed token header" ;;
	keygate-hit-high) echo "keygate /auth, cache hits (one token)" ;;
	raw-es256) echo "raw ES256 verify, in process, 1 goroutine (verifies/s)" ;;
	esac
}

TABLE=$WORK/table.md
{
	commit=$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown)
	dirty=$(cd "$ROOT" && git status --porcelain 2>/dev/null | grep -q . && echo "+changes" || true)
	echo "### keygate forward-auth load test ($(date -u +%Y-%m-%d), keygate $commit$dirty)"
	echo
	echo "$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo), $ncpu CPUs, Linux $(uname -r), $(go version | cut -d' ' -f3), keygate bench load."
	echo "Server on CPU $SERVER_CPU (GOMAXPROCS=1), keygate bench load (GOMAXPROCS=1) on CPU $CLIENT_CPU, loopback; each run ${WARMUP} warm-up + ${DURATION} measured on a fresh server process;"
	echo "median of $RUNS interleaved runs; spread = (max - min) / median. Load average at the start of each round: ${LOADS[*]}."
	echo
	echo "| scenario | connections | requests/s (median) | spread | runs (min - max) | p50 / p99 latency (median) | errors + non-2xx | server CPU / others on its core (median) |"
	echo "| --- | ---: | ---: | ---: | --- | --- | ---: | --- |"
	for name in raw-es256 noop noop-unique keygate-hit es256 keygate-unique noop-high keygate-hit-high; do
		read -r m lo hi _ n < <(stat "$name" 4)
		((n > 0)) || continue
		conns=$(awk -F'\t' -v s="$name" 'NR > 1 && $1 == s { print $3; exit }' "$RESULTS")
		spread=$(calc "($hi - $lo) / $m * 100" 1)
		if [[ $name == raw-es256 ]]; then
			echo "| $(describe "$name") | - | $(fmt_n "$m") | ${spread}% | $(fmt_n "$lo") - $(fmt_n "$hi") | - | - | - |"
			continue
		fi
		p50=$(stat "$name" 8 | cut -d' ' -f1)
		p99=$(stat "$name" 9 | cut -d' ' -f1)
		note=""
		wraps=$(stat "$name" 7 | cut -d' ' -f4)
		[[ $name == keygate-unique && ${wraps%.*} != 0 ]] && note=" (INVALID: tokens repeated)"
		cpu=$(stat "$name" 10 | cut -d' ' -f1)
		other=$(stat "$name" 11 | cut -d' ' -f1)
		echo "| $(describe "$name")$note | $(fmt_n "$conns") | $(fmt_n "$m") | ${spread}% | $(fmt_n "$lo") - $(fmt_n "$hi") | $(calc "$p50 / 1000") / $(calc "$p99 / 1000") ms | $(errs "$name") | $(calc "$cpu" 0)% / $(calc "$other" 0)% |"
	done
	echo

	noop=$(med noop)
	noop_u=$(med noop-unique)
	hit=$(med keygate-hit)
	es=$(med es256)
	uniq=$(med keygate-unique)
	raw=$(med raw-es256)
	bound=$(calc "1 / (1 / $noop + 1 / $raw)" 0)
	echo "| target | measured | target | result |"
	echo "| --- | ---: | ---: | --- |"
	a=$(calc "$hit / $noop")
	ea=$(errs keygate-hit)
	echo "| (a) keygate cache hits / no-op ($(fmt_n "$hit") / $(fmt_n "$noop")) | **$a** | >= 0.70 | $(verdict "$a >= 0.70 && $ea == 0") |"
	b=$(calc "$uniq / $bound")
	eb=$(errs keygate-unique)
	wb=$(stat keygate-unique 7 | cut -d' ' -f4)
	echo "| (b) keygate distinct tokens / bound 1/(1/no-op + 1/raw) = $(fmt_n "$uniq") / $(fmt_n "$bound") | **$b** | >= 0.90 | $(verdict "$b >= 0.90 && $eb == 0 && ${wb%.*} == 0") |"
	echo "| (b) keygate distinct tokens / raw ES256 verifies/s on one core ($(fmt_n "$raw")) | $(calc "$uniq / $raw") | - | info |"
	echo "| (b) keygate distinct tokens / measured no-op + raw verify server ($(fmt_n "$es")) | $(calc "$uniq / $es") | - | info |"
	echo "| (b) measured no-op + raw verify server / bound | $(calc "$es / $bound") | - | info |"
	if ((HIGH_CONNS > 0)); then
		noop_h=$(med noop-high)
		hit_h=$(med keygate-hit-high)
		rn=$(calc "$noop_h / $noop" 3)
		rk=$(calc "$hit_h / $hit" 3)
		c=$(calc "$rk / $rn")
		ec=$(($(errs keygate-hit-high) + $(errs noop-high)))
		echo "| (c) keygate $(fmt_n "$HIGH_CONNS")/$(fmt_n "$CONNS")-connection ratio ($rk) / no-op's ($rn) | **$c** | >= 0.90, 0 errors | $(verdict "$c >= 0.90 && $ec == 0") |"
	fi
	echo
	echo "(b)'s bound takes the no-op server's rate with one fixed header ($(fmt_n "$noop")/s). With a distinct token per request the no-op server reached"
	echo "$(fmt_n "$noop_u")/s at $(calc "$(stat noop-unique 10 | cut -d' ' -f1)" 0)% server CPU: the generator sends distinct tokens far faster than keygate verifies them."
	echo "Command: DURATION=$DURATION WARMUP=$WARMUP RUNS=$RUNS CONNS=$CONNS HIGH_CONNS=$HIGH_CONNS scripts/loadtest.sh"
} >"$TABLE"

echo
cat "$TABLE"
echo
echo "load before: $UPTIME_BEFORE"
echo "load after:  $UPTIME_AFTER"
if ((PROFILE_SECONDS > 0)); then
	echo
	echo "CPU profile of keygate, distinct tokens, ${PROFILE_SECONDS}s ($(sed -n 's/^RESULT requests=\([0-9]*\) duration_us=\([0-9]*\).*/\1 \2/p' "$WORK/profile.load.txt" | awk '{ printf "%.0f req/s", $1 / ($2 / 1e6) }')):"
	sed -n '1,40p' "$WORK/profile-top.txt"
fi
