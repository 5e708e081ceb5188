-- wrk script: the same form POST on every request, authenticated with HTTP
-- Basic, for keygate's OAuth endpoints (POST /oauth2/token with
-- grant_type=client_credentials, POST /oauth2/introspect with token=...).
--
--   wrk -t1 -c50 -d10s -s scripts/wrk/form.lua http://127.0.0.1:18080/oauth2/token -- AUTH_FILE BODY_FILE
--
-- AUTH_FILE's first line is the Authorization header's value ("Basic
-- base64(client_id:client_secret)"); BODY_FILE's first
-- line is the form body (application/x-www-form-urlencoded). The request is
-- built once, so wrk sends it on its fast path. done() prints one
-- machine-readable RESULT line for scripts/loadtest-tokens.sh; responses
-- other than 2xx count as status errors.

local function first_line(path)
   local f = assert(io.open(path, "r"))
   local line = f:read("*l")
   f:close()
   if not line or line == "" then
      error(path .. ": empty first line")
   end
   return line
end

function init(args)
   if not args[1] or not args[2] then
      error("usage: wrk ... -s form.lua URL -- AUTH_FILE BODY_FILE")
   end
   wrk.method = "POST"
   wrk.headers["Authorization"] = first_line(args[1])
   wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
   wrk.body = first_line(args[2])
end

function done(summary, latency, requests)
   local e = summary.errors
   io.write(string.format(
      "RESULT requests=%d duration_us=%d connect=%d read=%d write=%d timeout=%d status=%d p50_us=%d p99_us=%d\n",
      summary.requests, summary.duration, e.connect, e.read, e.write, e.timeout, e.status,
      latency:percentile(50), latency:percentile(99)))
end
