#!/usr/bin/env bash
# Interleaved A/B of transit encrypt (64 B) over loopback between keygate
# builds and the aes-gcm reference server, by the server's CPU time a
# request: unlike requests/s, it does not move with how much of its CPU the
# server gets on a shared machine.
#
#   scripts/transit-cpu-ab.sh NAME=BINARY:MODE...
#
# MODE is ref (BINARY's `bench server --mode aes-gcm`), noaudit
# (KEYGATE_AUDIT_DISABLED=true), noaudit-flag (`serve --no-audit`, for
# builds older than that variable) or audit (as `serve --dev` has it). Each
# round runs every NAME in the order given, each a fresh server pinned to
# SERVER_CPU with GOMAXPROCS=1, a warm-up, then the measured run; the
# generator is the keygate built from this tree. The reference gets the
# same request, token included. It prints a line per run and, per NAME, the
# median CPU a request and the median over the rounds of the first NAME's
# CPU a request ÷ NAME's (with ref first: the share of the reference's rate
# NAME reaches on the same CPU), and the same for requests/s.
#
#   git worktree add /tmp/old a15905d && (cd /tmp/old && go build -o /tmp/kg-old ./cmd/keygate)
#   go build -o /tmp/kg ./cmd/keygate
#   scripts/transit-cpu-ab.sh ref=/tmp/kg:ref old=/tmp/kg-old:noaudit-flag head=/tmp/kg:noaudit
#
# Settings (environment): RUNS=4 DURATION=8s WARMUP=2s CONNS=50 RATE=
# (open loop at RATE requests/s; empty: closed loop) SERVER_CPU=0
# CLIENT_CPU=1 PORT=18080 ADMIN_PORT=19090 BASELINE= (the NAME the ratios
# are taken against; default the first) PROFILE_DIR= (a CPU profile of
# each NAME in round 1, DURATION less a second, into that directory).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUNS=${RUNS:-4}
DURATION=${DURATION:-8s}
WARMUP=${WARMUP:-2s}
CONNS=${CONNS:-50}
RATE=${RATE:-}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
WRK_TIMEOUT=${WRK_TIMEOUT:-2s}
PORT=${PORT:-18080}
ADMIN_PORT=${ADMIN_PORT:-19090}
PROFILE_DIR=${PROFILE_DIR:-}
(($# > 0)) || die "usage: scripts/transit-cpu-ab.sh NAME=BINARY:MODE..."
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer"
DUR_S=$(secs "$DURATION")
check_host go taskset curl awk sort base64 head getconf
check_ports PORT ADMIN_PORT
CLK_TCK=$(getconf CLK_TCK)

WORK=$(mktemp -d "${TMPDIR:-/tmp}/keygate-transit-ab.XXXXXX")
SERVER_PID=""
WRK_PID=""
OUT=""
OUT_SKIP=()
install_cleanup
log "building the generator"
(cd "$ROOT" && go build -o "$WORK/keygate" ./cmd/keygate)
KG=$WORK/keygate
BASE=http://127.0.0.1:$PORT
ADMIN=http://127.0.0.1:$ADMIN_PORT
printf '{"plaintext":"%s"}\n' "$(head -c 64 /dev/urandom | base64 -w0)" >"$WORK/encrypt.body"
: >"$WORK/token.txt"

start_keygate() { # binary [flag] [KEYGATE_VAR=value]
	local bin=$1 flag=${2:-} env=${3:-KEYGATE_UNUSED=1} data created id secret
	data=$(mktemp -d "$WORK/data-XXXXXX")
	# shellcheck disable=SC2086 # flag is one word or none
	taskset -c "$SERVER_CPU" env GOMAXPROCS=1 KEYGATE_TOKEN_SERVICE_ACCESS_TOKEN_TTL=1h KEYGATE_PPROF=true "$env" \
		"$bin" serve --dev $flag --data-dir "$data" --listen "127.0.0.1:$PORT" --admin-listen "127.0.0.1:$ADMIN_PORT" \
		>"$WORK/server.log" 2>&1 &
	SERVER_PID=$!
	for _ in $(seq 1 100); do
		kill -0 "$SERVER_PID" 2>/dev/null || die "keygate exited at start: $(tail -5 "$WORK/server.log")"
		[[ -s $data/admin.token ]] && [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$BASE/healthz") == 200 ]] && break
		sleep 0.1
	done
	ADMIN_TOKEN=$(cat "$data/admin.token")
	created=$(KEYGATE_ADMIN_TOKEN=$ADMIN_TOKEN "$bin" clients create --admin "$ADMIN" --name bench \
		--scopes transit:admin,transit:encrypt:bench,transit:decrypt:bench) || die "clients create failed"
	id=$(sed -n 's/^client_id=//p' <<<"$created")
	secret=$(sed -n 's/^client_secret=//p' <<<"$created")
	"$bin" token --url "$BASE" --client "$id" --secret "$secret" >"$WORK/token.txt" || die "keygate token failed"
	curl -sf --max-time 10 -X POST -H "X-Vault-Token: $(cat "$WORK/token.txt")" "$BASE/v1/transit/keys/bench" >/dev/null ||
		die "creating the key failed"
	PPROF_URL=$ADMIN/debug/pprof/profile PPROF_HDR="Authorization: Bearer $ADMIN_TOKEN"
}

start_ref() { # binary
	taskset -c "$SERVER_CPU" env GOMAXPROCS=1 "$1" bench server --mode aes-gcm --profiling --listen "127.0.0.1:$PORT" \
		>"$WORK/server.log" 2>&1 &
	SERVER_PID=$!
	for _ in $(seq 1 100); do
		kill -0 "$SERVER_PID" 2>/dev/null || die "bench server exited at start: $(tail -5 "$WORK/server.log")"
		[[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 1 -H "$BENCH_MARKER" "$BASE/healthz") == 200 ]] && break
		sleep 0.1
	done
	PPROF_URL=$BASE/debug/pprof/profile PPROF_HDR=$BENCH_MARKER
}

step() { # out duration
	local rate=()
	[[ -n $RATE ]] && rate=(--rate "$RATE")
	run_load "$1" "$CONNS" "$2" --url "$BASE/v1/transit/encrypt/bench" --method POST --body-file "$WORK/encrypt.body" \
		-H "X-Vault-Token: $(cat "$WORK/token.txt")" -H 'Content-Type: application/json' "${rate[@]}"
}

RESULTS=$WORK/results.tsv
printf 'name\tround\trps\tcpu_us_per_req\tnon2xx_errors\n' >"$RESULTS"
log "load before: $(uptime)"
for round in $(seq 1 "$RUNS"); do
	for spec in "$@"; do
		name=${spec%%=*} rest=${spec#*=}
		bin=${rest%:*} mode=${rest##*:}
		[[ -x $bin ]] || die "$bin is not an executable"
		[[ -s $WORK/token.txt ]] || [[ $mode != ref ]] || die "put a keygate NAME before the first ref: the reference is sent keygate's token"
		case $mode in
		ref) start_ref "$bin" ;;
		noaudit) start_keygate "$bin" "" KEYGATE_AUDIT_DISABLED=true ;;
		noaudit-flag) start_keygate "$bin" --no-audit ;;
		audit) start_keygate "$bin" ;;
		*) die "unknown mode $mode (ref, noaudit, noaudit-flag, audit)" ;;
		esac
		step "$WORK/warmup.txt" "$WARMUP"
		prof=""
		if [[ -n $PROFILE_DIR && $round == 1 ]]; then
			mkdir -p "$PROFILE_DIR"
			curl -sf --max-time $((DUR_S + 20)) -H "$PPROF_HDR" -o "$PROFILE_DIR/$name.pprof" \
				"$PPROF_URL?seconds=$((DUR_S > 1 ? DUR_S - 1 : 1))" &
			prof=$!
		fi
		p0=$(proc_ticks "$SERVER_PID")
		step "$WORK/load.txt" "$DURATION"
		p1=$(proc_ticks "$SERVER_PID")
		[[ -n $prof ]] && { wait "$prof" || log "no profile of $name"; }
		sed -n 's/^RESULT //p' "$WORK/load.txt" | awk -v n="$name" -v r="$round" -v t=$((p1 - p0)) -v hz="$CLK_TCK" '{
			for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
			printf "%s\t%d\t%.0f\t%.2f\t%d\n", n, r, v["requests"] / (v["duration_us"] / 1e6), t / hz * 1e6 / v["requests"], v["status"] + v["connect"] }' >>"$RESULTS"
		log "$(tail -n 1 "$RESULTS" | awk -F'\t' '{ printf "%-8s round %d: %7.0f req/s  %6.2f us CPU a request  non-2xx+errors %d", $1, $2, $3, $4, $5 }')"
		stop_server
	done
done
log "load after: $(uptime)"

first=${BASELINE:-${1%%=*}}
echo
echo "| name | CPU a request (median) | ${first} ÷ name, CPU a request (median of rounds) | name ÷ ${first}, requests/s (median of rounds) |"
echo "| --- | ---: | ---: | ---: |"
for spec in "$@"; do
	name=${spec%%=*}
	cpu=$(awk -F'\t' -v n="$name" 'NR > 1 && $1 == n { print $4 }' "$RESULTS" | sort -g |
		awk '{ v[NR] = $1 } END { printf "%.1f", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
	echo "| $name | $cpu µs | $(pair_ratio "$first" "$name" 4) | $(pair_ratio "$name" "$first" 3) |"
done
echo
echo "Command: RUNS=$RUNS DURATION=$DURATION WARMUP=$WARMUP CONNS=$CONNS${RATE:+ RATE=$RATE}${BASELINE:+ BASELINE=$BASELINE} scripts/transit-cpu-ab.sh $*"
