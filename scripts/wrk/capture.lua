-- wrk script: form POSTs to /oauth2/token (like form.lua) whose answers'
-- access tokens are written to a file, one per line, for a later run that
-- must present a different token on every request (unique-form.lua).
--
--   wrk -t1 -c50 -d8s -s scripts/wrk/capture.lua http://127.0.0.1:18080/oauth2/token -- AUTH_FILE BODY_FILE OUT_FILE
--
-- Use one thread (-t1): every thread would write the same file. done()
-- prints the RESULT line form.lua prints.

local common = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "common.lua")

local out

function init(args)
   if not args[1] or not args[2] or not args[3] then
      error("usage: wrk ... -s capture.lua URL -- AUTH_FILE BODY_FILE OUT_FILE")
   end
   common.form_post(args[1])
   wrk.body = common.first_line(args[2])
   out = assert(io.open(args[3], "w"))
end

function response(status, headers, body)
   if status == 200 then
      local tok = body:match('"access_token":"([^"]+)"')
      if tok then
         out:write(tok, "\n")
      end
   end
end

function done(summary, latency, requests)
   common.result(summary, latency)
end
