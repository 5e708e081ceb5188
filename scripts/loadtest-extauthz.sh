#!/usr/bin/env bash
# Loopback load test of keygate's Envoy ext_authz gRPC front end and of
# forward-auth over HTTP/1.1 and h2c, for the issue 13 targets:
#   (a) ext_authz Check, a distinct ES256 token per request: keygate
#       (serve --envoy-grpc-listen) >= 0.90 of the reference gRPC server
#       doing one raw ES256 verify per Check (bench server --mode grpc-es256);
#   (b) ext_authz Check, one repeated token (cache hits): keygate >= 0.70 of
#       a no-op gRPC Check server (bench server --mode grpc-noop);
#   (c) the same distinct-token workload on GET /auth over HTTP/1.1 and over
#       h2c (prior knowledge), side by side, with a CPU profile of keygate
#       under each (and under (a)) to say what each transport costs.
#
# Every load is keygate's own generator: 'keygate bench extauthz' (gRPC) and
# 'keygate bench load' (HTTP/1.1, --http2 for h2c), with the same
# concurrency everywhere: GRPC_CONNS connections x STREAMS concurrent calls
# for gRPC and h2c, GRPC_CONNS x STREAMS HTTP/1.1 connections. The server
# runs on CPU SERVER_CPU with GOMAXPROCS=1, the generator on CPU CLIENT_CPU;
# every server is a fresh process per run (keygate's cache starts empty);
# scenarios are interleaved round by round; the table gives medians of RUNS
# rounds and the spread (max-min)/median.
#
#   scripts/loadtest-extauthz.sh                              # full: 3 rounds of 8 s (~5 min)
#   DURATION=3s WARMUP=1s RUNS=1 PROFILE_SECONDS=0 scripts/loadtest-extauthz.sh   # smoke (~1 min)
#
# Settings (environment):
#   DURATION=8s WARMUP=2s RUNS=3     measured run, warm-up and rounds
#   GRPC_CONNS=4 STREAMS=16          gRPC/h2c connections and calls per connection
#   SERVER_CPU=0 CLIENT_CPU=1        taskset CPUs
#   PORT=18080 GRPC_PORT=18082 ADMIN_PORT=19090   loopback ports
#   PROFILE_SECONDS=5                >0: CPU profiles of keygate under distinct tokens
#                                    (HTTP/1.1, h2c, gRPC); 0 skips
#   NOISY=15 RETRIES=3               a run in which other processes took over NOISY% of the
#                                    server's core is run again, RETRIES times at most in all
#   OUT=DIR                          keep results, outputs, logs and profiles
#   MAX_SECONDS=360                  refuse a configuration estimated to run longer (retries
#                                    included)
#   ONLY="grpc-es256-table extauthz-unique"   run only these scenarios (names below), in this
#                                    order within each round; the default runs all but
#                                    grpc-es256-table and extauthz-base
#   BASE_KEYGATE=PATH                a keygate binary (an earlier build) that the scenario
#                                    extauthz-base runs as extauthz-unique does, for a
#                                    before/after pair within one session
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DURATION=${DURATION:-8s}
WARMUP=${WARMUP:-2s}
RUNS=${RUNS:-3}
GRPC_CONNS=${GRPC_CONNS:-4}
STREAMS=${STREAMS:-16}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
PORT=${PORT:-18080}
GRPC_PORT=${GRPC_PORT:-18082}
ADMIN_PORT=${ADMIN_PORT:-19090}
PROFILE_SECONDS=${PROFILE_SECONDS:-5}
NOISY=${NOISY:-15}
RETRIES=${RETRIES:-3}
OUT=${OUT:-}
MAX_SECONDS=${MAX_SECONDS:-360}

DUR_S=$(secs "$DURATION")
WARM_S=$(secs "$WARMUP")
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer"
[[ $PROFILE_SECONDS =~ ^[0-9]+$ ]] || die "PROFILE_SECONDS must be a whole number"
((DUR_S > 0)) || die "DURATION must be at least 1s"
CONC=$((GRPC_CONNS * STREAMS))

