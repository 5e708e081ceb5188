#!/usr/bin/env bash
# Loopback load test of keygate's token service:
#   - POST /oauth2/token, grant_type=client_credentials (an ES256 access
#     token signed per request), against one core's ES256 sign rate measured
#     in the same session (target: issuance / sign rate >= 0.70);
#   - POST /oauth2/introspect of one fixed access token (cache hits), and of
#     a distinct token each request (each verified in full; the tokens are
#     issued just before by the same server, scripts/wrk/capture.lua), all
#     authenticated with the dev-mode demo client (HTTP Basic);
#   - the same POST against two reference servers on the same CPU and port
#     (keygate bench server): no-op, and one raw ES256 sign per request, to
#     show what the HTTP stack alone allows on the machine.
#
# Same pinning as scripts/loadtest.sh: keygate on CPU SERVER_CPU with
# GOMAXPROCS=1, keygate bench load on CPU CLIENT_CPU, loopback only. Each round starts a
# fresh `keygate serve --dev` on a fresh data directory, measures the sign
# rate (keygate bench sign --alg ES256 --goroutines 1, pinned like the
# server), then issuance and introspection, each after a warm-up. The table
# gives the median of RUNS rounds and the spread (max-min)/median.
#
#   scripts/loadtest-tokens.sh                              # full: 3 rounds of 10 s (~2 min)
#   DURATION=3s WARMUP=1s RUNS=1 scripts/loadtest-tokens.sh # smoke (~20 s)
#   PROFILE_SECONDS=5 scripts/loadtest-tokens.sh            # also profile keygate under issuance
#
# Settings (environment):
#   DURATION=10s WARMUP=2s RUNS=3   measured run, warm-up and rounds
#   CONNS=50                        connections
#   SERVER_CPU=0 CLIENT_CPU=1       taskset CPUs
#   WRK_TIMEOUT=2s                  the generator's per-request timeout
#   SIGN_DURATION=3s                each in-process ES256 sign measurement
#   PORT=18080 ADMIN_PORT=19090     loopback ports
#   PROFILE_SECONDS=0               >0: CPU profile of keygate under issuance
#   OUT=DIR                         keep results, generator output, logs and the profile
#   MAX_SECONDS=600                 refuse a configuration estimated to run longer
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-2s}
RUNS=${RUNS:-3}
CONNS=${CONNS:-50}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
WRK_TIMEOUT=${WRK_TIMEOUT:-2s}
SIGN_DURATION=${SIGN_DURATION:-3s}
PORT=${PORT:-18080}
ADMIN_PORT=${ADMIN_PORT:-19090}
PROFILE_SECONDS=${PROFILE_SECONDS:-0}
OUT=${OUT:-}
MAX_SECONDS=${MAX_SECONDS:-600}


DUR_S=$(secs "$DURATION")
WARM_S=$(secs "$WARMUP")
SIGN_S=$(secs "$SIGN_DURATION")
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer"
[[ $PROFILE_SECONDS =~ ^[0-9]+$ ]] || die "PROFILE_SECONDS must be a whole number"
((DUR_S > 0 && SIGN_S > 0)) || die "DURATION and SIGN_DURATION must be at least 1s"
estimate=$((30 + RUNS * (2 * SIGN_S + 8 + 4 * (WARM_S + DUR_S + 1) + 2 * DUR_S + 5)))
((PROFILE_SECONDS > 0)) && estimate=$((estimate + PROFILE_SECONDS + WARM_S + 15))
((estimate <= MAX_SECONDS)) || die "estimated ${estimate}s is over MAX_SECONDS=$MAX_SECONDS; shorten DURATION or RUNS"

check_host go wrk taskset curl awk sort timeout base64
check_ports PORT ADMIN_PORT

# --- clean-up --------------------------------------------------------------

WORK=$(mktemp -d "${TMPDIR:-/tmp}/keygate-loadtest-tokens.XXXXXX")
SERVER_PID=""
WRK_PID=""


OUT_SKIP=("data-*" keygate auth.txt "*.body" tokens.txt)
install_cleanup

# --- build -----------------------------------------------------------------

log "building keygate"
(cd "$ROOT" && go build -o "$WORK/keygate" ./cmd/keygate)
KG=$WORK/keygate
BASE=http://127.0.0.1:$PORT


# sign_rate prints one core's ES256 signs/s (jose, fresh key, ~300-byte
# claims), measured in process on SERVER_CPU with one goroutine.
sign_rate() {
	pinned "$KG" bench sign --alg ES256 --goroutines 1 --duration "$1" | awk '$1 == "ES256" { print $2 }'
}

