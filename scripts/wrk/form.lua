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

local common = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "common.lua")

function init(args)
   if not args[1] or not args[2] then
      error("usage: wrk ... -s form.lua URL -- AUTH_FILE BODY_FILE")
   end
   common.form_post(args[1])
   wrk.body = common.first_line(args[2])
end

function done(summary, latency, requests)
   common.result(summary, latency)
end
