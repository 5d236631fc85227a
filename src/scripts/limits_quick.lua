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
-- job (the entries of the others are read with the rest, but not checked or written).
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
      -- Held jobs (or a held key of another type): the general way releases or reports them.
      if redis.call('EXISTS', base .. ':held') == 1 then return nil end
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
  -- took[s]: the index of the queue whose job slot s took (false: none), made at its size in
  -- one step; taken[q]: how many jobs of queue q were taken and not yet counted.
  local took = { unpack(who, 1, n) }
  for s = 1, n do took[s] = false end
  return { byq = byq, sums = sums, order = order, known = known, delta = {}, had = had,
    who = who, n = n, key = key, took = took, taken = {}, queue_of = {} }
end

-- The slots whose completion was applied (applied[s] == 1) return the shares their entries
-- name. Called once, after the completions and before any job is taken.
local function quick_free(Q, applied)
  local had, known, delta = Q.had, Q.known, Q.delta
  for s = 1, Q.n do
    local v = had[s]
    if v and applied[s] == 1 then
      local q = known[v]
      for i = 1, #q do delta[q[i]] = (delta[q[i]] or 0) - 1 end
    end
  end
end

-- Adds the jobs taken since the last time to the limits' counts (the step notes a job of
-- queue q taken by slot s as took[s] = q, taken[q] = taken[q] + 1; queue_of[q]: its name).
local function quick_settle(Q)
  local delta = Q.delta
  for q, k in pairs(Q.taken) do
    if k > 0 then
      local e = Q.byq[Q.queue_of[q]]
      if e then
        for i = 1, #e do delta[e[i]] = (delta[e[i]] or 0) + k end
      end
      Q.taken[q] = 0
    end
  end
end

-- How many more jobs of queue q (named `name`) may start now; nil when no limit is on it.
-- The room bounds what the step pops, so every job it takes of the queue is admitted.
local function quick_room(Q, q, name)
  Q.queue_of[q] = name
  if Q.taken[q] == nil then Q.taken[q] = 0 end
  local e = Q.byq[name]
  if not e then return nil end
  quick_settle(Q)
  local room = nil
  for i = 1, #e do
    local h = e[i]
    local left = e.caps[i] - Q.sums[h] - (Q.delta[h] or 0)
    if not room or left < room then room = left end
  end
  return room
end

-- Writes what the call changed: each sum (HDEL when it reaches 0), and each slot's entry: what
-- it held (nothing once its job ended: applied[s] == 1), then the entry of the queue whose job
-- it took. Every key was read in quick_plan, so nothing here can fail.
local function quick_flush(Q, applied)
  quick_settle(Q)
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
  local had, took, byq, queue_of = Q.had, Q.took, Q.byq, Q.queue_of
  for s = 1, Q.n do
    local was = had[s]
    local now = was
    if was and applied[s] == 1 then now = false end
    local q = took[s]
    if q then
      local e = byq[queue_of[q]]
      if e then
        if now then now = now .. e.text else now = e.text end
      end
    end
    -- A slot that ended a job and took one of the same queue keeps the same entry.
    if now ~= was then
      if now then
        sets[#sets + 1] = Q.who[s]
        sets[#sets + 1] = now
      else
        dels[#dels + 1] = Q.who[s]
      end
    end
  end
  if #dels > 0 then redis.call('HDEL', Q.key, unpack(dels)) end
  if #sets > 0 then redis.call('HSET', Q.key, unpack(sets)) end
end
