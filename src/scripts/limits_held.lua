-- limits_held.lua (module Lim, continued): what a limit does with the jobs it does not admit,
-- and with the capacity a finished job gives back.
--
--   Lim.hold      a job a limit does not admit goes to the limit's held zset (highest priority
--                 first, then oldest), out of its queue, in the call that popped it;
--   Lim.free      a slot's job ended: its shares come back, and the held jobs that now fit are
--                 taken out of their held sets for the caller to start or put back;
--   Lim.gate      a queue whose own limit is full is not popped at all (nothing to hold), and
--                 one with room for N pops at most N;
--   Lim.release_due  rate- and window-held jobs whose time has come, back to their queue's head.
--
-- Keys: as limits.lua, plus
--   base..':held'        zset of held jobs; member '<seq>\t<queue>\t<units>\t<name>\t<payload>'
--                        (payload '@<key>' for a large payload kept in a list of its own)
--   P..'resq:held:due'   zset of held sets by when they may be released (ms)
--   P..'resq:held:sets'  zset (scores 0: by name) of the held sets that hold jobs: a set
--                        enters with its first job and leaves when emptied, in that call
--                        (Lim.indexed / Lim.unindexed); readers list only these
--   P..'resq:wake'       written to tell every resq process to look at its queues again
--
-- KEYS / ARGV: none (a module).

-- Held set hd (of namespace prefix P) holds a job now: it is in the index of held sets. The
-- index is a reader's aid: written with pcall (an index of another type is passed over here,
-- named by the limits sweep), so it can never fail a call after its first write.
function Lim.indexed(P, hd) redis.pcall('ZADD', P .. 'resq:held:sets', 0, hd) end

-- Held set hd is empty now: out of the index (a job held in it later in the call puts it back).
function Lim.unindexed(P, hd)
  Lim.S().indexed[hd] = nil
  redis.pcall('ZREM', P .. 'resq:held:sets', hd)
end

-- Mends the index of held sets, a bounded step of the limits sweep: of `most` entries picked at
-- random, those that hold no job (or are no zset) leave; each unpartitioned held set of the
-- limits in force L that holds jobs enters (a keyed limit's partitions enter as
-- Lim.forget_idle walks them). Returns how many entries changed, or nil and the error text
-- when the index is of another type (nothing written then).
function Lim.mend_index(P, L, most)
  local ix = P .. 'resq:held:sets'
  local e = G.type_err(ix, 'zset')
  if e then return nil, e end
  local n = 0
  for _, hd in ipairs(redis.call('ZRANDMEMBER', ix, most)) do
    local c = redis.pcall('ZCARD', hd)
    if type(c) ~= 'number' or c == 0 then
      redis.call('ZREM', ix, hd)
      n = n + 1
    end
  end
  for _, d in ipairs(L and L.defs or {}) do
    local hd = P .. 'resq:limit:' .. d.name .. ':held'
    local c = redis.pcall('ZCARD', hd)
    if type(c) == 'number' and c > 0 and redis.call('ZADD', ix, 'NX', 0, hd) == 1 then n = n + 1 end
  end
  return n
end

-- A held job's score: higher priority first, then older first.
local function score(d, class, now_ms)
  local p = type(d.priority) == 'table' and tonumber(d.priority[class]) or 0
  p = math.floor(math.max(0, math.min(99, p or 0)))
  return (99 - p) * 1e13 + now_ms
end

-- A held job (docs/architecture.md; Rust reads it with `scripts::texts::parse_held`): the zset
-- member '<seq>\t<queue>\t<units>\t<name>\t<payload>' (the payload last, anything in it).
function Lim.member_text(seq, queue, units, name, payload)
  return seq .. '\t' .. queue .. '\t' .. units .. '\t' .. name .. '\t' .. payload
end

-- Holds a job (payload text, or '@<key>' of a list holding it) of `class` from `queue` under the
-- blocking limit x = {def, base, part}; `due`: when it may be released (rate and window).
function Lim.hold(P, x, due, class, queue, payload, seq, now_ms)
  local d, base, part = x[1], x[2], x[3]
  if part then redis.call('SADD', Lim.parts_key(P, d), part) end
  Lim.S().held_empty[base .. ':held'] = nil
  local member = Lim.member_text(seq, queue, Lim.weight(d, class), d.name, payload)
  if redis.call('ZADD', base .. ':held', score(d, class, now_ms), member) == 1
    and Lim.S().indexed[base .. ':held'] == nil then
    -- (Once per set and call: a call holding many jobs in one set writes the index once.)
    Lim.S().indexed[base .. ':held'] = true
    Lim.indexed(P, base .. ':held')
  end
  if due then redis.call('ZADD', P .. 'resq:held:due', 'LT', due, base .. ':held') end
end

-- The parts of a held member (Lim.member_text): queue, units, limit name, payload (or '@<key>').
function Lim.member(m)
  local _, queue, units, name, payload = string.match(m, '^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t(.*)$')
  return queue, tonumber(units) or 1, name, payload
