-- limits_derive.lua (module Lim, continued): how many units each concurrency limit has in use,
-- derived from where jobs are, not trusted from a count — so a count mended, deleted or left
-- behind converges, and is never below what runs (a limit is never exceeded on the way).
--
-- The owner of "how many are in use" is the slots' entries in `<ns>:resq:sharing` (one per
-- slot running a job that took shares, written and removed in the same call as the slot's
-- worker record or claim); a limit's `__units` sum is their total, kept by every call
-- (limits.lua) and derived here again:
--   * an entry whose slot has neither a worker record nor a claim is dropped (its job ended
--     where resq could not see it: Ruby's pruner, a key of the wrong type at its end);
--   * a resq slot that runs a job (its worker record) under a concurrency limit in force, and
--     has no entry (`resq:sharing` was deleted; the job started before the limit covered it),
--     gets the entry of that job's shares;
--   * every sum is set to its entries' total.
-- Lim.forget_idle then walks the partitions of keyed limits (a bounded step per call, the walk
-- going on at the next): one with nothing running, held or counted in its window is forgotten.
--
-- Keys: as limits.lua, plus
--   P..'workers', P..'worker:'..id, P..'resq:claim:'..id  (read)
--   P..'resq:limits:sweep'   hash: limit name -> SSCAN cursor of its partitions' walk
--
-- KEYS / ARGV: none (a module).

-- The shares a job (worker record text rec) takes under the concurrency limits of L: its entry
-- text and list of {holders key, units}, or nil (none, or a record that is not a job).
local function shares_of_record(P, L, rec)
  local ok, obj = pcall(cjson.decode, rec)
  if not ok or type(obj) ~= 'table' or type(obj.payload) ~= 'table' or type(obj.queue) ~= 'string' then
    return nil
  end
  local payload = obj.payload
  if type(payload['class']) ~= 'string' then return nil end
  local ls = Lim.for_job(L, P, payload, obj.queue)
  if not ls then return nil end
  local text, list = '', {}
  for _, x in ipairs(ls) do
    if x[1].kind == 'concurrency' then
      local w = Lim.weight(x[1], payload['class'])
      text = text .. Lim.share_text(x.h, w)
      list[#list + 1] = { x.h, w }
    end
  end
  if #list == 0 then return nil end
  return text, list
end

-- Derives the slots' entries and the sums (see the module's doc). Returns how many sums and
-- entries it corrected and the problems met ('<key> <why>'); or nil and the error text, before
-- any write, when `<ns>:resq:sharing` or an entry of a slot that runs is unusable. `most`:
-- the most entries and workers looked at (beyond that, nothing is derived: a problem says so).
function Lim.derive(P, L, most)
  local key = P .. 'resq:sharing'
  local e = G.type_err(key, 'hash')
  if e then return nil, e end
  if redis.call('HLEN', key) > most then
    return nil, key .. ' has more than ' .. most .. ' entries: the sums are not derived'
  end
  local flat = redis.call('HGETALL', key)
  local sums, seen, drop, add, problems = {}, {}, {}, {}, {}
  for i = 1, #flat, 2 do
    local worker, v = flat[i], flat[i + 1]
    seen[worker] = true
    if redis.call('EXISTS', P .. 'worker:' .. worker, P .. 'resq:claim:' .. worker) == 0 then
      drop[#drop + 1] = worker
    else
      -- Lim.shares_of parses (and checks) the entry.
      local list, pe = Lim.shares_of(P, worker)
      if not list then return nil, pe end
      for _, sh in ipairs(list) do sums[sh[1]] = (sums[sh[1]] or 0) + sh[2] end
    end
  end
  if L and not G.type_err(P .. 'workers', 'set') and redis.call('SCARD', P .. 'workers') <= most then
    for _, id in ipairs(redis.call('SMEMBERS', P .. 'workers')) do
      if not seen[id] and string.find(id, '~resq:', 1, true) then
        local rec = redis.pcall('GET', P .. 'worker:' .. id)
        if type(rec) == 'string' then
          local text, list = shares_of_record(P, L, rec)
          if text then
            add[#add + 1] = id
            add[#add + 1] = text
            for _, sh in ipairs(list) do sums[sh[1]] = (sums[sh[1]] or 0) + sh[2] end
          end
        end
      end
    end
  end
  -- The sums to look at: every one an entry names, and each unpartitioned concurrency limit's.
  local hs, fix = {}, {}
  for h in pairs(sums) do hs[#hs + 1] = h end
  if L then
    for _, d in ipairs(L.defs) do
      if d.kind == 'concurrency' and not (type(d.key) == 'string' and d.key ~= '') then
        local h = P .. 'resq:limit:' .. d.name .. ':holders'
        if not sums[h] then hs[#hs + 1] = h end
      end
    end
  end
  for _, h in ipairs(hs) do
    local v = redis.pcall('HGET', h, '__units')
    if type(v) == 'table' then
      problems[#problems + 1] = G.wrongtype_of(h, 'hash')
    elseif tonumber(v or 'x') ~= (sums[h] or 0) then
      fix[#fix + 1] = h
    end
  end
  -- Writes: every key was checked above.
  for _, h in ipairs(fix) do redis.call('HSET', h, '__units', sums[h] or 0) end
  G.each_batch('HDEL', key, drop, 1)
  G.each_batch('HSET', key, add, 2)
  Lim.S().derived = sums
  return #fix + #drop + #add / 2, problems
end

-- Whether partition `part` (base key `base`) of limit d has nothing running, held or counted
-- in its window now; sums: the derived sums (Lim.derive). A key of another type is not idle.
-- The second result: it holds jobs.
local function idle(d, base, sums, now_ms)
  local held = redis.pcall('ZCARD', base .. ':held')
  if type(held) ~= 'number' then return false end
  if held > 0 then return false, true end
  if d.kind == 'concurrency' then
    local h = base .. ':holders'
    if (sums[h] or 0) > 0 then return false end
    local v = redis.pcall('HGET', h, '__units')
    return type(v) ~= 'table' and (tonumber(v or '0') or 1) == 0 and not G.type_err(h, 'hash')
  elseif d.kind == 'rate' then
    local iv = math.max(1, tonumber(d.interval_ms) or 1000)
    if d.sliding then
      local c = redis.pcall('ZCOUNT', base .. ':rate', '(' .. (now_ms - iv), '+inf')
      return c == 0
    end
    return redis.call('EXISTS', base .. ':rate:' .. math.floor(now_ms / iv)) == 0
  end
  return true
end

-- Walks at most `most` partitions of the keyed limits of L from where each walk is, forgetting
-- the idle ones (out of the limit's `parts` set; an idle concurrency partition's sum and a
-- sliding window's past go too; each partition holding jobs is put in the index of held sets,
-- each forgotten one taken out). Returns how many were forgotten.
function Lim.forget_idle(P, L, now_ms, most)
  local walks = P .. 'resq:limits:sweep'
  if not L or G.type_err(walks, 'hash') then return 0 end
  local sums, n, looked = Lim.S().derived or {}, 0, 0
  for _, d in ipairs(L.defs) do
    if type(d.key) == 'string' and d.key ~= '' and looked < most then
      local parts = Lim.parts_key(P, d)
      if not G.type_err(parts, 'set') then
        local cursor = redis.call('HGET', walks, d.name) or '0'
        local base = P .. 'resq:limit:' .. d.name
        repeat
          local r = redis.call('SSCAN', parts, cursor, 'COUNT', math.min(100, most - looked))
          for _, part in ipairs(r[2]) do
            looked = looked + 1
            local b = base .. ':' .. part
            local quiet, holds = idle(d, b, sums, now_ms)
            -- (The index of held sets mended on the way.)
            if holds then Lim.indexed(P, b .. ':held') end
            if quiet then
              Lim.unindexed(P, b .. ':held')
              redis.call('SREM', parts, part)
              if d.kind == 'concurrency' then redis.call('DEL', b .. ':holders') end
              if d.kind == 'rate' and d.sliding and not G.type_err(b .. ':rate', 'zset') then
                redis.call('DEL', b .. ':rate')
              end
              n = n + 1
            end
          end
          cursor = r[1]
        until cursor == '0' or looked >= most
        if cursor == '0' then
          redis.call('HDEL', walks, d.name)
        else
          redis.call('HSET', walks, d.name, cursor)
        end
      end
    end
  end
  return n
end
