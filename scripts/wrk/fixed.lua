-- wrk script: the same Authorization header on every request, so keygate
-- answers from its verified-token cache after the first request.
--
--   wrk -t1 -c100 -d10s -s scripts/wrk/fixed.lua http://127.0.0.1:18080/auth -- TOKEN_FILE
--
-- TOKEN_FILE's first line is the token. The request is built once (no
-- request() function), so wrk sends it on its fast path. done() prints one
-- machine-readable RESULT line for scripts/loadtest.sh.

local common = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "common.lua")

function init(args)
   if not args[1] then
      error("usage: wrk ... -s fixed.lua URL -- TOKEN_FILE")
   end
   wrk.headers["Authorization"] = "Bearer " .. common.first_line(args[1])
end

function done(summary, latency, requests)
   common.result(summary, latency, 0)
end
