#!/usr/bin/env bash
# Loopback load test of keygate's transit API (issue 11):
#   - POST /v1/transit/encrypt/bench with 64 random bytes, against a reference
#     net/http server on the same CPU and port doing one AES-256-GCM seal of
#     64 bytes per request (keygate bench server --mode aes-gcm: reads the
#     body, seals with a cached cipher and a fresh nonce, answers the base64
#     in JSON); target: keygate / reference >= 0.80;
#   - POST /v1/transit/decrypt/bench of one ciphertext of 64 bytes;
#   - POST /v1/transit/encrypt/bench with a batch_input of 100 64-byte items
#     (items/s).
# Every keygate request carries a real token of the node (X-Vault-Token, as
# Vault's clients send it; a verified-token cache hit) with transit scopes.
# Every keygate scenario runs with the audit log as `serve --dev` has it (on,
# the file sink, one write per group of records, fsynced once a second:
# audit.file.sync: interval); encrypt is measured twice more: with each
# group fsynced before it is answered (audit.file.sync: batch) and with the
# audit log off (KEYGATE_AUDIT_DISABLED=true), so that its cost is measured in the same round.
#
# Same pinning as scripts/loadtest.sh: the server on CPU SERVER_CPU with
# GOMAXPROCS=1, keygate bench load on CPU CLIENT_CPU, loopback only. Each round starts a
# fresh `keygate serve --dev` on a fresh data directory (a client with transit
# scopes, its token, the key "bench"), measures its three scenarios, then the
# reference server, each after a warm-up. The table gives the median of RUNS
# rounds and the spread (max-min)/median.
#
#   scripts/loadtest-transit.sh                              # full: 3 rounds of 10 s (~3 min)
#   DURATION=3s WARMUP=1s RUNS=1 scripts/loadtest-transit.sh # smoke (~30 s)
#   PROFILE_SECONDS=5 scripts/loadtest-transit.sh            # also profile keygate under encrypt
#
# Settings (environment):
#   DURATION=10s WARMUP=2s RUNS=3   measured run, warm-up and rounds
#   CONNS=50                        connections
#   SERVER_CPU=0 CLIENT_CPU=1       taskset CPUs
#   WRK_TIMEOUT=2s                  the generator's per-request timeout
#   PORT=18080 ADMIN_PORT=19090     loopback ports
#   PROFILE_SECONDS=0               >0: CPU profile of keygate under encrypt
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
PORT=${PORT:-18080}
ADMIN_PORT=${ADMIN_PORT:-19090}
PROFILE_SECONDS=${PROFILE_SECONDS:-0}
OUT=${OUT:-}
MAX_SECONDS=${MAX_SECONDS:-600}

DUR_S=$(secs "$DURATION")
WARM_S=$(secs "$WARMUP")
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer"
[[ $PROFILE_SECONDS =~ ^[0-9]+$ ]] || die "PROFILE_SECONDS must be a whole number"
((DUR_S > 0)) || die "DURATION must be at least 1s"
estimate=$((30 + RUNS * (20 + 6 * (WARM_S + DUR_S + 2))))
((PROFILE_SECONDS > 0)) && estimate=$((estimate + PROFILE_SECONDS + WARM_S + 15))
((estimate <= MAX_SECONDS)) || die "estimated ${estimate}s is over MAX_SECONDS=$MAX_SECONDS; shorten DURATION or RUNS"

check_host go taskset curl awk sort timeout base64 head
check_ports PORT ADMIN_PORT

# --- clean-up --------------------------------------------------------------

WORK=$(mktemp -d "${TMPDIR:-/tmp}/keygate-loadtest-transit.XXXXXX")
SERVER_PID=""
WRK_PID=""
OUT_SKIP=("data-*" keygate token.txt)
install_cleanup

# --- build -----------------------------------------------------------------