# Scenarios: name, server (keygate, grpc-es256, grpc-es256-table, grpc-noop), load (grpc, http1, h2c), tokens (unique, hit).
ALL_SCENARIOS=(
	"grpc-es256 grpc-es256 grpc unique"
	"grpc-es256-table grpc-es256-table grpc unique"
	"extauthz-unique keygate grpc unique"
	"extauthz-base keygate-base grpc unique"
	"grpc-noop grpc-noop grpc hit"
	"extauthz-hit keygate grpc hit"
	"http1-unique keygate http1 unique"
	"h2c-unique keygate h2c unique"
)
ONLY=${ONLY:-grpc-es256 extauthz-unique grpc-noop extauthz-hit http1-unique h2c-unique}
SCENARIOS=()
for want in $ONLY; do
	found=""
	for s in "${ALL_SCENARIOS[@]}"; do
		[[ ${s%% *} == "$want" ]] && SCENARIOS+=("$s") && found=1
	done
	[[ -n $found ]] || die "unknown scenario $want in ONLY"
done
has_scenario() { [[ " $ONLY " == *" $1 "* ]]; }
estimate=$((40 + (RUNS * ${#SCENARIOS[@]} + RETRIES) * (WARM_S + DUR_S + 3)))
((PROFILE_SECONDS > 0)) && estimate=$((estimate + 3 * (PROFILE_SECONDS + WARM_S + 8)))
((estimate <= MAX_SECONDS)) || die "estimated ${estimate}s is over MAX_SECONDS=$MAX_SECONDS; shorten DURATION or RUNS"

check_host go taskset curl awk sort timeout
check_ports PORT GRPC_PORT ADMIN_PORT

WORK=$(mktemp -d "${TMPDIR:-/tmp}/keygate-loadtest-extauthz.XXXXXX")
SERVER_PID=""
WRK_PID="" # the load generator running in the background (lib.sh's name)
OUT_SKIP=("tokens*.txt" token-hit.txt issuer.pem admin.token data keygate)
install_cleanup

log "building keygate"
(cd "$ROOT" && go build -o "$WORK/keygate" ./cmd/keygate)
KG=$WORK/keygate
"$KG" keys generate --alg ES256 --out "$WORK/issuer.pem" >/dev/null
head -c 48 /dev/urandom | base64 -w0 >"$WORK/admin.token"
ADMIN_TOKEN=$(cat "$WORK/admin.token")

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

# Enough distinct tokens for a whole run (warm-up included: a run's pool
# index goes on from the warm-up), at 1.5x one core's raw ES256 verify rate,
# which no server here can beat.
sizing=$(pinned "$KG" bench verify --raw --goroutines 1 --duration 1s | awk '$1 == "ES256" { print $2 }')
[[ $sizing =~ ^[0-9]+$ ]] || die "keygate bench verify --raw printed no ES256 rate"
rate=$((sizing > 12000 ? sizing : 12000)) # at least what an unloaded 2-core VM verifies
longest=$((DUR_S > PROFILE_SECONDS + 4 ? DUR_S : PROFILE_SECONDS + 4))
N_TOKENS=$((rate * (WARM_S + longest) * 3 / 2 + CONC + 1000))
log "raw ES256 about $sizing/s on CPU $SERVER_CPU: minting $N_TOKENS tokens"
"$KG" bench tokens --key "$WORK/issuer.pem" --iss "$ISSUER" --aud "$AUDIENCE" --n "$N_TOKENS" --out "$WORK/tokens.txt" >/dev/null
"$KG" bench tokens --key "$WORK/issuer.pem" --iss "$ISSUER" --aud "$AUDIENCE" --n 1 --out "$WORK/token-hit.txt" >/dev/null

# wait_port port: the port accepts connections within 10 s.
wait_port() {
	for _ in $(seq 1 100); do
		kill -0 "$SERVER_PID" 2>/dev/null || die "server exited at start: $(tail -5 "$2")"
		port_free "$1" || return 0
		sleep 0.1
	done
	die "nothing listens on port $1 after 10s: $(tail -5 "$2")"
}

start_server() { # kind log
	case $1 in
	keygate | keygate-base)
		local bin=$KG
		if [[ $1 == keygate-base ]]; then
			[[ -x ${BASE_KEYGATE:-} ]] || die "the scenario extauthz-base needs BASE_KEYGATE, a keygate binary"
			bin=$BASE_KEYGATE
		fi
		taskset -c "$SERVER_CPU" env GOMAXPROCS=1 KEYGATE_PPROF=true KEYGATE_TOKEN_SERVICE_ADMIN_TOKEN_FILE="$WORK/admin.token" \
			"$bin" serve --config "$WORK/config.yaml" --envoy-grpc-listen "127.0.0.1:$GRPC_PORT" >"$2" 2>&1 &
		SERVER_PID=$!
		wait_port "$PORT" "$2"
		wait_port "$GRPC_PORT" "$2"
		local code
		code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -H "Authorization: Bearer $(cat "$WORK/token-hit.txt")" \
			"http://127.0.0.1:$PORT/auth")
		[[ $code == 200 ]] || die "GET /auth answered $code, not 200, to a valid token"
		;;
	grpc-noop | grpc-es256 | grpc-es256-table)
		taskset -c "$SERVER_CPU" env GOMAXPROCS=1 "$KG" bench server --mode "$1" --listen "127.0.0.1:$GRPC_PORT" >"$2" 2>&1 &
		SERVER_PID=$!
		wait_port "$GRPC_PORT" "$2"
		;;
	*) die "unknown server $1" ;;
	esac
}