end

-- nil when held member m can go back to its queue (the queue, and a large payload's list, are
-- lists or absent), else the error text.
function Lim.requeue_err(P, m)
  local queue, _, _, payload = Lim.member(m)
  local e = Jes.put_back_err(P .. 'queue:' .. queue) or G.type_err(P .. 'queues', 'set')
  if not e and string.sub(payload, 1, 1) == '@' then e = G.type_err(string.sub(payload, 2), 'list') end
  return e
end

-- Puts held members `ms` (in the order they were held; checked with Lim.requeue_err) back at
-- the head of their queues, in that order.
function Lim.requeue_all(P, ms)
  for i = #ms, 1, -1 do
    local queue, _, _, payload = Lim.member(ms[i])
    local qkey = P .. 'queue:' .. queue
    if string.sub(payload, 1, 1) == '@' then
      local ref = string.sub(payload, 2)
      if redis.call('TYPE', qkey)['ok'] == 'zset' then
        local raw = redis.call('LINDEX', ref, 0)
        if raw then Jes.put_back(qkey, raw) end
      else
        redis.call('LMOVE', ref, qkey, 'LEFT', 'LEFT')
      end
      redis.call('DEL', ref)
    else
      Jes.put_back(qkey, payload)
    end
    redis.call('SADD', P .. 'queues', queue)
  end
end

-- The held set of holders key h (the same base; made once per key).
local HELD, helds = {}, 0
local function held_of(h)
  local hd = HELD[h]
  if not hd then
    if helds > 4096 then HELD, helds = {}, 0 end
    hd = string.sub(h, 1, -9) .. ':held'
    HELD[h], helds = hd, helds + 1
  end
  return hd
end