log "building keygate"
(cd "$ROOT" && go build -o "$WORK/keygate" ./cmd/keygate)
KG=$WORK/keygate
BASE=http://127.0.0.1:$PORT
ADMIN=http://127.0.0.1:$ADMIN_PORT

# The request bodies: 64 random bytes; a batch of 100 of them.
pt64() { head -c 64 /dev/urandom | base64 -w0; }
printf '{"plaintext":"%s"}\n' "$(pt64)" >"$WORK/encrypt.body"
{
	printf '{"batch_input":['
	for i in $(seq 1 100); do
		((i > 1)) && printf ','
		printf '{"plaintext":"%s"}' "$(pt64)"
	done
	printf ']}\n'
} >"$WORK/batch.body"

# start_server log [KEYGATE_VAR=value...] [flags...]: a fresh dev-mode
# keygate on a fresh data directory, with those settings, and a client
# holding transit scopes, its token in token.txt and the key "bench"; sets
# SERVER_PID and ADMIN_TOKEN.
start_server() {
	local out=$1 data vars=(KEYGATE_TOKEN_SERVICE_ACCESS_TOKEN_TTL=1h) flags=()
	shift
	for a in "$@"; do
		if [[ $a == KEYGATE_*=* ]]; then vars+=("$a"); else flags+=("$a"); fi
	done
	data=$(mktemp -d "$WORK/data-XXXXXX")
	# taskset directly, not the pinned function: $! must be keygate's pid.
	taskset -c "$SERVER_CPU" env GOMAXPROCS=1 "${vars[@]}" "$KG" serve --dev --data-dir "$data" --listen "127.0.0.1:$PORT" \
		--admin-listen "127.0.0.1:$ADMIN_PORT" "${flags[@]}" >"$out" 2>&1 &
	SERVER_PID=$!
	for _ in $(seq 1 100); do
		kill -0 "$SERVER_PID" 2>/dev/null || die "keygate exited at start: $(tail -5 "$out")"
		if [[ -s $data/admin.token ]] &&
			[[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$BASE/healthz") == 200 ]]; then
			break
		fi
		sleep 0.1
	done
	ADMIN_TOKEN=$(cat "$data/admin.token")
	local created id secret
	created=$(KEYGATE_ADMIN_TOKEN=$ADMIN_TOKEN "$KG" clients create --admin "$ADMIN" --name bench \
		--scopes transit:admin,transit:encrypt:bench,transit:decrypt:bench) || die "clients create failed"
	id=$(sed -n 's/^client_id=//p' <<<"$created")
	secret=$(sed -n 's/^client_secret=//p' <<<"$created")
	"$KG" token --url "$BASE" --client "$id" --secret "$secret" >"$WORK/token.txt" || die "keygate token failed"
	curl -sf --max-time 10 -X POST -H "X-Vault-Token: $(cat "$WORK/token.txt")" "$BASE/v1/transit/keys/bench" >/dev/null ||
		die "creating the key failed"
	local ct
	ct=$(curl -sf --max-time 5 -H "X-Vault-Token: $(cat "$WORK/token.txt")" -d @"$WORK/encrypt.body" \
		"$BASE/v1/transit/encrypt/bench" | sed -n 's/.*"ciphertext":"\([^"]*\)".*/\1/p')
	[[ $ct == vault:v1:* ]] || die "encrypt answered no ciphertext"
	printf '{"ciphertext":"%s"}\n' "$ct" >"$WORK/decrypt.body"
}

# start_reference log: the AES-GCM reference server on the same CPU and port.
start_reference() {
	taskset -c "$SERVER_CPU" env GOMAXPROCS=1 "$KG" bench server --mode aes-gcm --listen "127.0.0.1:$PORT" >"$1" 2>&1 &
	SERVER_PID=$!
	for _ in $(seq 1 100); do
		kill -0 "$SERVER_PID" 2>/dev/null || die "bench server exited at start: $(tail -5 "$1")"
		[[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 1 -H "$BENCH_MARKER" "$BASE/healthz") == 200 ]] && return 0
		sleep 0.1
	done
	die "bench server --mode aes-gcm did not answer within 10s"
}

# run_step out path body_file duration: keygate bench load (run_load) POSTing
# the JSON body with the node's token in X-Vault-Token, as Vault's clients do.
run_step() {
	local out=$1 path=$2 body=$3 duration=$4
	run_load "$out" "$CONNS" "$duration" --url "$BASE$path" --method POST --body-file "$body" \
		-H "X-Vault-Token: $(cat "$WORK/token.txt")" -H 'Content-Type: application/json'
}

# The server's CPU time per request (its utime + stime over the measured
# run, in clock ticks of CLK_TCK a second, divided by the requests): unlike
# requests/s it does not move with what else runs on the server's CPU.
CLK_TCK=$(getconf CLK_TCK)
cpu_ticks() { awk -v c="cpu$1" '$1 == c { print $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat; }

RESULTS=$WORK/results.tsv
printf 'scenario\trun\trps\terrors\tnon2xx\tp50_us\tp99_us\tserver_cpu_pct\tcpu_us_per_req\n' >"$RESULTS"

measure() { # round name path body_file
	local round=$1 name=$2 path=$3 body=$4
	((WARM_S > 0)) && run_step "$WORK/$name-$round.warmup.txt" "$path" "$body" "$WARMUP"
	local p0 c0 p1 c1
	p0=$(proc_ticks "$SERVER_PID") c0=$(cpu_ticks "$SERVER_CPU")
	run_step "$WORK/$name-$round.load.txt" "$path" "$body" "$DURATION"
	p1=$(proc_ticks "$SERVER_PID") c1=$(cpu_ticks "$SERVER_CPU")
	sed -n 's/^RESULT //p' "$WORK/$name-$round.load.txt" | awk -v name="$name" -v run="$round" \
		-v pt=$((p1 - p0)) -v ct=$((c1 - c0)) -v hz="$CLK_TCK" '{
		for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		printf "%s\t%d\t%.1f\t%d\t%d\t%d\t%d\t%.1f\t%.2f\n", name, run, v["requests"] / (v["duration_us"] / 1e6),
			v["connect"] + v["read"] + v["write"] + v["timeout"], v["status"], v["p50_us"], v["p99_us"],
			(ct > 0 ? pt / ct * 100 : 0), (v["requests"] > 0 ? pt / hz * 1e6 / v["requests"] : 0) }' >>"$RESULTS"
	log "$(tail -n 1 "$RESULTS" | awk -F'\t' '{ printf "%-9s run %d: %8.0f req/s  errors %d  non-2xx %d  p50 %d us  p99 %d us  server CPU %.0f%%, %.1f us a request", $1, $2, $3, $4, $5, $6, $7, $8, $9 }')"
}

# The configuration of the fsync-per-group round: only its audit section.
printf 'audit:\n  file:\n    sync: batch\n' >"$WORK/batch.yaml"

# --- measure ---------------------------------------------------------------

UPTIME_BEFORE=$(uptime)
log "load before: $UPTIME_BEFORE"
log "$RUNS rounds: encrypt, decrypt, batch-100, encrypt with the audit file fsynced per group and without audit, and the reference, ${WARMUP} warm-up + ${DURATION} each (at most ~${estimate}s)"
LOADS=()
for round in $(seq 1 "$RUNS"); do
	LOADS+=("$(cut -d' ' -f1-3 /proc/loadavg)")
	start_server "$WORK/server-$round.log"
	measure "$round" encrypt /v1/transit/encrypt/bench "$WORK/encrypt.body"
	measure "$round" decrypt /v1/transit/decrypt/bench "$WORK/decrypt.body"
	measure "$round" batch100 /v1/transit/encrypt/bench "$WORK/batch.body"
	stop_server
	start_server "$WORK/server-syncbatch-$round.log" --config "$WORK/batch.yaml"
	measure "$round" enc_syncbatch /v1/transit/encrypt/bench "$WORK/encrypt.body"
	stop_server
	start_server "$WORK/server-noaudit-$round.log" KEYGATE_AUDIT_DISABLED=true
	measure "$round" enc_noaudit /v1/transit/encrypt/bench "$WORK/encrypt.body"
	stop_server
	start_reference "$WORK/ref-$round.log"
	measure "$round" ref /v1/transit/encrypt/bench "$WORK/encrypt.body"
	stop_server
done
UPTIME_AFTER=$(uptime)
log "load after: $UPTIME_AFTER"

# --- profile ---------------------------------------------------------------

if ((PROFILE_SECONDS > 0)); then
	log "profiling keygate under encrypt for ${PROFILE_SECONDS}s"
	start_server "$WORK/profile.log" KEYGATE_PPROF=true
	(
		sleep 2
		curl -sf --max-time $((PROFILE_SECONDS + 20)) -H "Authorization: Bearer $ADMIN_TOKEN" -o "$WORK/cpu.pprof" \
			"$ADMIN/debug/pprof/profile?seconds=$PROFILE_SECONDS"
	) &
	prof_pid=$!
	run_step "$WORK/profile.load.txt" /v1/transit/encrypt/bench "$WORK/encrypt.body" "$((PROFILE_SECONDS + 4))s"
	wait "$prof_pid" || die "could not fetch the CPU profile"
	stop_server
	(cd "$ROOT" && go tool pprof -top -nodecount=25 "$KG" "$WORK/cpu.pprof") >"$WORK/profile-top.txt" 2>&1 || true
	(cd "$ROOT" && go tool pprof -top -cum -nodecount=40 "$KG" "$WORK/cpu.pprof") >"$WORK/profile-cum.txt" 2>&1 || true
fi

# --- report ----------------------------------------------------------------

med() { stat "$1" "${2:-3}" | cut -d' ' -f1; }
errs() { echo $(($(stat "$1" 4 | cut -d' ' -f4 | cut -d. -f1) + $(stat "$1" 5 | cut -d' ' -f4 | cut -d. -f1))); }
verdict() { if [[ $(awk "BEGIN { print ($1) ? 1 : 0 }") == 1 ]]; then echo PASS; else echo FAIL; fi; }
describe() {
	case $1 in
	encrypt) echo "keygate transit encrypt, 64 B (audit on: file sink, fsync once a second, the default)" ;;
	enc_syncbatch) echo "keygate transit encrypt, 64 B (audit on: file sink, fsync per group)" ;;
	enc_noaudit) echo "keygate transit encrypt, 64 B (audit off)" ;;
	decrypt) echo "keygate transit decrypt, 64 B (audit on)" ;;
	batch100) echo "keygate transit encrypt, batch of 100 x 64 B (requests/s; audit on)" ;;
	ref) echo "reference: net/http + one AES-256-GCM seal of 64 B" ;;
	esac
}