# load out kind tokens duration warmup: one run of the generator on
# CLIENT_CPU, JSON to out, in the background (WRK_PID).
load() {
	local out=$1 kind=$2 tokens=$3 duration=$4 warmup=$5 tok
	tok=(--token-file "$WORK/tokens.txt")
	[[ $tokens == hit ]] && tok=(--token-file "$WORK/token-hit.txt")
	case $kind in
	grpc)
		timeout --kill-after=5 $(($(secs "$duration") + $(secs "$warmup") + 60)) \
			taskset -c "$CLIENT_CPU" "$KG" bench extauthz --target "127.0.0.1:$GRPC_PORT" "${tok[@]}" \
			--host api.example.com --path /orders/42 --connections "$GRPC_CONNS" --streams "$STREAMS" \
			--duration "$duration" --warmup "$warmup" --json >"$out" 2>"$out.err" &
		;;
	http1)
		timeout --kill-after=5 $(($(secs "$duration") + $(secs "$warmup") + 60)) \
			taskset -c "$CLIENT_CPU" "$KG" bench load --url "http://127.0.0.1:$PORT/auth" "${tok[@]}" \
			--connections "$CONC" --duration "$duration" --warmup "$warmup" --json >"$out" 2>"$out.err" &
		;;
	h2c)
		timeout --kill-after=5 $(($(secs "$duration") + $(secs "$warmup") + 60)) \
			taskset -c "$CLIENT_CPU" "$KG" bench load --http2 --url "http://127.0.0.1:$PORT/auth" "${tok[@]}" \
			--connections "$GRPC_CONNS" --streams "$STREAMS" --duration "$duration" --warmup "$warmup" --json >"$out" 2>"$out.err" &
		;;
	esac
	WRK_PID=$!
}

wait_load() { # out
	local code=0
	wait "$WRK_PID" || code=$?
	WRK_PID=""
	((code == 0)) || die "the load generator exited $code: $(tail -5 "$1.err")"
}

# step_field out key: the first value of key in the step of a JSON report.
step_field() {
	awk -v k="\"$2\":" '/"steps"/ { s = 1 } s && $1 == k { v = $2; sub(/,$/, "", v); print v; exit }' "$1"
}

RESULTS=$WORK/results.tsv
printf 'scenario\trun\trps\terrors\tnon2xx\tp50_us\tp99_us\tgen_cpu_pct\tserver_cpu_pct\tother_cpu_pct\tper_cpu_s\tgen_core_others_pct\n' >"$RESULTS"
NOISY_RUNS=$WORK/noisy.tsv # the runs done again, for the record
: >"$NOISY_RUNS"

cpu_ticks() { awk -v c="cpu$1" '$1 == c { print $2 + $3 + $4, $7 + $8 + $9, $5 + $6 }' /proc/stat; }