# verify_rate prints one core's raw ES256 verifies/s (crypto/ecdsa alone),
# measured like sign_rate: what distinct-token introspection is bounded by.
verify_rate() {
	pinned "$KG" bench verify --alg ES256 --raw --goroutines 1 --duration "$1" | awk '$1 == "ES256" { print $2 }'
}

# start_server log [KEYGATE_VAR=value...]: a fresh dev-mode keygate on a
# fresh data directory, with those settings; sets SERVER_PID and writes the
# demo client's Authorization header to auth.txt.
start_server() {
	local out=$1 data
	shift
	data=$(mktemp -d "$WORK/data-XXXXXX")
	# taskset directly, not the pinned function: $! must be keygate's pid.
	ADMIN_TOKEN_FILE=$data/admin.token # dev mode writes it; /debug/pprof/ requires it
	: >"$out" # read below before the background job may have opened it
	taskset -c "$SERVER_CPU" env GOMAXPROCS=1 KEYGATE_PPROF=true KEYGATE_TOKEN_SERVICE_TOKEN_RATE_LIMIT=1e6 "$@" \
		"$KG" serve --dev --data-dir "$data" --listen "127.0.0.1:$PORT" --admin-listen "127.0.0.1:$ADMIN_PORT" \
		>"$out" 2>&1 &
	SERVER_PID=$!
	local id="" secret=""
	for _ in $(seq 1 100); do
		kill -0 "$SERVER_PID" 2>/dev/null || die "keygate exited at start: $(tail -5 "$out")"
		id=$(sed -n 's/^client_id=//p' "$out" | head -n 1)
		secret=$(sed -n 's/^client_secret=//p' "$out" | head -n 1)
		if [[ -n $id && -n $secret ]] &&
			[[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$BASE/healthz") != 000 ]]; then
			printf 'Basic %s\n' "$(printf '%s:%s' "$id" "$secret" | base64 -w0)" >"$WORK/auth.txt"
			return 0
		fi
		sleep 0.1
	done
	die "keygate did not print a demo client and answer within 10s: $(tail -5 "$out")"
}

# start_reference mode log: keygate's reference server (bench server) on the
# same CPU and port, answering the same requests; sets SERVER_PID.
start_reference() {
	local mode=$1 out=$2
	taskset -c "$SERVER_CPU" env GOMAXPROCS=1 "$KG" bench server --mode "$mode" --listen "127.0.0.1:$PORT" >"$out" 2>&1 &
	SERVER_PID=$!
	for _ in $(seq 1 100); do
		kill -0 "$SERVER_PID" 2>/dev/null || die "bench server exited at start: $(tail -5 "$out")"
		[[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 1 -H "$BENCH_MARKER" "$BASE/healthz") == 200 ]] && return 0
		sleep 0.1
	done
	die "bench server --mode $mode did not answer within 10s"
}

# fetch_token: one access token for the demo client, checked.
fetch_token() {
	local body
	body=$(curl -sf --max-time 5 -H "Authorization: $(cat "$WORK/auth.txt")" \
		-d grant_type=client_credentials "$BASE/oauth2/token") || die "POST /oauth2/token failed"
	sed -n 's/.*"access_token":"\([^"]*\)".*/\1/p' <<<"$body"
}

# run_step out path body_file duration [script]: keygate bench load
# (run_load) POSTing the form body_file with the client's Basic credentials
# (script form, the default), or one distinct token of the token file
# body_file per request as token=... (script unique-form); or wrk with
# scripts/wrk/capture.lua, which writes the issued tokens to
# $WORK/tokens.txt (script capture: keygate bench load does not keep
# answers, so collecting issued tokens is wrk's last job here).
run_step() {
	local out=$1 path=$2 body=$3 duration=$4 script=${5:-form}
	local hdr=(-H "Authorization: $(cat "$WORK/auth.txt")" -H 'Content-Type: application/x-www-form-urlencoded')
	case $script in
	form) run_load "$out" "$CONNS" "$duration" --url "$BASE$path" --method POST --body-file "$body" "${hdr[@]}" ;;
	unique-form)
		POOL_N=$(wc -l <"$body") run_load "$out" "$CONNS" "$duration" --url "$BASE$path" --method POST \
			--body 'token={{value}}' --values "$body" "${hdr[@]}"
		;;
	capture)
		timeout --kill-after=5 $(($(secs "$duration") + 60)) \
			taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d"$duration" --timeout "$WRK_TIMEOUT" \
			-s "$ROOT/scripts/wrk/capture.lua" "$BASE$path" -- "$WORK/auth.txt" "$body" "$WORK/tokens.txt" >"$out" 2>&1 &
		WRK_PID=$!
		wait_wrk "$out"
		;;
	*) die "unknown script $script" ;;
	esac
}

