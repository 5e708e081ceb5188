#!/usr/bin/env bash
# Compares two keygate builds on a secret scenario over loopback HTTP, each
# against the scenario's reference server, in alternating runs (A, B, A, B,
# ...) so that a busy minute on a shared machine hits both alike:
#
#   A=/tmp/keygate-main B=/tmp/keygate-branch PAIRS=5 \
#     scripts/bench-secrets-ab.sh secret-write --database-url 'postgres://...'
#
# Each run is `$BIN bench scenario SCENARIO --reference --connections 50
# --rounds 3 --duration 3s --warmup 1s` plus the flags given. Per run it
# prints the median keygate ÷ reference ratio of its three pairs of steps,
# keygate's req/s, the reference's, keygate's CPU per request (µs, its
# process's CPU time over the step's requests: less sensitive than req/s to
# what else runs) and allocations per request; then the medians of A's and
# B's runs and of the per-pair quotients B ÷ A.
set -euo pipefail
: "${A:?A=path of the first keygate binary}" "${B:?B=path of the second keygate binary}"
PAIRS=${PAIRS:-5}
sc=${1:?scenario: secret-read or secret-write}
shift
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "run pair ratio keygate_rps reference_rps cpu_us_per_req allocs_per_req step_ratios validity"
for i in $(seq 1 "$PAIRS"); do
	for v in A B; do
		bin=${!v}
		out=$dir/$v-$i
		"$bin" bench scenario "$sc" --reference --connections 50 --rounds 3 --duration 3s --warmup 1s --out "$out" "$@" >/dev/null 2>&1 || true
		python3 - "$out/report.json" "$v" "$i" <<'PY' | tee -a "$dir/runs"
import json, statistics, sys
r = json.load(open(sys.argv[1])); s = r["series"]
ref = [st["requests_per_s"] for st in s[0]["steps"]]; kg = [st["requests_per_s"] for st in s[1]["steps"]]
ratios = [k / x if x else 0 for k, x in zip(kg, ref)]
cpu = [st["server"]["cpu_s"] * 1e6 / st["requests"] for st in s[1]["steps"] if st["requests"]]
al = [st["server"]["allocs_per_request"] for st in s[1]["steps"] if st["requests"]]
print(sys.argv[2], sys.argv[3], "%.3f" % statistics.median(ratios), "%.0f" % statistics.median(kg), "%.0f" % statistics.median(ref),
      "%.0f" % statistics.median(cpu), "%.0f" % statistics.median(al), ",".join("%.2f" % x for x in ratios),
      "valid" if r["validity"]["valid"] else "not-valid")
PY
	done
done
python3 - "$dir/runs" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
a = {r[1]: r for r in rows if r[0] == "A"}; b = {r[1]: r for r in rows if r[0] == "B"}
pairs = [i for i in a if i in b]
med = lambda rs, k: statistics.median(float(r[k]) for r in rs.values())
q = lambda k: statistics.median(float(b[i][k]) / float(a[i][k]) for i in pairs)
print("median of runs: ratio A %.3f B %.3f | keygate req/s A %.0f B %.0f | CPU µs/request A %.0f B %.0f | allocs/request A %.0f B %.0f"
      % (med(a, 2), med(b, 2), med(a, 3), med(b, 3), med(a, 5), med(b, 5), med(a, 6), med(b, 6)))
print("median of pairs B ÷ A: ratio %.3f, keygate req/s %.3f, CPU per request %.3f" % (q(2), q(3), q(5)))
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