run_scenario() { # round name server kind tokens
	local round=$1 name=$2 server=$3 kind=$4 tokens=$5 out
	out=$WORK/$name-$round.json
	start_server "$server" "$WORK/$name-$round.log"
	load "$out" "$kind" "$tokens" "$DURATION" "$WARMUP"
	sleep "$WARM_S"
	local before after
	before="$(proc_ticks "$SERVER_PID") $(cpu_ticks "$SERVER_CPU") $(cpu_ticks "$CLIENT_CPU")"
	wait_load "$out"
	after="$(proc_ticks "$SERVER_PID") $(cpu_ticks "$SERVER_CPU") $(cpu_ticks "$CLIENT_CPU")"
	stop_server
	local rps req errs non2xx p50 p99 gen
	rps=$(step_field "$out" requests_per_s)
	req=$(step_field "$out" requests)
	[[ -n $rps && -n $req ]] || die "$name: no result in $out"
	errs=$(awk '/"errors"/ { e = 1; next } e && /}/ { e = 0 } e { v = $2; sub(/,$/, "", v); s += v } END { print s + 0 }' "$out")
	non2xx=$(awk '/"status"/ { e = 1; next } e && /}/ { e = 0 } e && $1 != "\"2xx\":" { v = $2; sub(/,$/, "", v); s += v } END { print s + 0 }' "$out")
	p50=$(step_field "$out" p50_ns)
	p99=$(step_field "$out" p99_ns)
	gen=$(step_field "$out" percent)
	if [[ $tokens == unique ]] && awk -v q="$req" -v r="$rps" -v w="$WARM_S" -v n="$N_TOKENS" 'BEGIN { exit !(q + r * w > n) }'; then
		log "warning: $name run $round may have run out of distinct tokens"
	fi
	awk -v name="$name" -v run="$round" -v rps="$rps" -v errs="$errs" -v non2xx="$non2xx" -v p50="$p50" -v p99="$p99" \
		-v gen="$gen" -v before="$before" -v after="$after" 'BEGIN {
		split(before, b, " "); split(after, a, " ")
		total = (a[2] - b[2]) + (a[3] - b[3]) + (a[4] - b[4])
		srv = total > 0 ? (a[1] - b[1]) / total * 100 : 0
		other = total > 0 ? ((a[2] - b[2]) - (a[1] - b[1])) / total * 100 : 0
		if (other < 0) other = 0
		# Requests per second of CPU time of the server process: what a request
		# costs the server, less sensitive than requests/s to other
		# processes taking turns on its core.
		per = srv > 0 ? rps / (srv / 100) : 0
		# The busy share of the generator core less the generator own share
		# (from its report): what other processes took from it.
		gtotal = (a[5] - b[5]) + (a[6] - b[6]) + (a[7] - b[7])
		gothers = gtotal > 0 ? (a[5] - b[5]) / gtotal * 100 - gen : 0
		if (gothers < 0) gothers = 0
		printf "%s\t%d\t%.1f\t%d\t%d\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\n", name, run, rps, errs, non2xx, p50 / 1000, p99 / 1000, gen, srv, other, per, gothers }' >>"$RESULTS"
	log "$(tail -n 1 "$RESULTS" | awk -F'\t' '{ printf "%-16s run %d: %8.0f req/s  errors %d  non-2xx %d  p50 %d us  p99 %d us  generator CPU %.0f%% (others on its core %.0f%%)  server CPU %.0f%%  others on its core %.0f%%", $1, $2, $3, $4, $5, $6, $7, $8, $12, $9, $10 }')"
	local others
	others=$(tail -n 1 "$RESULTS" | cut -f10)
	if ((RETRIES > 0)) && awk -v o="$others" -v n="$NOISY" 'BEGIN { exit !(o > n) }'; then
		RETRIES=$((RETRIES - 1))
		log "other processes took ${others}% of the server's core: running $name again ($RETRIES retries left)"
		tail -n 1 "$RESULTS" >>"$NOISY_RUNS"
		sed -i '$d' "$RESULTS"
		run_scenario "$@"
	fi
}

