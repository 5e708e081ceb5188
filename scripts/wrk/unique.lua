-- wrk script: every request carries a different pre-minted token, so keygate
-- verifies each one in full (a cache miss per request).
--
--   wrk -t1 -c100 -d10s -s scripts/wrk/unique.lua http://127.0.0.1:18080/auth -- TOKEN_FILE THREADS
--
-- TOKEN_FILE holds one token per line (keygate bench tokens). THREADS must
-- equal wrk's -t: thread k of THREADS sends the k-th contiguous block of the
-- file, so no two threads share a token. A thread that runs out of tokens
-- starts its block again and counts a wrap; repeated tokens would be cache
-- hits, so scripts/loadtest.sh rejects a keygate run with wraps > 0.
-- done() prints one machine-readable RESULT line.

local common = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "common.lua")

local threads = {}
local next_id = 0

function setup(thread)
   thread:set("id", next_id)
   next_id = next_id + 1
   table.insert(threads, thread)
end

local next_token
local prefix, suffix

function init(args)
   local path, nthreads = args[1], tonumber(args[2] or "1")
   if not path then
      error("usage: wrk ... -s unique.lua URL -- TOKEN_FILE THREADS")
   end
   local total = 0
   for _ in io.lines(path) do
      total = total + 1
   end
   local tokens = common.read_tokens(path, math.floor(total * id / nthreads), math.floor(total * (id + 1) / nthreads))
   if #tokens == 0 then
      error(path .. ": no tokens for thread " .. id)
   end
   -- Build the request once around a marker and splice each token in.
   wrk.headers["Authorization"] = "Bearer @TOKEN@"
   local req = wrk.format()
   local at = req:find("@TOKEN@", 1, true)
   prefix, suffix = req:sub(1, at - 1), req:sub(at + 7)
   next_token = common.cycle(tokens)
end

function request()
   return prefix .. next_token() .. suffix
end

function done(summary, latency, requests)
   common.result(summary, latency, common.wraps_of(threads))
end
