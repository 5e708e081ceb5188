-- Helpers the wrk scripts here share; each loads this file with
--   local common = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "common.lua")
-- (wrk runs every script in several Lua states, one per thread and one for
-- setup and done, so each state loads it once).

local common = {}

-- first_line returns the first line of the file at path, which must not be
-- empty.
function common.first_line(path)
   local f = assert(io.open(path, "r"))
   local line = f:read("*l")
   f:close()
   if not line or line == "" then
      error(path .. ": empty first line")
   end
   return line
end

-- form_post makes every request a form POST authenticated with the
-- Authorization header value on auth_file's first line.
function common.form_post(auth_file)
   wrk.method = "POST"
   wrk.headers["Authorization"] = common.first_line(auth_file)
   wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
end

-- result prints the one machine-readable RESULT line the load-test scripts
-- read; wraps is how often a distinct-token run ran out of tokens (nil for
-- scripts that repeat one request).
function common.result(summary, latency, wraps)
   local e = summary.errors
   local w = ""
   if wraps then
      w = string.format(" wraps=%d", wraps)
   end
   io.write(string.format(
      "RESULT requests=%d duration_us=%d connect=%d read=%d write=%d timeout=%d status=%d%s p50_us=%d p99_us=%d\n",
      summary.requests, summary.duration, e.connect, e.read, e.write, e.timeout, e.status, w,
      latency:percentile(50), latency:percentile(99)))
end

-- read_tokens returns the non-empty lines of path among its lines lo to
-- hi - 1, counted from 0 (every line when lo is nil).
function common.read_tokens(path, lo, hi)
   local out, i = {}, 0
   for line in io.lines(path) do
      if line ~= "" and (not lo or (i >= lo and i < hi)) then
         out[#out + 1] = line
      end
      i = i + 1
   end
   return out
end

-- cycle returns a function giving the tokens one after another, starting
-- the list again at its end and counting that in the thread's "wraps"
-- global (a repeated token would be a cache hit; see wraps_of).
function common.cycle(tokens)
   local pos = 0
   wraps = 0
   return function()
      pos = pos + 1
      if pos > #tokens then
         pos = 1
         wraps = wraps + 1
      end
      return tokens[pos]
   end
end

-- wraps_of sums the "wraps" global of the threads setup() collected.
function common.wraps_of(threads)
   local w = 0
   for _, t in ipairs(threads) do
      w = w + (t:get("wraps") or 0)
   end
   return w
end

return common
