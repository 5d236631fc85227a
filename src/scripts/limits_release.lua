-- limits_release.lua: the function `limits_release` — put held jobs back into their queues when
-- nothing else would (limits.lua): the rate- and window-held jobs whose time has come (as many
-- as each limit admits), every job held by a window that is open, the concurrency-held jobs
-- that fit a limit's capacity (it was raised, or shares came back without a release), and every
-- job held by a limit no longer in force. Run by each process's limits timer
-- (src/limits/cache.rs).
--
-- KEYS[1] <ns>:resq:held:due (for routing; the other keys are built from the prefix)
-- ARGV[1] the namespace prefix '<ns>:'   ARGV[2] the limits in force (limits.lua's JSON, or '')
-- ARGV[3] now in epoch ms   ARGV[4] most jobs to release in this call
-- ARGV[5..] names of limits no longer in force
-- Returns {jobs released, the next time a held job may be released (epoch ms) or ''}. Sets
-- `<ns>:resq:wake` (every process looks at its queues again) when a limit closes a whole queue.
-- Nothing is written for a held set whose queue (or set) is unusable; it stays held. Partitions
-- are found through the index of held sets (`<ns>:resq:held:sets`, limits_held.lua).

-- Releases what fits in one partition's base (cap: math.huge for a limit no longer in force);
-- returns how many of `left`.
local function drain(P, base, cap, left)
  local hd, h = base .. ':held', base .. ':holders'
  if G.type_err(hd, 'zset') then return 0 end
  local used = Lim.units(h, P)
  if not used then return 0 end
  local out = Lim.take_fitting(P, hd, nil, used, cap, left)
  Lim.requeue_all(P, out)
  return #out
end

-- The unpartitioned base of limit `name`, and each partition base of it whose held set holds
-- jobs (the index of held sets: partitions that hold nothing cost nothing here), with
-- f(base, part).
local function each_base(P, name, f)
  local base = P .. 'resq:limit:' .. name
  f(base, '')
  local ix = P .. 'resq:held:sets'
  if G.type_err(ix, 'zset') then return end
  -- Every entry that starts '<base>:' (';' is the byte after ':').
  for _, hd in ipairs(redis.call('ZRANGE', ix, '[' .. base .. ':', '(' .. base .. ';', 'BYLEX')) do
    local b = string.sub(hd, 1, -6)
    if b ~= base and string.sub(hd, -5) == ':held' then f(b, string.sub(b, #base + 2)) end
  end
end

local function limits_release(KEYS, ARGV)
  local P, now_ms, budget = ARGV[1], tonumber(ARGV[3]), tonumber(ARGV[4])
  local L = Lim.load(ARGV[2], P) or { defs = {}, open = {} }
  local n = Lim.release_due(P, L, now_ms, budget)
  -- A queue closed by its own rate or window limit holds nothing: wake the processes so they
  -- look at their queues again now that time has passed.
  for _, d in ipairs(L.defs) do
    if d.kind ~= 'concurrency' and type(d.queue) == 'string' and type(d.class) ~= 'string' then
      Lim.wake(P, now_ms)
      break
    end
  end
  for _, d in ipairs(L.defs) do
    local w = type(L.open) == 'table' and L.open[d.name] or nil
    if d.kind == 'window' and not (type(w) == 'table' and w.open == false) then
      -- An open window holds nothing (it opened, or an operator changed it).
      each_base(P, d.name, function(base) n = n + drain(P, base, math.huge, budget - n) end)
    elseif d.kind == 'concurrency' then
      -- (Idle partitions are forgotten by the sweep: limits_derive.lua's Lim.forget_idle.)
      each_base(P, d.name, function(base) n = n + drain(P, base, d.limit, budget - n) end)
    end
  end
  for i = 5, #ARGV do
    each_base(P, ARGV[i], function(base) n = n + drain(P, base, math.huge, budget - n) end)
  end
  local next_due = ''
  if not G.type_err(P .. 'resq:held:due', 'zset') then
    local first = redis.call('ZRANGE', P .. 'resq:held:due', 0, 0, 'WITHSCORES')
    if first[2] then next_due = first[2] end
  end
  return { n, next_due }
end

register('limits_release', limits_release)
