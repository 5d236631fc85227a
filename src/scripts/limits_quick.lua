-- limits_quick.lua: the step's quick way with concurrency limits on whole queues
-- (docs/limits.md, "The quick way").
--
-- Under a limit on a queue, most slots of a step call end a job of that queue and take the next
-- one: each returns its share and takes the same share again, and its entry in
-- `<ns>:resq:sharing` keeps the same text. The general way (limits.lua) does this through its
-- bookkeeping per slot and per share. This library does it with a count per limit and an entry
-- text per slot, for the calls where that is all there is to do:
--   * every limit in force is a concurrency limit on a queue, with no class, no key, no
--     weights and no priorities. A queue's room, read before each pop, then bounds what is
--     popped, and every job popped is admitted. The general way holds nothing in such a call
--     either;
--   * every slot of the call that ends or wants a job holds no entry, or exactly the entry that
--     a job of a limited queue takes;
--   * every limit's sum is an integer, its held set is empty (a share returned releases
--     nothing), and `<ns>:resq:sharing` is a hash or absent.
-- Any other call goes the general way as a whole. The writes are the general way's: the same
-- entry texts (limits.lua's share_text), the same sums, HDEL of a sum that reaches 0. A test
-- runs both ways call by call and compares what they write (src/worker/limits_tests.rs).
--
-- A library made on first use (src/scripts/compose.rs), after guard.lua, whose counter_err it
-- uses; local functions only.
-- KEYS / ARGV: none of its own.

-- The plan of a step call, or nil when the call goes the general way. L: the limits JSON,
-- decoded; who[s]: slot s's worker id (slots 1..n); moves(s): whether slot s ends or wants a
-- job (the others' entries are neither read for nor written by the call).
local function quick_plan(P, L, who, n, moves)
  if n > 1000 then return nil end
  local byq, sums, order, known = {}, {}, {}, {}
  for _, d in ipairs(L.defs) do
    if d.kind ~= 'concurrency' or type(d.queue) ~= 'string' or type(d.name) ~= 'string'
        or type(d.limit) ~= 'number' or type(d.class) == 'string'
        or (type(d.key) == 'string' and d.key ~= '')
        or (type(d.weights) == 'table' and next(d.weights) ~= nil)
        or (type(d.priority) == 'table' and next(d.priority) ~= nil) then
      return nil
    end
    local base = P .. 'resq:limit:' .. d.name
    local h = base .. ':holders'
    if sums[h] == nil then
      -- An error value (not raised: pcall) for a key of another type.
      local v = redis.pcall('HGET', h, '__units')
      if type(v) == 'table' or counter_err(h, v, 1) then return nil end
      local top = redis.pcall('ZRANGE', base .. ':held', 0, 0)
      if top.err or top[1] then return nil end
      sums[h] = tonumber(v) or 0
      order[#order + 1] = h
    end
    local q = byq[d.queue]
    if not q then
      q = { caps = {}, text = '' }
      byq[d.queue] = q
    end
    q[#q + 1] = h
    q.caps[#q] = d.limit
    q.text = q.text .. '1 ' .. #h .. ':' .. h
  end
  for _, q in pairs(byq) do known[q.text] = q end
  -- One HMGET for every slot of the call: its answer, by slot number, is what each holds.
  local key = P .. 'resq:sharing'
  local had = redis.pcall('HMGET', key, unpack(who, 1, n))
  if had.err then return nil end
  for s = 1, n do
    local v = had[s]
    if v and not known[v] and moves(s) then return nil end
  end
  return { byq = byq, sums = sums, order = order, known = known, delta = {}, had = had,
    now = {}, who = who, key = key }
end

-- Slot s's job ended: the shares its entry names come back (once).
local function quick_free(Q, s)
  local v = Q.had[s]
  if v and Q.now[s] == nil then
    local q, delta = Q.known[v], Q.delta
    for i = 1, #q do delta[q[i]] = (delta[q[i]] or 0) - 1 end
    Q.now[s] = ''
  end
end

-- How many more jobs of queue `name` may start now; nil when no limit is on it.
local function quick_room(Q, name)
  local q = Q.byq[name]
  if not q then return nil end
  local room = nil
  for i = 1, #q do
    local h = q[i]
    local left = q.caps[i] - Q.sums[h] - (Q.delta[h] or 0)
    if not room or left < room then room = left end
  end
  return room
end

-- Slot s starts a job of queue `name` (admitted: the room bounded the pop): one unit of each of
-- the queue's limits, their entry text after what the slot still holds.
local function quick_take(Q, s, name)
  local q = Q.byq[name]
  if not q then return end
  local delta = Q.delta
  for i = 1, #q do delta[q[i]] = (delta[q[i]] or 0) + 1 end
  local cur = Q.now[s]
  if cur == nil then cur = Q.had[s] or '' end
  Q.now[s] = cur .. q.text
end

-- Writes what the call changed: each sum (HDEL when it reaches 0) and the changed entries.
-- Every key was read in quick_plan, so nothing here can fail.
local function quick_flush(Q)
  for _, h in ipairs(Q.order) do
    local d = Q.delta[h]
    if d and d ~= 0 then
      if Q.sums[h] + d <= 0 then
        redis.call('HDEL', h, '__units')
      else
        redis.call('HINCRBY', h, '__units', d)
      end
    end
  end
  local sets, dels = {}, {}
  for s, v in pairs(Q.now) do
    local was = Q.had[s]
    if v ~= '' then
      -- A slot that ended a job and took one of the same queue keeps the same entry.
      if v ~= was then
        sets[#sets + 1] = Q.who[s]
        sets[#sets + 1] = v
      end
    elseif was then
      dels[#dels + 1] = Q.who[s]
    end
  end
  if #dels > 0 then redis.call('HDEL', Q.key, unpack(dels)) end
  if #sets > 0 then redis.call('HSET', Q.key, unpack(sets)) end
end