TABLE=$WORK/table.md
{
	commit=$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown)
	dirty=$(cd "$ROOT" && git status --porcelain 2>/dev/null | grep -q . && echo "+changes" || true)
	echo "### keygate transit load test ($(date -u +%Y-%m-%d), keygate $commit$dirty)"
	echo
	echo "$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo), $ncpu CPUs, Linux $(uname -r), $(go version | cut -d' ' -f3), keygate bench load."
	echo "Server on CPU $SERVER_CPU (GOMAXPROCS=1), keygate bench load -c$CONNS (GOMAXPROCS=1) on CPU $CLIENT_CPU, loopback; each run ${WARMUP} warm-up + ${DURATION} measured;"
	echo "median of $RUNS interleaved rounds; spread = (max - min) / median. Load average at the start of each round: ${LOADS[*]}."
	echo
	echo "| scenario | requests/s (median) | spread | runs (min - max) | p50 / p99 latency (median) | errors + non-2xx | server CPU (median) | server CPU a request (median) |"
	echo "| --- | ---: | ---: | --- | --- | ---: | ---: | ---: |"
	for name in ref encrypt enc_syncbatch enc_noaudit decrypt batch100; do
		read -r m lo hi _ n < <(stat "$name" 3)
		((n > 0)) || continue
		p50=$(stat "$name" 6 | cut -d' ' -f1)
		p99=$(stat "$name" 7 | cut -d' ' -f1)
		cpu=$(stat "$name" 8 | cut -d' ' -f1)
		cpr=$(stat "$name" 9 | cut -d' ' -f1)
		echo "| $(describe "$name") | $(fmt_n "$m") | $(calc "($hi - $lo) / $m * 100" 1)% | $(fmt_n "$lo") - $(fmt_n "$hi") | $(calc "$p50 / 1000") / $(calc "$p99 / 1000") ms | $(errs "$name") | $(calc "$cpu" 0)% | $(calc "$cpr" 1) µs |"
	done
	echo
	ref=$(med ref)
	enc=$(med encrypt)
	dec=$(med decrypt)
	b100=$(med batch100)
	echo "| target | measured | target | result |"
	echo "| --- | ---: | ---: | --- |"
	a=$(calc "$enc / $ref")
	echo "| encrypt 64 B / reference ($(fmt_n "$enc") / $(fmt_n "$ref")) | **$a** | >= 0.80 | $(verdict "$a >= 0.80 && $(errs encrypt) == 0") |"
	ei=$(med enc_syncbatch)
	en=$(med enc_noaudit)
	echo "| encrypt 64 B, audit fsynced per group / reference ($(fmt_n "$ei") / $(fmt_n "$ref")) | $(calc "$ei / $ref") | - | info |"
	echo "| encrypt 64 B, audit off / reference ($(fmt_n "$en") / $(fmt_n "$ref")) | $(calc "$en / $ref") | - | info |"
	echo "| encrypt 64 B, audit on / audit off (the audit log's cost) | $(calc "$enc / $en") | - | info |"
	d=$(calc "$dec / $ref")
	echo "| decrypt 64 B / reference ($(fmt_n "$dec") / $(fmt_n "$ref")) | **$d** | >= 0.80 | $(verdict "$d >= 0.80 && $(errs decrypt) == 0") |"
	echo "| per round, then the median: encrypt / reference requests/s, audit on / off | $(pair_ratio encrypt ref 3) / $(pair_ratio enc_noaudit ref 3) | - | info |"
	echo "| per round, then the median: reference ÷ encrypt server CPU a request, audit on / off (the share of the reference's rate keygate reaches on the same CPU) | **$(pair_ratio ref encrypt 9) / $(pair_ratio ref enc_noaudit 9)** | - | info |"
	echo "| per round, then the median: reference ÷ decrypt server CPU a request | $(pair_ratio ref decrypt 9) | - | info |"
	echo "| batch-100 encrypt items/s ($(fmt_n "$b100") requests/s x 100) | $(fmt_n "$(calc "$b100 * 100" 0)") | - | info |"
	echo
	echo "Command: DURATION=$DURATION WARMUP=$WARMUP RUNS=$RUNS CONNS=$CONNS scripts/loadtest-transit.sh"
} >"$TABLE"

echo
cat "$TABLE"
echo
echo "load before: $UPTIME_BEFORE"
echo "load after:  $UPTIME_AFTER"
if ((PROFILE_SECONDS > 0)); then
	echo
	echo "CPU profile of keygate under encrypt, ${PROFILE_SECONDS}s:"
	sed -n '1,35p' "$WORK/profile-top.txt"
	echo
	sed -n '1,45p' "$WORK/profile-cum.txt"
fi