UPTIME_BEFORE=$(uptime)
log "load before: $UPTIME_BEFORE"
log "${#SCENARIOS[@]} scenarios x $RUNS rounds, ${WARMUP} warm-up + ${DURATION} each (at most ~$(((estimate + 59) / 60)) min)"
LOADS=()
for round in $(seq 1 "$RUNS"); do
	LOADS+=("$(cut -d' ' -f1-3 /proc/loadavg)")
	# Odd rounds run the scenarios in order, even ones in reverse (A B, B A,
	# ...), so that a drift of the machine's speed favours none of them.
	order=("${SCENARIOS[@]}")
	if ((round % 2 == 0)); then
		order=()
		for ((i = ${#SCENARIOS[@]} - 1; i >= 0; i--)); do order+=("${SCENARIOS[i]}"); done
	fi
	for s in "${order[@]}"; do
		# shellcheck disable=SC2086 # fields
		run_scenario "$round" $s
	done
done
UPTIME_AFTER=$(uptime)
log "load after: $UPTIME_AFTER"

# --- profiles --------------------------------------------------------------

profile() { # name kind
	local name=$1 kind=$2
	log "profiling keygate under distinct tokens over $kind for ${PROFILE_SECONDS}s"
	start_server keygate "$WORK/profile-$name.log"
	load "$WORK/profile-$name.json" "$kind" unique "$((PROFILE_SECONDS + 2))s" "$WARMUP"
	sleep $((WARM_S + 1))
	curl -sf --max-time $((PROFILE_SECONDS + 20)) -H "Authorization: Bearer $ADMIN_TOKEN" -o "$WORK/cpu-$name.pprof" \
		"http://127.0.0.1:$ADMIN_PORT/debug/pprof/profile?seconds=$PROFILE_SECONDS" || die "could not fetch the CPU profile"
	wait_load "$WORK/profile-$name.json"
	stop_server
	(cd "$ROOT" && go tool pprof -top -nodecount=30 "$KG" "$WORK/cpu-$name.pprof") >"$WORK/profile-$name-top.txt" 2>&1 || true
	(cd "$ROOT" && go tool pprof -top -cum -nodecount=40 "$KG" "$WORK/cpu-$name.pprof") >"$WORK/profile-$name-cum.txt" 2>&1 || true
}
if ((PROFILE_SECONDS > 0)); then
	has_scenario http1-unique && profile http1 http1
	has_scenario h2c-unique && profile h2c h2c
	has_scenario extauthz-unique && profile grpc grpc
fi

# --- report ----------------------------------------------------------------

med() { stat "$1" 3 | cut -d' ' -f1; }
errs() { echo $(($(stat "$1" 4 | cut -d' ' -f4 | cut -d. -f1) + $(stat "$1" 5 | cut -d' ' -f4 | cut -d. -f1))); }
verdict() { if [[ $(awk "BEGIN { print ($1) ? 1 : 0 }") == 1 ]]; then echo met; else echo "**not met**"; fi; }
describe() {
	case $1 in
	grpc-es256) echo "reference gRPC server, one raw ES256 verify per Check (distinct tokens)" ;;
	grpc-es256-table) echo "reference gRPC server, one ES256 verify with the key's table per Check (distinct tokens)" ;;
	extauthz-unique) echo "keygate ext_authz Check, a distinct ES256 token per request" ;;
	extauthz-base) echo "keygate ext_authz Check (BASE_KEYGATE), a distinct ES256 token per request" ;;
	grpc-noop) echo "reference gRPC server, no-op Check (one token)" ;;
	extauthz-hit) echo "keygate ext_authz Check, one token (cache hits)" ;;
	http1-unique) echo "keygate GET /auth over HTTP/1.1, a distinct token per request" ;;
	h2c-unique) echo "keygate GET /auth over h2c, a distinct token per request" ;;
	esac
}