# The server's CPU time per request (its utime + stime over the measured
# run, in clock ticks of CLK_TCK a second, divided by the requests): unlike
# requests/s it does not move with what else runs on the server's CPU.
CLK_TCK=$(getconf CLK_TCK)
cpu_ticks() { awk -v c="cpu$1" '$1 == c { print $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat; }

RESULTS=$WORK/results.tsv
printf 'scenario\trun\trps\terrors\tnon2xx\tp50_us\tp99_us\tserver_cpu_pct\tcpu_us_per_req\n' >"$RESULTS"

measure() { # round name path body_file [script]
	local round=$1 name=$2 path=$3 body=$4 script=${5:-form}
	# Distinct tokens are used once: a warm-up would turn the run's first
	# requests into cache hits.
	((WARM_S > 0)) && [[ $script == form ]] && run_step "$WORK/$name-$round.warmup.txt" "$path" "$body" "$WARMUP"
	local p0 c0 p1 c1
	p0=$(proc_ticks "$SERVER_PID") c0=$(cpu_ticks "$SERVER_CPU")
	run_step "$WORK/$name-$round.load.txt" "$path" "$body" "$DURATION" "$script"
	if grep -q 'wraps=[1-9]' "$WORK/$name-$round.load.txt"; then
		die "$name run $round ran out of distinct tokens (wraps > 0): its requests were cache hits"
	fi
	p1=$(proc_ticks "$SERVER_PID") c1=$(cpu_ticks "$SERVER_CPU")
	sed -n 's/^RESULT //p' "$WORK/$name-$round.load.txt" | awk -v name="$name" -v run="$round" \
		-v pt=$((p1 - p0)) -v ct=$((c1 - c0)) -v hz="$CLK_TCK" '{
		for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		printf "%s\t%d\t%.1f\t%d\t%d\t%d\t%d\t%.1f\t%.2f\n", name, run, v["requests"] / (v["duration_us"] / 1e6),
			v["connect"] + v["read"] + v["write"] + v["timeout"], v["status"], v["p50_us"], v["p99_us"],
			(ct > 0 ? pt / ct * 100 : 0), (v["requests"] > 0 ? pt / hz * 1e6 / v["requests"] : 0) }' >>"$RESULTS"
	log "$(tail -n 1 "$RESULTS" | awk -F'\t' '{ printf "%-11s run %d: %8.0f req/s  errors %d  non-2xx %d  p50 %d us  p99 %d us  server CPU %.0f%%, %.1f us a request", $1, $2, $3, $4, $5, $6, $7, $8, $9 }')"
}

# --- measure ---------------------------------------------------------------

printf 'grant_type=client_credentials' >"$WORK/issue.body"
UPTIME_BEFORE=$(uptime)
log "load before: $UPTIME_BEFORE"
log "$RUNS rounds: ${SIGN_DURATION} sign rate, then issuance and introspection, ${WARMUP} warm-up + ${DURATION} each (at most ~${estimate}s)"
LOADS=()
for round in $(seq 1 "$RUNS"); do
	LOADS+=("$(cut -d' ' -f1-3 /proc/loadavg)")
	r=$(sign_rate "$SIGN_DURATION")
	[[ -n $r ]] || die "ES256 sign measurement failed"
	printf 'sign\t%d\t%s\t0\t0\t0\t0\t0\n' "$round" "$r" >>"$RESULTS"
	log "ES256 sign   run $round: $r signs/s (in process, 1 goroutine, CPU $SERVER_CPU)"
	r=$(verify_rate "$SIGN_DURATION")
	[[ -n $r ]] || die "ES256 verify measurement failed"
	printf 'verify\t%d\t%s\t0\t0\t0\t0\t0\n' "$round" "$r" >>"$RESULTS"
	log "ES256 verify run $round: $r verifies/s (raw, in process, 1 goroutine, CPU $SERVER_CPU)"
	start_server "$WORK/server-$round.log"
	tok=$(fetch_token)
	[[ -n $tok ]] || die "no access_token in the token response"
	printf 'token=%s\n' "$tok" >"$WORK/introspect.body"
	active=$(curl -sf --max-time 5 -H "Authorization: $(cat "$WORK/auth.txt")" -d "token=$tok" "$BASE/oauth2/introspect") ||
		die "POST /oauth2/introspect failed"
	[[ $active == *'"active":true'* ]] || die "introspection of a fresh token: $active"
	measure "$round" issue /oauth2/token "$WORK/issue.body"
	measure "$round" introspect /oauth2/introspect "$WORK/introspect.body"
	# Distinct tokens: issue them (not measured) for as long as the run
	# lasts plus a margin, since verifying costs more than signing.
	run_step "$WORK/capture-$round.load.txt" /oauth2/token "$WORK/issue.body" "$((DUR_S + 3))s" capture
	log "issued $(wc -l <"$WORK/tokens.txt") distinct tokens for the next run"
	measure "$round" introspect-unique /oauth2/introspect "$WORK/tokens.txt" unique-form
	stop_server
	start_server "$WORK/server-noaudit-$round.log" KEYGATE_AUDIT_DISABLED=true
	measure "$round" issue-noaudit /oauth2/token "$WORK/issue.body"
	stop_server
	for mode in noop es256-sign; do
		start_reference "$mode" "$WORK/ref-$mode-$round.log"
		measure "$round" "ref-$mode" /oauth2/token "$WORK/issue.body"
		stop_server
	done
