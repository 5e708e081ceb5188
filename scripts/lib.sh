# Shared by scripts/loadtest.sh and scripts/loadtest-tokens.sh: logging, port checks,
# stopping the server under test and wrk, the exit clean-up, CPU pinning, durations,
# statistics over the results table and number formatting. Sourced, not run; the
# functions read the caller's globals (SERVER_PID, WRK_PID, SERVER_CPU, WORK, OUT,
# OUT_SKIP, RESULTS).

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

die() {
	log "error: $*"
	exit 1
}

# KEYGATE_BENCH_MARKER is this run's secret benchmark marker: 'keygate bench
# server' answers only requests that carry it (403 otherwise), and keygate's
# load generators ('bench load', 'bench extauthz') send it, read from the
# environment. BENCH_MARKER is the header, for curl and wrk.
KEYGATE_BENCH_MARKER=${KEYGATE_BENCH_MARKER:-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')}
export KEYGATE_BENCH_MARKER
BENCH_MARKER="Keygate-Bench: $KEYGATE_BENCH_MARKER"

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

stop_server() {
	local pid=$SERVER_PID
	[[ -n $pid ]] || return 0
	SERVER_PID=""
	kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 1 150); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		log "server $pid did not stop in 15s; killing it"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
}

pinned() { taskset -c "$SERVER_CPU" env GOMAXPROCS=1 "$@"; }

proc_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }

calc() { awk "BEGIN { printf \"%.${2:-2}f\", $1 }"; }

# secs converts a wrk duration (N, Ns, Nm, Nh) to whole seconds.
secs() {
	case $1 in
	*[0-9]s) echo "${1%s}" ;;
	*[0-9]m) echo $((${1%m} * 60)) ;;
	*[0-9]h) echo $((${1%h} * 3600)) ;;
	*[0-9]) echo "$1" ;;
	*) die "not a duration: $1 (use e.g. 10s or 1m)" ;;
	esac
}

# run_load out conns duration [keygate bench load flags...]: one closed-loop
# step of keygate's own load generator (no warm-up of its own) on CLIENT_CPU
# with GOMAXPROCS=1, like wrk -t1; started in the background as WRK_PID (so
# the exit trap stops it) and waited for. It writes the generator's
# key=value line and then a RESULT line in the keys the scripts read:
# requests, duration_us, connect (every request without an answer), status
# (non-2xx answers), wraps (requests beyond the POOL_N distinct requests of
# a --values file; 0 without one), p50_us, p90_us, p99_us. Needs KG and
# WRK_TIMEOUT.
run_load() {
	local out=$1 conns=$2 duration=$3
	shift 3
	timeout --kill-after=5 $(($(secs "$duration") + 60)) \
		taskset -c "$CLIENT_CPU" env GOMAXPROCS=1 "$KG" bench load --format line --connections "$conns" \
		--duration "$duration" --warmup 0s --timeout "$WRK_TIMEOUT" "$@" >"$out" 2>&1 &
	WRK_PID=$!
	local code=0
	wait "$WRK_PID" || code=$?
	WRK_PID=""
	((code == 0)) || die "keygate bench load exited $code: $(tail -5 "$out")"
	awk -v pool="${POOL_N:-0}" '/^connections=/ {
		for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		wraps = pool > 0 ? int(v["requests"] / pool) : 0
		printf "RESULT requests=%d duration_us=%d connect=%d read=0 write=0 timeout=0 status=%d wraps=%d p50_us=%d p90_us=%d p99_us=%d\n",
			v["requests"], v["duration_s"] * 1e6, v["errors"], v["3xx"] + v["4xx"] + v["5xx"] + 0, wraps, v["p50_us"], v["p90_us"], v["p99_us"]
	}' "$out" >"$out.result"
	cat "$out.result" >>"$out"
	rm -f "$out.result"
	grep -q '^RESULT ' "$out" || die "keygate bench load printed no result: $(tail -5 "$out")"
}