TABLE=$WORK/table.md
{
	commit=$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown)
	dirty=$(cd "$ROOT" && git status --porcelain 2>/dev/null | grep -q . && echo "+changes" || true)
	echo "### keygate ext_authz and h2c load test ($(date -u +%Y-%m-%d), keygate $commit$dirty)"
	echo
	echo "$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo), $ncpu CPUs, Linux $(uname -r), $(go version | cut -d' ' -f3)."
	echo "Server on CPU $SERVER_CPU (GOMAXPROCS=1), generator on CPU $CLIENT_CPU, loopback; $CONC requests in flight"
	echo "(gRPC and h2c: $GRPC_CONNS connections x $STREAMS streams; HTTP/1.1: $CONC connections); each run ${WARMUP} warm-up + ${DURATION}"
	echo "measured on a fresh server process; median of $RUNS interleaved rounds; spread = (max - min) / median."
	echo "Load average at the start of each round: ${LOADS[*]}. Runs done again because other processes took over"
	echo "${NOISY}% of the server's core: $(wc -l <"$NOISY_RUNS"); the medians are over the last attempts."
	echo
	echo "| scenario | requests/s (median) | spread | runs (min - max) | per server CPU-second (median) | p50 / p99 (median) | errors + non-2xx | generator CPU / others on its core | server CPU / others on its core |"
	echo "| --- | ---: | ---: | --- | ---: | --- | ---: | --- | --- |"
	for s in "${SCENARIOS[@]}"; do
		name=${s%% *}
		read -r m lo hi _ n < <(stat "$name" 3)
		((n > 0)) || continue
		echo "| $(describe "$name") | $(fmt_n "$m") | $(calc "($hi - $lo) / $m * 100" 1)% | $(fmt_n "$lo") - $(fmt_n "$hi") | $(fmt_n "$(stat "$name" 11 | cut -d' ' -f1)") |" \
			"$(calc "$(stat "$name" 6 | cut -d' ' -f1) / 1000") / $(calc "$(stat "$name" 7 | cut -d' ' -f1) / 1000") ms | $(errs "$name") |" \
			"$(calc "$(stat "$name" 8 | cut -d' ' -f1)" 0)% / $(calc "$(stat "$name" 12 | cut -d' ' -f1)" 0)% | $(calc "$(stat "$name" 9 | cut -d' ' -f1)" 0)% / $(calc "$(stat "$name" 10 | cut -d' ' -f1)" 0)% |"
	done
	echo
	# pair_ratio A B col: the median over rounds of A's value / B's in the
	# same round (column col: 3 requests/s, 11 per server CPU-second), then
	# the ratio of the medians; "-" when either scenario did not run.
	pair_ratio() {
		awk -F'\t' -v a="$1" -v b="$2" -v c="$3" 'NR > 1 && $1 == a { x[$2] = $c } NR > 1 && $1 == b { y[$2] = $c }
			END { n = 0; for (r in x) if ((r in y) && y[r] > 0) v[++n] = x[r] / y[r]
				if (n == 0) { print "-"; exit }
				for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
				printf "%.2f", (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }' "$RESULTS"
	}
	row() { # label A B target
		has_scenario "$2" && has_scenario "$3" || return 0
		local r p
		r=$(pair_ratio "$2" "$3" 3)
		p=$(pair_ratio "$2" "$3" 11)
		if [[ $4 == - ]]; then
			echo "| $1 ($(fmt_n "$(med "$2")") / $(fmt_n "$(med "$3")")) | $r | $p | - | info |"
		else
			echo "| $1 ($(fmt_n "$(med "$2")") / $(fmt_n "$(med "$3")")) | **$r** | $p | >= $4 | $(verdict "$r >= $4 && $(errs "$2") == 0") |"
		fi
	}
	echo "| target (median of per-round ratios; requests/s medians beside) | requests/s | per server CPU-second | target | result |"
	echo "| --- | ---: | ---: | ---: | --- |"
	row "(a) ext_authz distinct tokens / grpc-es256" extauthz-unique grpc-es256 0.90
	row "(a') ext_authz distinct tokens / grpc-es256-table" extauthz-unique grpc-es256-table 0.90
	row "(a'') BASE_KEYGATE's ext_authz distinct tokens / grpc-es256-table" extauthz-base grpc-es256-table -
	row "ext_authz distinct tokens / BASE_KEYGATE's" extauthz-unique extauthz-base -
	row "(b) ext_authz cache hits / grpc-noop" extauthz-hit grpc-noop 0.70
	row "(c) /auth distinct tokens, h2c / HTTP/1.1" h2c-unique http1-unique -
	row "(c) ext_authz distinct tokens / /auth over HTTP/1.1" extauthz-unique http1-unique -
	echo
	echo "Command: DURATION=$DURATION WARMUP=$WARMUP RUNS=$RUNS GRPC_CONNS=$GRPC_CONNS STREAMS=$STREAMS ONLY=\"$ONLY\" scripts/loadtest-extauthz.sh"
} >"$TABLE"

echo
cat "$TABLE"
echo
echo "load before: $UPTIME_BEFORE"
echo "load after:  $UPTIME_AFTER"
if ((PROFILE_SECONDS > 0)); then
	for name in http1 h2c grpc; do
		[[ -f $WORK/profile-$name-top.txt ]] || continue
		echo
		echo "CPU profile of keygate, distinct tokens over $name, ${PROFILE_SECONDS}s ($(step_field "$WORK/profile-$name.json" requests_per_s) req/s):"
		sed -n '1,36p' "$WORK/profile-$name-top.txt"
	done
fi
