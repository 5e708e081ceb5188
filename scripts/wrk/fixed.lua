-- wrk script: the same Authorization header on every request, so keygate
-- answers from its verified-token cache after the first request.
--
--   wrk -t1 -c100 -d10s -s scripts/wrk/fixed.lua http://127.0.0.1:18080/auth -- TOKEN_FILE
--
-- TOKEN_FILE's first line is the token. The request is built once (no
-- request() function), so wrk sends it on its fast path. done() prints one
-- machine-readable RESULT line for scripts/loadtest.sh.

function init(args)
   local path = args[1]
   if not path then
      error("usage: wrk ... -s fixed.lua URL -- TOKEN_FILE")
   end
   local f = assert(io.open(path, "r"))
   local token = f:read("*l")
   f:close()
   if not token or token == "" then
      error(path .. ": no token on the first line")
   end
   wrk.headers["Authorization"] = "Bearer " .. token
end

function done(summary, latency, requests)
   local e = summary.errors
   io.write(string.format(
      "RESULT requests=%d duration_us=%d connect=%d read=%d write=%d timeout=%d status=%d wraps=0 p50_us=%d p99_us=%d\n",
      summary.requests, summary.duration, e.connect, e.read, e.write, e.timeout, e.status,
      latency:percentile(50), latency:percentile(99)))
end