# wait_wrk out: waits for the wrk run WRK_PID, which wrote to out, and dies
# unless it exited 0 and printed its RESULT line.
wait_wrk() {
	local out=$1 code=0
	wait "$WRK_PID" || code=$?
	WRK_PID=""
	((code == 0)) || die "wrk exited $code: $(tail -5 "$out")"
	grep -q '^RESULT ' "$out" || die "wrk printed no RESULT line: $(tail -5 "$out")"
}

# cleanup is the load scripts' exit trap (install_cleanup): it stops wrk and
# the server, copies WORK to OUT when set (but the names matching a glob in
# the array OUT_SKIP), removes WORK and exits with the script's status.
cleanup() {
	local code=$? f pat keep
	trap - EXIT INT TERM
	if [[ -n ${WRK_PID:-} ]]; then
		kill -TERM "$WRK_PID" 2>/dev/null || true
		wait "$WRK_PID" 2>/dev/null || true
	fi
	stop_server
	if [[ -n ${OUT:-} ]]; then
		mkdir -p "$OUT"
		for f in "$WORK"/*; do
			keep=1
			for pat in "${OUT_SKIP[@]}"; do
				# shellcheck disable=SC2053 # pat is a glob
				[[ ${f##*/} == $pat ]] && keep=0
			done
			((keep)) && cp -r "$f" "$OUT"/
		done
		log "results kept in $OUT"
	fi
	rm -rf "$WORK"
	exit "$code"
}

install_cleanup() {
	trap cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
}

# stat scenario column: "median min max sum n" of a column of RESULTS over
# the runs of a scenario.
stat() {
	awk -F'\t' -v s="$1" -v c="$2" 'NR > 1 && $1 == s { print $c }' "$RESULTS" | sort -g |
		awk '{ v[NR] = $1; sum += $1 } END {
			if (NR == 0) { print "0 0 0 0 0"; exit }
			m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
			printf "%.3f %.3f %.3f %.3f %d\n", m, v[1], v[NR], sum, NR }'
}

# fmt_n prints a number rounded, with thousands separators.
fmt_n() {
	awk -v x="$1" 'BEGIN { s = sprintf("%.0f", x); out = ""; while (length(s) > 3) { out = "," substr(s, length(s) - 2) out; s = substr(s, 1, length(s) - 3) } print s out }'
}

# check_host TOOL...: every TOOL is installed and SERVER_CPU and CLIENT_CPU
# are CPUs of this machine (a warning when they are one); sets ncpu, which
# the reports print.
check_host() {
	local tool
	for tool in "$@"; do
		command -v "$tool" >/dev/null 2>&1 || die "$tool is not installed"
	done
	ncpu=$(getconf _NPROCESSORS_ONLN)
	((SERVER_CPU < ncpu && CLIENT_CPU < ncpu)) || die "SERVER_CPU/CLIENT_CPU must be below $ncpu"
	[[ $SERVER_CPU != "$CLIENT_CPU" ]] || log "warning: the server and the load generator share CPU $SERVER_CPU"
}

# check_ports NAME...: each variable NAME holds a free loopback port.
check_ports() {
	local name
	for name in "$@"; do
		port_free "${!name}" || die "127.0.0.1:${!name} is in use (set $name)"
	done
}

# pair_ratio num den column: the median over the rounds of num's value in
# that column of RESULTS divided by den's in the same round (rounds where
# both ran), to 3 decimals; 0 when none.
pair_ratio() {
	awk -F'\t' -v a="$1" -v b="$2" -v c="$3" 'NR > 1 && $1 == a { x[$2] = $c } NR > 1 && $1 == b { y[$2] = $c }
		END { for (r in x) if ((r in y) && y[r] > 0) print x[r] / y[r] }' "$RESULTS" | sort -g |
		awk '{ v[NR] = $1 } END {
			if (NR == 0) { print 0; exit }
			printf "%.3f\n", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
