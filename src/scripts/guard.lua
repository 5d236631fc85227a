-- guard.lua (module G): the checks a function makes before its first write.
--
-- Redis keeps the writes a function made before it raised an error, so one that could still
-- fail after it has written would leave half a transition behind (a job popped and never
-- recorded, a counter bumped twice on a resend). Every resq function is written as "check,
-- then write": what could make a write fail (a key of the wrong type, a counter that is not an
-- integer or would overflow) is read first with these helpers, and the writes that follow
-- cannot fail on what was checked. A failed check is an error *reply* made before any write
-- (or, in a step, a per-slot verdict), never a raised error.
--
-- KEYS / ARGV: none (a module).

-- Problems (docs/architecture.md, "Calls between Rust and Lua"): the problems of list `ps`, one
-- a line, as one text; nil when there is none. A problem is free text naming its key; Rust reads
-- the lines with `scripts::texts::problem_lines` and only logs them.
function G.lines(ps)
  if #ps == 0 then return nil end
  return table.concat(ps, '\n')
end

-- The error text for `key` holding a `t` where `want` is needed.
function G.wrongtype_msg(key, t, want)
  return 'WRONGTYPE ' .. key .. ' is a ' .. t .. ', not a ' .. want
end

-- The error text for `key`, found of another type than `want` by a command that failed.
function G.wrongtype_of(key, want)
  return G.wrongtype_msg(key, redis.call('TYPE', key)['ok'], want)
end

-- nil when `key` is absent or of type `want` ('list', 'set', 'zset', 'hash', 'string'), else
-- the error text. TYPE itself never fails.
function G.wrong_type(key, want)
  local t = redis.call('TYPE', key)['ok']
  if t == 'none' or t == want then return nil end
  return G.wrongtype_msg(key, t, want)
end

-- nil when the counter value v (a string, or false when absent) of `what` can take n more
-- increments, else the error text. (Redis reads "0", "-12", "345" as integers; not "+1",
-- " 1", "01", "1.0".)
function G.counter_err(what, v, n)
  if not v then return nil end
  -- (The usual value, checked without making a string: digits, no leading zero, 18 at most.)
  if #v < 19 and string.find(v, '^[1-9]%d*$') then return nil end
  local digits = string.match(v, '^%-?([1-9]%d*)$')
  if v ~= '0' and not digits then
    return 'NOTINTEGER ' .. what .. ' holds ' .. string.format('%q', string.sub(v, 1, 40))
      .. ', not an integer'
  end
  -- 18 digits leave more headroom than any one call adds (n is at most a few thousand).
  if digits and #digits > 18 then
    return 'NOTINTEGER ' .. what .. ' is ' .. v .. ', too close to the 64-bit limit to add ' .. n
  end
  return nil
end

-- nil when `key` is absent or holds an integer that `n` more increments cannot overflow, else
-- the error text.
function G.bad_counter(key, n)
  local v = redis.pcall('GET', key)
  if type(v) == 'table' then return G.wrongtype_of(key, 'string counter') end
  return G.counter_err(key, v, n)
end

-- A GET that reports a wrong type instead of raising: the value (or false), and the error text.
function G.get(key)
  local v = redis.pcall('GET', key)
  if type(v) == 'table' then return nil, G.wrongtype_of(key, 'string') end
  return v, nil
end

-- G.wrong_type, asked once per call for each key (for keys many jobs of one call use, whose
-- type the call itself does not change).
local seen, seen_call = {}, -1
function G.type_err(key, want)
  if seen_call ~= G.call then
    seen, seen_call = {}, G.call
  end
  local v = seen[key]
  if v == nil then
    v = G.wrong_type(key, want) or false
    seen[key] = v
  end
  return v or nil
end

-- `cmd key items…` in commands of at most 1,000 items (`unpack` is bounded by Lua's stack);
-- `per`: items that belong together (a field and its value).
function G.each_batch(cmd, key, items, per)
  local n = #items
  local step = 1000 - 1000 % per
  for i = 1, n, step do
    redis.call(cmd, key, unpack(items, i, math.min(n, i + step - 1)))
  end
end

-- The first non-nil of the checks' results.
function G.first(...)
  for i = 1, select('#', ...) do
    local e = select(i, ...)
    if e then return e end
  end
  return nil
end

-- Small whole numbers as text, made once: Lua turns a number into text with the C library's
-- printf (thousands of instructions), whether a script concatenates it or hands it to Redis,
-- and counts and attempts are small numbers written on every move.
local NUMS = {}
function G.num(n)
  local t = NUMS[n]
  if not t then
    -- (A whole number in digits, however large: tostring would write 1e+15.)
    t = n % 1 == 0 and string.format('%.0f', n) or tostring(n)
    if n >= 0 and n < 4096 and n % 1 == 0 then NUMS[n] = t end
  end
  return t
end

-- The whole number written `t` (an index or a count a worker sends on every call), or nil: the
-- texts G.num writes are kept, so reading one again is a table lookup, not tonumber's strtod.
local INTS = {}
function G.int(t)
  local v = INTS[t]
  if v == nil then
    v = tonumber(t)
    if v and v % 1 == 0 and v >= 0 and v < 4096 and t == G.num(v) then INTS[t] = v end
  end
  return v
end