-- Takes from held set hd the jobs that fit `cap` with `used` units in use, up to `budget`:
-- out of the set, counted as pending for holders key h (nil: none) until a slot takes them.
-- Returns the members, in the order they were held.
local function take_fitting(P, hd, h, used, cap, budget)
  local s, out = Lim.S(), {}
  while #out < budget do
    local top = redis.call('ZRANGE', hd, 0, 0)[1]
    if not top then
      s.held_empty[hd] = true
      Lim.unindexed(P, hd)
      break
    end
    local _, units = Lim.member(top)
    if used + units > cap or Lim.requeue_err(P, top) then break end
    redis.call('ZREM', hd, top)
    used = used + units
    if h then s.pending[h] = (s.pending[h] or 0) + units end
    out[#out + 1] = top
  end
  -- The budget ran out with the last job taken: the set may be empty now.
  if #out >= budget and #out > 0 and redis.call('ZCARD', hd) == 0 then
    s.held_empty[hd] = true
    Lim.unindexed(P, hd)
  end
  return out
end
Lim.take_fitting = take_fitting

-- Returns the shares of `worker` (its job ended; written by Lim.flush) and takes, from each
-- limit whose capacity it freed, the held jobs that now fit. Returns the released members as
-- {member, holders key} pairs, or nil and an error text when a key is unusable (nothing
-- written then). L: the limits in force (nil: none; a limit not in force holds nothing back).
function Lim.free(P, L, worker)
  local w, e = Lim.slot_of(P, worker)
  if not w then return nil, e end
  local mine = w.shares
  local s = Lim.S()
  if #mine == 0 then return Lim.NONE end
  local units, empty = s.units, s.held_empty
  for i = 1, #mine do
    local sh = mine[i]
    local h = sh[1]
    if units[h] == nil then
      local _
      _, e = Lim.units(h, P)
      if e then return nil, e end
    end
    local hd = sh[4] or held_of(h)
    if empty[hd] == nil then
      local r = redis.pcall('ZRANGE', hd, 0, 0)
      if r.err then return nil, G.wrongtype_of(hd, 'zset') end
      s.held_empty[hd] = r[1] == nil
    end
  end
  local released = Lim.NONE
  local delta = s.delta
  for i = 1, #mine do
    local sh = mine[i]
    local h = sh[1]
    delta[h] = delta[h] - sh[2]
    local hd = sh[4] or held_of(h)
    if not empty[hd] then
      local _, _, name = Lim.member(redis.call('ZRANGE', hd, 0, 0)[1] or '')
      local d = L and L.by_name[name]
      local cap = d and d.limit or math.huge
      for _, m in ipairs(take_fitting(P, hd, h, Lim.units(h, P) + (s.pending[h] or 0), cap, 1000)) do
        if released == Lim.NONE then released = {} end
        released[#released + 1] = { m, h }
      end
    end
  end
  Lim.slot_set(w, Lim.NONE, '')
  return released
end

-- Tells every resq process to look at its queues again (a share came back outside a reserve,
-- or a window opened).
function Lim.wake(P, now_ms)
  if not G.type_err(P .. 'resq:wake', 'string') then redis.call('SET', P .. 'resq:wake', now_ms) end
end

-- Lim.free for a slot whose job ended outside a reserve (complete, requeue, prune, orphans):
-- the released jobs go back to their queue's head; with `wake`, every process is told. Returns
-- '' or why nothing was returned.
function Lim.free_requeue(P, limits_json, worker, wake)
  local rel, e = Lim.free(P, Lim.load(limits_json or '', P), worker)
  if not rel then return e end
  local ms = {}
  for i, r in ipairs(rel) do ms[i] = r[1] end
  Lim.requeue_all(P, ms)
  Lim.flush(P)
  if wake then Lim.wake(P, redis.call('TIME')[1] * 1000) end
  return ''
end

-- Whether the limits on the whole of queue `qname` (a queue, no class, no key) close it now:
-- a full concurrency limit, a rate window with no room, a closed time window. Returns blocked,
-- when it may open (ms; rate and window), an error text when a key is unusable, and — when it
-- is open — how many more weight-1 jobs its concurrency limits without priorities have room
-- for (nil: no such limit), so a reserve pops no more than can start.
function Lim.gate(P, L, qname, now_ms)
  local defs = L.gates[qname]
  if not defs then
    defs = {}
    for _, d in ipairs(L.defs) do
      if d.queue == qname and type(d.class) ~= 'string' and not (type(d.key) == 'string' and d.key ~= '') then
        defs[#defs + 1] = d
      end
    end
    L.gates[qname] = defs
  end
  local room, pending = nil, Lim.S().pending
  for _, d in ipairs(defs) do
    local base = P .. 'resq:limit:' .. d.name
    if d.kind == 'concurrency' then
      local h = base .. ':holders'
      local used, e = Lim.units(h, P)
      if e then return false, nil, e end
      local left = d.limit - used - (pending[h] or 0)
      if left < 1 then return true, nil end
      -- With priorities, jobs beyond the room are held so the urgent ones start first.
      local prioritized = type(d.priority) == 'table' and next(d.priority) ~= nil
      if not prioritized and (not room or left < room) then room = left end
    elseif d.kind == 'rate' then
      local blocked, due, e = Lim.rate_full(base, d, now_ms)
      if e then return false, nil, e end
      if blocked then return true, due end
    elseif d.kind == 'window' then
      local w = type(L.open) == 'table' and L.open[d.name] or nil
      if type(w) == 'table' and w.open == false then return true, tonumber(w.next) or (now_ms + 60000) end
    end
  end
  return false, nil, nil, room
end

-- Releases held jobs whose time has come (rate and window holds), at most as many as each limit
-- now admits, back to the head of their queues. Returns how many.
function Lim.release_due(P, L, now_ms, budget)
  local due_key = P .. 'resq:held:due'
  if G.type_err(due_key, 'zset') then return 0 end
  local s, n = Lim.S(), 0
  for _, hd in ipairs(redis.call('ZRANGEBYSCORE', due_key, '-inf', now_ms, 'LIMIT', 0, 100)) do
    if G.type_err(hd, 'zset') then break end
    redis.call('ZREM', due_key, hd)
    local out = {}
    while n < budget do
      local top = redis.call('ZRANGE', hd, 0, 0)[1]
      if not top then break end
      local _, _, name = Lim.member(top)
      local d = L and L.by_name[name]
      local base = string.sub(hd, 1, -6)
      local next_due
      if d and d.kind == 'rate' then
        local iv = math.max(1, tonumber(d.interval_ms) or 1000)
        local used, window_end
        if d.sliding then
          local z = base .. ':rate'
          used = tonumber(redis.pcall('ZCOUNT', z, '(' .. (now_ms - iv), '+inf')) or 0
          local oldest = redis.pcall('ZRANGEBYSCORE', z, '(' .. (now_ms - iv), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
          window_end = ((type(oldest) == 'table' and tonumber(oldest[2])) or now_ms) + iv
        else
          local w = math.floor(now_ms / iv)
          used = tonumber(redis.pcall('GET', base .. ':rate:' .. w)) or 0
          window_end = (w + 1) * iv
        end
        -- Jobs released now start soon: no more than the window has room for.
        if used + (s.pending[hd] or 0) >= d.limit then next_due = window_end end
      elseif d and d.kind == 'window' then
        local w = type(L.open) == 'table' and L.open[d.name] or nil
        if type(w) == 'table' and w.open == false then next_due = tonumber(w.next) end
      end
      if next_due then
        redis.call('ZADD', due_key, next_due, hd)
        break
      end
      if Lim.requeue_err(P, top) then break end
      redis.call('ZREM', hd, top)
      out[#out + 1] = top
      s.pending[hd] = (s.pending[hd] or 0) + 1
      n = n + 1
    end
    if redis.call('ZCARD', hd) == 0 then Lim.unindexed(P, hd) end
    Lim.requeue_all(P, out)
  end
  return n
end
