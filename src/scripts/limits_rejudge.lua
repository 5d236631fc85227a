-- limits_rejudge.lua (module Lim, continued): the held jobs of a limit whose definition changed
-- live in what it holds and where (its queue, class or key, its weights or priorities, its
-- kind; or it was removed) go back to the head of their queues, where the next reserve judges
-- them again under the limits then in force (held again, in the right held set, only if a
-- limit still does not admit them: a limit is never exceeded on the way). A raised or lowered
-- number needs none of this (limits_release.lua releases what fits).
--
-- Bounded per call: a limit being re-judged is a field of `<ns>:resq:limits:rejudge` (name ->
-- where the walk is: '' for the unpartitioned held set, else 'p'..<SSCAN cursor> of its
-- partitions); each call goes on from there, and the field goes once every held set of the
-- limit has been emptied. The change itself starts the walk (limits_set.lua); every process's
-- sweep (limits_sweep.lua) goes on with it, and starts it again when that process sees the
-- change, so a job held by a process that still had the old definition is re-judged too.
--
-- Keys: as limits.lua and limits_held.lua, plus
--   P..'resq:limits:rejudge'   hash: limit name -> where its walk is
--
-- KEYS / ARGV: none (a module).

-- Puts back at most `most` jobs of held set hd (in the order they were held); returns how many
-- and whether the set is now empty. A set of another type, a member resq did not write, or a
-- job whose queue is unusable is passed over (it stays held).
local function empty_held(P, hd, most)
  if most <= 0 then return 0, false end
  local r = redis.pcall('ZRANGE', hd, 0, most - 1)
  if r.err then return 0, true end
  local out = {}
  for _, m in ipairs(r) do
    -- (A member resq did not write names no queue: it stays where it is.)
    if not Lim.member(m) or Lim.requeue_err(P, m) then break end
    out[#out + 1] = m
  end
  if #out == 0 then
    if #r == 0 then Lim.unindexed(P, hd) end
    return 0, true
  end
  G.each_batch('ZREM', hd, out, 1)
  Lim.requeue_all(P, out)
  local done = #out == #r and #r < most
  if done then Lim.unindexed(P, hd) end
  return #out, done
end

-- The key of the walks in progress (nil and the error text when it is of another type).
function Lim.rejudge_key(P)
  local key = P .. 'resq:limits:rejudge'
  local e = G.type_err(key, 'hash')
  if e then return nil, e end
  return key
end

-- Starts (again) the walk of limit `name` (key: Lim.rejudge_key's, checked).
function Lim.rejudge_start(key, name)
  redis.call('HSET', key, name, '')
end

-- Goes on with the walk of limit `name` from where it is: puts back at most `budget` held jobs,
-- looks at at most 1,000 partitions. Returns how many jobs went back.
function Lim.rejudge(P, key, name, budget)
  local at = redis.call('HGET', key, name)
  if not at then return 0 end
  local base = P .. 'resq:limit:' .. name
  local n = 0
  if at == '' then
    local k, done = empty_held(P, base .. ':held', budget)
    n = n + k
    if not done then return n end
    at = 'p0'
  end
  local parts = base .. ':parts'
  if G.type_err(parts, 'set') then
    redis.call('HDEL', key, name)
    return n
  end
  local cursor, looked = string.sub(at, 2), 0
  while looked < 1000 do
    local r = redis.call('SSCAN', parts, cursor, 'COUNT', 100)
    for _, part in ipairs(r[2]) do
      local k, done = empty_held(P, base .. ':' .. part .. ':held', budget - n)
      n = n + k
      looked = looked + 1
      if not done then
        -- The rest of this batch of partitions next time (those emptied cost a read).
        redis.call('HSET', key, name, 'p' .. cursor)
        return n
      end
    end
    cursor = r[1]
    if cursor == '0' then
      redis.call('HDEL', key, name)
      return n
    end
  end
  redis.call('HSET', key, name, 'p' .. cursor)
  return n
end
