# Shared by scripts/loadtest.sh and scripts/loadtest-tokens.sh: logging, port checks,
# stopping the server under test, CPU pinning and arithmetic. Sourced, not run;
# the functions read the caller's globals (SERVER_PID, SERVER_CPU).

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

die() {
	log "error: $*"
	exit 1
}

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
