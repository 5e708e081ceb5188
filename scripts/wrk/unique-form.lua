-- wrk script: form POSTs with HTTP Basic, each carrying a different token
-- from a file as "token=<token>" (POST /oauth2/introspect of distinct
-- tokens, so that keygate verifies each one in full: a cache miss per
-- request).
--
--   wrk -t1 -c50 -d10s -s scripts/wrk/unique-form.lua http://127.0.0.1:18080/oauth2/introspect -- AUTH_FILE TOKEN_FILE
--
-- Use one thread (-t1). A run that exhausts the file starts it again and
-- counts a wrap; repeated tokens would be cache hits, so
-- scripts/loadtest-tokens.sh rejects a run with wraps > 0. done() prints
-- one machine-readable RESULT line.

local common = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "common.lua")

local threads = {}

function setup(thread)
   table.insert(threads, thread)
end

local next_token

function init(args)
   if not args[1] or not args[2] then
      error("usage: wrk ... -s unique-form.lua URL -- AUTH_FILE TOKEN_FILE")
   end
   local tokens = common.read_tokens(args[2])
   if #tokens == 0 then
      error(args[2] .. ": no tokens")
   end
   common.form_post(args[1])
   next_token = common.cycle(tokens)
end

function request()
   return wrk.format(nil, nil, nil, "token=" .. next_token()) -- sets Content-Length
end

function done(summary, latency, requests)
   common.result(summary, latency, common.wraps_of(threads))
end
