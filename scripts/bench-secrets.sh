#!/usr/bin/env bash
# In-process read benchmarks of the secret store (internal/secrets), with
# the raw primitives measured in the same rounds:
#   ReadHit    a 1 KiB secret read from the read cache (no query, one open)
#   ReadMiss   the same read when the cache does not hold it (two SQLite
#              queries, two opens, the metadata's JSON, the entry cached)
#   StoreRead  the two SQLite queries alone, nothing opened
#   ReadRaw    one AES-256-GCM open of 1 KiB with a cipher made once
# Targets: ReadHit <= 1.5 x ReadRaw; ReadMiss <= 1.5 x (ReadRaw + StoreRead).
#
# The four run one after the other, BENCHTIME each, ROUNDS times over
# (A, B, C, D, A, B, ...) so that a slow minute on a shared machine hits
# them alike; the table gives each round's ratios and their median.
#
#   scripts/bench-secrets.sh                    # 8 rounds of 1 s each (~1 min)
#   ROUNDS=3 BENCHTIME=200ms scripts/bench-secrets.sh
set -euo pipefail
ROUNDS=${ROUNDS:-8}
BENCHTIME=${BENCHTIME:-1s}
cd "$(dirname "$0")/.."
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go test -c -o "$dir/secrets.test" ./internal/secrets/
ns() { # the ns/op of benchmark $1
	"$dir/secrets.test" -test.run '^$' -test.bench "^Benchmark$1\$" -test.benchtime "$BENCHTIME" -test.benchmem |
		awk -v b="Benchmark$1" '$1 ~ "^"b"(-[0-9]+)?$" { print $3, $(NF-3), $(NF-1) }'
}
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| round | ReadHit ns | ReadMiss ns | StoreRead ns | ReadRaw ns | hit ÷ raw | miss ÷ (raw + store) |"
echo "|---|---|---|---|---|---|---|"
hits=() misses=()
for r in $(seq 1 "$ROUNDS"); do
	read -r hit hitB hitA < <(ns ReadHit)
	read -r miss missB missA < <(ns ReadMiss)
	read -r st stB stA < <(ns StoreRead)
	read -r raw rawB rawA < <(ns ReadRaw)
	h=$(awk "BEGIN { printf \"%.2f\", $hit / $raw }")
	m=$(awk "BEGIN { printf \"%.2f\", $miss / ($raw + $st) }")
	hits+=("$h") misses+=("$m")
	echo "| $r | $hit | $miss | $st | $raw | $h | $m |"
done
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
echo
echo "median hit ÷ raw: $(median "${hits[@]}")×; median miss ÷ (raw + store read): $(median "${misses[@]}")×"
echo "allocations per op: ReadHit $hitA ($hitB B), ReadMiss $missA ($missB B), StoreRead $stA ($stB B), ReadRaw $rawA ($rawB B)"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
