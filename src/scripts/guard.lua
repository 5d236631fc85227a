-- guard.lua: the checks a script makes before its first write.
--
-- Redis keeps the writes a script made before it raised an error, so a script that can still
-- fail after it has written leaves half a transition behind (a job popped and never recorded,
-- a counter bumped twice on a resend). Every resq script is written as "check, then write":
-- it reads what could make a write fail (a key of the wrong type, a counter that is not an
-- integer or would overflow) with these functions first, and only then writes, with commands
-- that cannot fail on what was checked. A failed check is an error *reply*, made before any
-- write (or, in step.lua, a per-slot verdict), never a raised error.
--
-- Prepended to every script by src/scripts/mod.rs; it defines local functions only.
-- KEYS / ARGV: none of its own.

-- The error text for `key` holding a `t` where `want` is needed.
local function wrongtype_msg(key, t, want)
  return 'WRONGTYPE ' .. key .. ' is a ' .. t .. ', not a ' .. want
end

-- nil when `key` is absent or of type `want` ('list', 'set', 'zset', 'hash', 'string'), else the
-- error text. TYPE itself never fails.
local function wrong_type(key, want)
  local t = redis.call('TYPE', key)['ok']
  if t == 'none' or t == want then return nil end
  return wrongtype_msg(key, t, want)
end

-- nil when the counter value v (a string, or false when absent) of `what` can take n more
-- increments, else the error text. (Redis reads "0", "-12", "345" as integers; not "+1",
-- " 1", "01", "1.0".)
local function counter_err(what, v, n)
  if not v then return nil end
  local digits = string.match(v, '^%-?([1-9]%d*)$')
  if v ~= '0' and not digits then
    return 'NOTINTEGER ' .. what .. ' holds ' .. string.format('%q', string.sub(v, 1, 40)) .. ', not an integer'
  end
  -- 18 digits leave more headroom than any one script adds (n is at most a few hundred).
  if digits and #digits > 18 then
    return 'NOTINTEGER ' .. what .. ' is ' .. v .. ', too close to the 64-bit limit to add ' .. n
  end
  return nil
end

-- nil when `key` is absent or holds an integer that `n` more increments cannot overflow, else
-- the error text.
local function bad_counter(key, n)
  local v = redis.pcall('GET', key)
  if type(v) == 'table' then
    return wrongtype_msg(key, redis.call('TYPE', key)['ok'], 'string counter')
  end
  return counter_err(key, v, n)
end

-- The same for field `field` of hash `key`, whose type was checked (HINCRBY raises on a field
-- that is not an integer).
local function bad_hash_counter(key, field, n)
  return counter_err(key .. ' field ' .. field, redis.call('HGET', key, field), n)
end

-- wrong_type, asked once per call for each key (scripts that check the same key for many jobs
-- of one call: tracked jobs' indexes, limits' keys). Only for keys whose type the call itself
-- does not change.
local track_checked = {}
local function track_type_err(key, want)
  local v = track_checked[key]
  if v == nil then
    v = wrong_type(key, want) or false
    track_checked[key] = v
  end
  return v or nil
end

-- The first non-nil of the checks' results (each a string or nil).
local function first_error(...)
  local n = select('#', ...)
  for i = 1, n do
    local e = select(i, ...)
    if e then return e end
  end
  return nil
end