done
UPTIME_AFTER=$(uptime)
log "load after: $UPTIME_AFTER"

# --- profile ---------------------------------------------------------------

if ((PROFILE_SECONDS > 0)); then
	log "profiling keygate under issuance for ${PROFILE_SECONDS}s"
	start_server "$WORK/profile.log"
	(
		sleep 2
		curl -sf --max-time $((PROFILE_SECONDS + 20)) -H "Authorization: Bearer $(cat "$ADMIN_TOKEN_FILE")" -o "$WORK/cpu.pprof" \
			"http://127.0.0.1:$ADMIN_PORT/debug/pprof/profile?seconds=$PROFILE_SECONDS"
	) &
	prof_pid=$!
	run_step "$WORK/profile.load.txt" /oauth2/token "$WORK/issue.body" "$((PROFILE_SECONDS + 4))s"
	wait "$prof_pid" || die "could not fetch the CPU profile"
	stop_server
	(cd "$ROOT" && go tool pprof -top -nodecount=25 "$KG" "$WORK/cpu.pprof") >"$WORK/profile-top.txt" 2>&1 || true
	(cd "$ROOT" && go tool pprof -top -cum -nodecount=30 "$KG" "$WORK/cpu.pprof") >"$WORK/profile-cum.txt" 2>&1 || true
fi

# --- report ----------------------------------------------------------------

med() { stat "$1" "${2:-3}" | cut -d' ' -f1; }
sum() { stat "$1" "$2" | cut -d' ' -f4 | cut -d. -f1; }

