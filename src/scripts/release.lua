-- release.lua: put held jobs back into their queues when nothing else would (limits.lua): the
-- rate- and window-held jobs whose time has come (as many as each limit admits), every job held
-- by a window that is open, the concurrency-held jobs that fit a limit's capacity (it was
-- raised, or shares came back without a release), and every job held by a limit no longer in
-- force.
--
-- KEYS: none (built from the prefix; see limits.lua).
-- ARGV[1] the namespace prefix '<ns>:'   ARGV[2] the limits in force (limits.lua's JSON, or '')
-- ARGV[3] now in epoch ms   ARGV[4] most jobs to release in this call
-- ARGV[5..] names of limits no longer in force
-- Returns {jobs released, the next time a held job may be released (epoch ms) or ''}. Sets
-- `<ns>:resq:wake` (every process looks at its queues again) when a limit closes a whole queue.
-- Nothing is written for a held set whose queue (or set) is unusable; it stays held.

local P, now_ms, budget = ARGV[1], tonumber(ARGV[3]), tonumber(ARGV[4])
local L = { defs = {}, open = {} }
if ARGV[2] ~= '' then
  local ok, l = pcall(cjson.decode, ARGV[2])
  if ok and type(l) == 'table' and type(l.defs) == 'table' then L = l end
end
local n = limits_release_due(P, L, now_ms, budget)
-- A queue closed by its own rate or window limit holds nothing: wake the processes so they
-- look at their queues again now that time has passed.
for _, d in ipairs(L.defs) do
  if d.kind ~= 'concurrency' and type(d.queue) == 'string' and type(d.class) ~= 'string' then
    limits_wake(P, now_ms)
    break
  end
end

-- Releases what fits in one partition's base (cap: math.huge for a limit no longer in force).
local function drain(base, cap)
  local hd, h = base .. ':held', base .. ':holders'
  if track_type_err(hd, 'zset') or track_type_err(h, 'hash') then return end
  local used = limit_used(h)
  local out = {}
  while n < budget do
    local top = redis.call('ZRANGE', hd, 0, 0)[1]
    if not top then break end
    local _, units = limit_member(top)
    if used + units > cap or limit_requeue_err(P, top) then break end
    redis.call('ZREM', hd, top)
    out[#out + 1] = top
    used = used + units
    n = n + 1
  end
  limit_requeue_all(P, out)
end

-- Every partition of limit `name` (the unpartitioned base too).
local function each_base(name, f)
  local parts_key = P .. 'resq:limit:' .. name .. ':parts'
  f(P .. 'resq:limit:' .. name, '')
  if track_type_err(parts_key, 'set') then return end
  for _, part in ipairs(redis.call('SMEMBERS', parts_key)) do
    f(P .. 'resq:limit:' .. name .. ':' .. part, part)
  end
end

for _, d in ipairs(L.defs) do
  local w = type(L.open) == 'table' and L.open[d.name] or nil
  if d.kind == 'window' and not (type(w) == 'table' and w.open == false) then
    -- An open window holds nothing (it opened, or an operator changed it).
    each_base(d.name, function(base) drain(base, math.huge) end)
  elseif d.kind == 'concurrency' then
    each_base(d.name, function(base, part)
      drain(base, d.limit)
      -- A partition with nothing running and nothing held is forgotten.
      if part ~= '' and redis.call('EXISTS', base .. ':holders', base .. ':held') == 0 then
        redis.call('SREM', P .. 'resq:limit:' .. d.name .. ':parts', part)
      end
    end)
  end
end
for i = 5, #ARGV do
  each_base(ARGV[i], function(base) drain(base, math.huge) end)
end

local next_due = ''
if not track_type_err(P .. 'resq:held:due', 'zset') then
  local first = redis.call('ZRANGE', P .. 'resq:held:due', 0, 0, 'WITHSCORES')
  if first[2] then next_due = first[2] end
end
return { n, next_due }
