-- wrk script: the same JSON POST on every request, authenticated with a
-- Vault token header, for keygate's transit API (POST /v1/transit/encrypt/K
-- with {"plaintext":...}, decrypt, batches).
--
--   wrk -t1 -c50 -d10s -s scripts/wrk/json.lua http://127.0.0.1:18080/v1/transit/encrypt/bench -- TOKEN_FILE BODY_FILE
--
-- TOKEN_FILE's first line is the token, sent as X-Vault-Token (as Vault's
-- clients send it); BODY_FILE's first line is the JSON body. The request is
-- built once, so wrk sends it on its fast path. done() prints one
-- machine-readable RESULT line for scripts/loadtest-transit.sh; responses
-- other than 2xx count as status errors.

local common = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "common.lua")

function init(args)
   if not args[1] or not args[2] then
      error("usage: wrk ... -s json.lua URL -- TOKEN_FILE BODY_FILE")
   end
   wrk.method = "POST"
   wrk.headers["X-Vault-Token"] = common.first_line(args[1])
   wrk.headers["Content-Type"] = "application/json"
   wrk.body = common.first_line(args[2])
end

function done(summary, latency, requests)
   common.result(summary, latency)
end