TABLE=$WORK/table.md
{
	commit=$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown)
	dirty=$(cd "$ROOT" && git status --porcelain 2>/dev/null | grep -q . && echo "+changes" || true)
	echo "### keygate token endpoints load test ($(date -u +%Y-%m-%d), keygate $commit$dirty)"
	echo
	echo "$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo), $ncpu CPUs, Linux $(uname -r), $(go version | cut -d' ' -f3), keygate bench load; $(wrk -v 2>&1 | head -n 1 | cut -d' ' -f1-2) only collects the tokens introspect-unique sends."
	echo "keygate serve --dev on CPU $SERVER_CPU (GOMAXPROCS=1), keygate bench load -c$CONNS (GOMAXPROCS=1) on CPU $CLIENT_CPU, loopback; fresh server and data directory per round,"
	echo "${WARMUP} warm-up + ${DURATION} measured; median of $RUNS rounds; spread = (max - min) / median. Load average at each round's start: ${LOADS[*]}."
	echo
	echo "| scenario | requests/s (median) | spread | runs (min - max) | p50 / p99 latency | errors + non-2xx | server CPU | server CPU a request |"
	echo "| --- | ---: | ---: | --- | --- | ---: | ---: | ---: |"
	for name in sign verify issue issue-noaudit introspect introspect-unique ref-noop ref-es256-sign; do
		read -r m lo hi _ n < <(stat "$name" 3)
		((n > 0)) || continue
		spread=$(calc "($hi - $lo) / $m * 100" 1)
		case $name in
		sign)
			echo "| ES256 sign, jose, in process, 1 goroutine (signs/s) | $(fmt_n "$m") | ${spread}% | $(fmt_n "$lo") - $(fmt_n "$hi") | - | - | - | $(calc "1e6 / $m" 1) µs |"
			continue
			;;
		verify)
			echo "| ES256 verify, raw crypto/ecdsa, in process, 1 goroutine (verifies/s) | $(fmt_n "$m") | ${spread}% | $(fmt_n "$lo") - $(fmt_n "$hi") | - | - | - | $(calc "1e6 / $m" 1) µs |"
			continue
			;;
		issue) desc="POST /oauth2/token, client_credentials, ES256 (audit on, as serve --dev has it)" ;;
		issue-noaudit) desc="POST /oauth2/token, client_credentials, ES256, audit off" ;;
		introspect) desc="POST /oauth2/introspect, one fixed access token" ;;
		introspect-unique) desc="POST /oauth2/introspect, a distinct token each request (verified in full)" ;;
		ref-noop) desc="reference: net/http answering the same POST with 200, no work" ;;
		ref-es256-sign) desc="reference: net/http, read the body, one raw ES256 sign, a token response" ;;
		esac
		echo "| $desc | $(fmt_n "$m") | ${spread}% | $(fmt_n "$lo") - $(fmt_n "$hi") | $(calc "$(med "$name" 6) / 1000") / $(calc "$(med "$name" 7) / 1000") ms | $(($(sum "$name" 4) + $(sum "$name" 5))) | $(calc "$(med "$name" 8)" 0)% | $(calc "$(med "$name" 9)" 1) µs |"
	done
	echo
	issue=$(med issue)
	sign=$(med sign)
	ratio=$(calc "$issue / $sign")
	errs=$(($(sum issue 4) + $(sum issue 5)))
	verdict=FAIL
	[[ $(awk "BEGIN { print ($ratio >= 0.70 && $errs == 0) ? 1 : 0 }") == 1 ]] && verdict=PASS
	echo "| target | measured | target | result |"
	echo "| --- | ---: | ---: | --- |"
	echo "| issuance / one core's ES256 sign rate ($(fmt_n "$issue") / $(fmt_n "$sign")) | **$ratio** | >= 0.70 | $verdict |"
	noop=$(med ref-noop)
	refsign=$(med ref-es256-sign)
	bound=$(calc "1 / (1 / $noop + 1 / $sign)" 0)
	echo "| the sign reference server / the sign rate ($(fmt_n "$refsign") / $(fmt_n "$sign")): what one sign per request allows here | $(calc "$refsign / $sign") | - | info |"
	echo "| issuance / the sign reference server ($(fmt_n "$issue") / $(fmt_n "$refsign")) | $(calc "$issue / $refsign") | - | info |"
	echo "| 1 / (1/no-op + 1/sign) = $(fmt_n "$bound") req/s, over the sign rate: optimistic, it leaves out waking the client | $(calc "$bound / $sign") | - | info |"
	echo "| per round, then the median: issuance / the sign reference server, requests/s, audit on / off | $(pair_ratio issue ref-es256-sign 3) / $(pair_ratio issue-noaudit ref-es256-sign 3) | - | info |"
	echo "| per round, then the median: the sign reference server's CPU a request ÷ issuance's, audit on / off (the share of its rate issuance reaches on the same CPU) | **$(pair_ratio ref-es256-sign issue 9) / $(pair_ratio ref-es256-sign issue-noaudit 9)** | - | info |"
	echo "| introspections/s, one token / distinct tokens | $(fmt_n "$(med introspect)") / $(fmt_n "$(med introspect-unique)") | - | info |"
	echo "| distinct-token introspection / one core's raw ES256 verify rate ($(fmt_n "$(med introspect-unique)") / $(fmt_n "$(med verify)")) | $(calc "$(med introspect-unique) / $(med verify)") | - | info |"
	echo
	echo "Command: DURATION=$DURATION WARMUP=$WARMUP RUNS=$RUNS CONNS=$CONNS scripts/loadtest-tokens.sh"
} >"$TABLE"

echo
cat "$TABLE"
echo
echo "load before: $UPTIME_BEFORE"
echo "load after:  $UPTIME_AFTER"
if ((PROFILE_SECONDS > 0)); then
	echo
	echo "CPU profile of keygate under issuance, ${PROFILE_SECONDS}s ($(sed -n 's/^RESULT requests=\([0-9]*\) duration_us=\([0-9]*\).*/\1 \2/p' "$WORK/profile.load.txt" | awk '{ printf "%.0f req/s", $1 / ($2 / 1e6) }')):"
	sed -n '1,35p' "$WORK/profile-top.txt"
	echo
	sed -n '1,40p' "$WORK/profile-cum.txt"
fi
