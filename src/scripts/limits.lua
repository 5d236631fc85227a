-- limits.lua: flow control decided inside the reserve (docs/limits.md).
--
-- A limit applies to the jobs of a queue, of a class, or both, optionally partitioned by a key
-- rendered from the job ('stripe-{args.0}'):
--   concurrency: at most `limit` units running at once (a job of weight w takes w units);
--   rate:        at most `limit` starts per `interval_ms` (a fixed or a sliding window);
--   window:      starts only while the window is open (the worker says whether it is, and
--                when it next opens).
-- A job a limit does not admit is *held*: moved out of its queue into the limit's held zset
-- (highest priority first, then oldest), in the same call that popped it; it is never run,
-- lost, or popped and pushed back in a loop. A concurrency share belongs to the worker slot
-- that runs the job (`shares:<worker>`); the call that ends the job (step, complete, requeue,
-- prune) returns the share and releases the held jobs that now fit — to a slot of the same
-- call that wants a job, else to the head of their queue. Rate- and window-held jobs are
-- released by time (release.lua), at most as many as the window allows.
--
-- Keys (see src/keys.rs; built here from the prefix P = '<ns>:'; a partitioned limit's base
-- is P..'resq:limit:'..name..':'..partition, an unpartitioned one's P..'resq:limit:'..name):
--   base..':holders'   hash worker id -> units it holds, and '__units' -> their sum (kept in
--                      the same steps, so the use of a limit is one HGET)
--   base..':held'      zset of held jobs; member '<seq>\t<queue>\t<units>\t<name>\t<payload>'
--                      (payload '@<key>' for a large payload kept in a list of its own)
--   base..':rate'      sliding window: zset of starts (ms); base..':rate:'..<n> fixed window n
--   P..'resq:limit:'..name..':parts'  set of the partitions in use (for reports)
--   P..'resq:shares:'..worker         set of the holders keys the slot has shares in
--   P..'resq:sharing'                 set of the worker ids that have a shares set
--   P..'resq:held:due'                zset of held keys by when they may be released (ms)
--
-- The limits in force come from the worker as JSON: {"defs":[{name, kind, queue, class, key,
-- limit, interval_ms, sliding, weights, priority}…], "open":{name:{"open":b,"next":ms}}}.
--
-- Prepended (after guard.lua and track.lua) to every script; local functions only.
-- KEYS / ARGV: none of its own.

-- The value at 'args.0.field' (or 'class', 'queue') of a decoded payload, as text; nil when
-- absent or not a scalar.
local function limit_path(obj, queue, path)
  if path == 'class' then return obj['class'] end
  if path == 'queue' then return queue end
  local v = obj
  for part in string.gmatch(path, '[^%.]+') do
    if type(v) ~= 'table' then return nil end
    local n = tonumber(part)
    if n then v = v[n + 1] else v = v[part] end
  end
  if type(v) == 'number' then
    if v == math.floor(v) and math.abs(v) < 1e15 then return string.format('%d', v) end
    return tostring(v)
  end
  if type(v) == 'string' or type(v) == 'boolean' then return tostring(v) end
  return nil
end

-- The limits that apply to a job of decoded payload obj from `queue`: a list of {def, base},
-- or nil and an error text (a key template naming what the job does not have).
local function limits_for(L, P, obj, queue)
  local out = {}
  for _, d in ipairs(L.defs) do
    local dq, dc = d.queue, d.class
    if (type(dq) ~= 'string' or dq == queue) and (type(dc) ~= 'string' or dc == obj['class']) then
      local base = P .. 'resq:limit:' .. d.name
      if type(d.key) == 'string' and d.key ~= '' then
        local missing
        local part = string.gsub(d.key, '{([^}]*)}', function(path)
          local v = limit_path(obj, queue, path)
          if v == nil then
            missing = missing or path
            return ''
          end
          return v
        end)
        if missing then
          return nil, 'limit ' .. d.name .. ': its key ' .. d.key .. ' names ' .. missing
            .. ', which this job does not have'
        end
        base = base .. ':' .. part
        out[#out + 1] = { d, base, part }
      else
        out[#out + 1] = { d, base, nil }
      end
    end
  end
  return out
end

-- Units held in a holders hash (its '__units' field: the sum of the slots' units).
local function limit_used(holders)
  return tonumber(redis.call('HGET', holders, '__units')) or 0
end

-- The units a job of `class` takes under def d (hipq's throttle factor; 1 by default).
local function limit_weight(d, class)
  local w = type(d.weights) == 'table' and tonumber(d.weights[class]) or nil
  if not w or w < 1 then return 1 end
  return math.floor(w)
end

-- A held job's score: higher priority first, then older first.
local function limit_score(d, class, now_ms)
  local p = type(d.priority) == 'table' and tonumber(d.priority[class]) or 0
  p = math.floor(math.max(0, math.min(99, p or 0)))
  return (99 - p) * 1e13 + now_ms
end

-- Units released by this call but not taken again yet, per holders key.
local limit_pending = {}

-- Checks limits `ls` for a job of `class` at now_ms (L: the limits JSON, for windows).
-- Returns nil when every limit admits it; else the blocking {def, base, part} and when it may
-- be released (ms; nil for concurrency: when a share is returned); or false and an error text
-- when a key is unusable.
local function limits_check(P, L, ls, class, now_ms)
  for _, x in ipairs(ls) do
    local d, base = x[1], x[2]
    local e = track_type_err(base .. ':held', 'zset')
      or track_type_err(P .. 'resq:limit:' .. d.name .. ':parts', 'set')
      or track_type_err(P .. 'resq:held:due', 'zset')
    if e then return false, e end
    if d.kind == 'concurrency' then
      local h = base .. ':holders'
      e = track_type_err(h, 'hash')
      if e then return false, e end
      -- The sum limits_admit will increment: read once, checked to be an integer.
      local w, used = limit_weight(d, class), redis.call('HGET', h, '__units')
      e = counter_err(h .. ' field __units', used, w)
      if e then return false, e end
      if (tonumber(used) or 0) + (limit_pending[h] or 0) + w > d.limit then
        return x, nil
      end
    elseif d.kind == 'rate' then
      local iv = math.max(1, tonumber(d.interval_ms) or 1000)
      if d.sliding then
        local z = base .. ':rate'
        e = track_type_err(z, 'zset')
        if e then return false, e end
        if redis.call('ZCOUNT', z, '(' .. (now_ms - iv), '+inf') >= d.limit then
          local oldest = redis.call('ZRANGEBYSCORE', z, '(' .. (now_ms - iv), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
          return x, (tonumber(oldest[2]) or now_ms) + iv
        end
      else
        local n = math.floor(now_ms / iv)
        local c = base .. ':rate:' .. n
        e = bad_counter(c, 1)
        if e then return false, e end
        if (tonumber(redis.call('GET', c)) or 0) >= d.limit then
          return x, (n + 1) * iv
        end
      end
    elseif d.kind == 'window' then
      local w = type(L.open) == 'table' and L.open[d.name] or nil
      if type(w) == 'table' and w.open == false then
        return x, tonumber(w.next) or (now_ms + 60000)
      end
    end
  end
  return nil
end

-- Takes a job of `class` into every limit of `ls` for `worker` (checked with limits_check):
-- concurrency shares, rate starts. Returns nil, or an error text (nothing written) when the
-- slot's shares set is unusable.
local function limits_admit(P, ls, class, worker, now_ms, seq)
  local shares, sharing = P .. 'resq:shares:' .. worker, P .. 'resq:sharing'
  local e = track_type_err(shares, 'set') or track_type_err(sharing, 'set')
  for _, x in ipairs(ls) do
    -- The slot's own field in each holders hash (limits_check checked the hash and its sum).
    if not e and x[1].kind == 'concurrency' then
      e = bad_hash_counter(x[2] .. ':holders', worker, limit_weight(x[1], class))
    end
  end
  if e then return e end
  for _, x in ipairs(ls) do
    local d, base, part = x[1], x[2], x[3]
    if part then redis.call('SADD', P .. 'resq:limit:' .. d.name .. ':parts', part) end
    if d.kind == 'concurrency' then
      local h = base .. ':holders'
      local w = limit_weight(d, class)
      redis.call('HINCRBY', h, worker, w)
      redis.call('HINCRBY', h, '__units', w)
      redis.call('SADD', shares, h)
      redis.call('SADD', sharing, worker)
    elseif d.kind == 'rate' then
      local iv = math.max(1, tonumber(d.interval_ms) or 1000)
      if d.sliding then
        local z = base .. ':rate'
        redis.call('ZADD', z, now_ms, seq)
        redis.call('ZREMRANGEBYSCORE', z, '-inf', now_ms - iv)
        redis.call('PEXPIRE', z, iv * 2)
      else
        local c = base .. ':rate:' .. math.floor(now_ms / iv)
        redis.call('INCR', c)
        redis.call('PEXPIRE', c, iv * 2)
      end
    end
  end
  return nil
end

-- Holds a job (payload text, or '@<key>' of a list holding it) of `class` from `queue` under
-- the blocking limit x = {def, base, part}; `due`: when it may be released (ms), for rate and
-- window limits.
local function limit_hold(P, x, due, class, queue, payload, seq, now_ms)
  local d, base, part = x[1], x[2], x[3]
  if part then redis.call('SADD', P .. 'resq:limit:' .. d.name .. ':parts', part) end
  local member = seq .. '\t' .. queue .. '\t' .. limit_weight(d, class) .. '\t' .. d.name .. '\t' .. payload
  redis.call('ZADD', base .. ':held', limit_score(d, class, now_ms), member)
  if due then redis.call('ZADD', P .. 'resq:held:due', 'LT', due, base .. ':held') end
end

-- The parts of a held member: queue, units, limit name, payload (or '@<key>').
local function limit_member(m)
  local _, queue, units, name, payload = string.match(m, '^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t(.*)$')
  return queue, tonumber(units) or 1, name, payload
end

-- The def named `name` in L.
local function limit_def(L, name)
  for _, d in ipairs(L.defs) do
    if d.name == name then return d end
  end
  return nil
end

-- Puts a held member back at the head of its queue (a large payload moves from its own list).
-- Checked by the caller: the queue is a list, and so is a pointer's list.
local function limit_requeue(P, m)
  local queue, _, _, payload = limit_member(m)
  local qkey = P .. 'queue:' .. queue
  if string.sub(payload, 1, 1) == '@' then
    redis.call('LMOVE', string.sub(payload, 2), qkey, 'LEFT', 'LEFT')
    redis.call('DEL', string.sub(payload, 2))
  else
    redis.call('LPUSH', qkey, payload)
  end
  redis.call('SADD', P .. 'queues', queue)
end

-- Whether held member m can be put back into its queue (the queue key, and a large payload's
-- list, are lists or absent): nil when it can, else the error text.
local function limit_requeue_err(P, m)
  local queue, _, _, payload = limit_member(m)
  local e = track_type_err(P .. 'queue:' .. queue, 'list') or track_type_err(P .. 'queues', 'set')
  if not e and string.sub(payload, 1, 1) == '@' then
    e = track_type_err(string.sub(payload, 2), 'list')
  end
  return e
end

-- Returns the concurrency shares of `worker` (its job ended) and takes, from each limit whose
-- capacity it freed, the held jobs that now fit (their units counted in limit_pending until a
-- slot takes them). Returns the released members (a list), or nil and an error text when a key
-- is unusable (nothing written then).
local function limits_free(P, L, worker)
  local shares, sharing = P .. 'resq:shares:' .. worker, P .. 'resq:sharing'
  local e = track_type_err(shares, 'set') or track_type_err(sharing, 'set')
  if e then return nil, e end
  local held = redis.call('SMEMBERS', shares)
  if #held == 0 then return {} end
  -- The slot's units in each holders hash, and their sum there, must be integers: the sum is
  -- decremented by them below.
  local mine = {}
  for i, h in ipairs(held) do
    e = track_type_err(h, 'hash') or track_type_err(string.gsub(h, ':holders$', ':held'), 'zset')
    if e then return nil, e end
    local units = redis.call('HGET', h, worker)
    e = counter_err(h .. ' field ' .. worker, units, 1) or bad_hash_counter(h, '__units', 1)
    if e then return nil, e end
    mine[i] = tonumber(units) or 0
  end
  local released = {}
  for i, h in ipairs(held) do
    redis.call('HDEL', h, worker)
    if mine[i] > 0 then
      local left = redis.call('HINCRBY', h, '__units', -mine[i])
      if left <= 0 then redis.call('HDEL', h, '__units') end
    end
    local hd = string.gsub(h, ':holders$', ':held')
    local used = limit_used(h) + (limit_pending[h] or 0)
    while true do
      local top = redis.call('ZRANGE', hd, 0, 0)[1]
      if not top then break end
      local _, units, name = limit_member(top)
      local d = L and limit_def(L, name)
      -- A limit no longer in force holds nothing: its jobs all go.
      local cap = d and d.limit or math.huge
      if used + units > cap or limit_requeue_err(P, top) then break end
      redis.call('ZREM', hd, top)
      used = used + units
      limit_pending[h] = (limit_pending[h] or 0) + units
      released[#released + 1] = { top, h }
    end
  end
  redis.call('DEL', shares)
  redis.call('SREM', sharing, worker)
  return released
end

-- Releases held jobs whose time has come (rate and window holds; release.lua), at most as
-- many as each limit now admits, back to the head of their queues. Returns how many.
local function limits_release_due(P, L, now_ms, budget)
  local due_key = P .. 'resq:held:due'
  if track_type_err(due_key, 'zset') then return 0 end
  local n = 0
  for _, hd in ipairs(redis.call('ZRANGEBYSCORE', due_key, '-inf', now_ms, 'LIMIT', 0, 100)) do
    if track_type_err(hd, 'zset') then break end
    redis.call('ZREM', due_key, hd)
    while n < budget do
      local top = redis.call('ZRANGE', hd, 0, 0)[1]
      if not top then break end
      local _, _, name, _ = limit_member(top)
      local d = limit_def(L, name)
      local base = string.gsub(hd, ':held$', '')
      local next_due
      if d and d.kind == 'rate' then
        local iv = math.max(1, tonumber(d.interval_ms) or 1000)
        local used, window_end
        if d.sliding then
          used = redis.call('ZCOUNT', base .. ':rate', '(' .. (now_ms - iv), '+inf')
          local oldest = redis.call('ZRANGEBYSCORE', base .. ':rate', '(' .. (now_ms - iv), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
          window_end = (tonumber(oldest[2]) or now_ms) + iv
        else
          local w = math.floor(now_ms / iv)
          used = tonumber(redis.pcall('GET', base .. ':rate:' .. w)) or 0
          window_end = (w + 1) * iv
        end
        -- Jobs released now start soon: release no more than the window has room for.
        if used + (limit_pending[hd] or 0) >= d.limit then next_due = window_end end
      elseif d and d.kind == 'window' then
        local w = type(L.open) == 'table' and L.open[d.name] or nil
        if type(w) == 'table' and w.open == false then next_due = tonumber(w.next) end
      end
      if next_due then
        redis.call('ZADD', due_key, next_due, hd)
        break
      end
      if limit_requeue_err(P, top) then break end
      redis.call('ZREM', hd, top)
      limit_requeue(P, top)
      limit_pending[hd] = (limit_pending[hd] or 0) + 1
      n = n + 1
    end
  end
  return n
end

-- Tells every resq process to look at its queues again (a write under a tracked prefix): a
-- share came back outside a reserve, or a window opened.
local function limits_wake(P, now_ms)
  if not track_type_err(P .. 'resq:wake', 'string') then
    redis.call('SET', P .. 'resq:wake', now_ms)
  end
end

-- limits_free for a slot whose job ended outside a reserve (complete.lua, requeue.lua,
-- prune.lua): the released jobs go back to the head of their queue; with `wake`, every process
-- is told to look at its queues again (a queue closed by its own limit may now open). Returns
-- '' or the reason nothing was returned.
local function limits_free_requeue(P, limits_json, worker, wake)
  if limits_json == '' and redis.call('EXISTS', P .. 'resq:shares:' .. worker) == 0 then
    return ''
  end
  local L = nil
  if limits_json ~= '' then
    local ok, l = pcall(cjson.decode, limits_json)
    if ok and type(l) == 'table' and type(l.defs) == 'table' then L = l end
  end
  local rel, e = limits_free(P, L, worker)
  if not rel then return e end
  for _, r in ipairs(rel) do limit_requeue(P, r[1]) end
  if wake then limits_wake(P, redis.call('TIME')[1] * 1000) end
  return ''
end

-- Whether a limit on the whole of queue `qname` (a queue, no class, no key) closes it now: a
-- full concurrency limit (for a job of weight 1), a rate window with no room, a closed time
-- window. Such a queue is not popped at all — its jobs stay in it, in order, and nothing is
-- held — until a share comes back (the slot that returns it reserves in the same call), the
-- window has room, or a process is woken (`<ns>:resq:wake`). Returns blocked, the time it may
-- open (ms, rate and window), or false, nil, an error text when a key is unusable. When the
-- queue is open, the fourth value is how many more weight-1 jobs its concurrency limits without
-- priorities have room for (nil: no such limit), so a reserve pops no more than can start: jobs
-- beyond the room would only be held and handed back in the same order.
local function limits_gate(P, L, qname, now_ms)
  local room = nil
  for _, d in ipairs(L.defs) do
    if d.queue == qname and type(d.class) ~= 'string'
        and not (type(d.key) == 'string' and d.key ~= '') then
      local base = P .. 'resq:limit:' .. d.name
      if d.kind == 'concurrency' then
        local h = base .. ':holders'
        local e = track_type_err(h, 'hash')
        if e then return false, nil, e end
        local left = d.limit - limit_used(h) - (limit_pending[h] or 0)
        if left < 1 then return true, nil end
        -- With priorities, jobs beyond the room are held so the urgent ones start first;
        -- without, they wait in the queue (their order is the queue's either way).
        local prioritized = type(d.priority) == 'table' and next(d.priority) ~= nil
        if not prioritized and (not room or left < room) then room = left end
      elseif d.kind == 'rate' then
        local iv = math.max(1, tonumber(d.interval_ms) or 1000)
        if d.sliding then
          local z = base .. ':rate'
          local e = track_type_err(z, 'zset')
          if e then return false, nil, e end
          if redis.call('ZCOUNT', z, '(' .. (now_ms - iv), '+inf') >= d.limit then
            local oldest = redis.call('ZRANGEBYSCORE', z, '(' .. (now_ms - iv), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
            return true, (tonumber(oldest[2]) or now_ms) + iv
          end
        else
          local n = math.floor(now_ms / iv)
          local c = base .. ':rate:' .. n
          local e = bad_counter(c, 1)
          if e then return false, nil, e end
          if (tonumber(redis.call('GET', c)) or 0) >= d.limit then return true, (n + 1) * iv end
        end
      elseif d.kind == 'window' then
        local w = type(L.open) == 'table' and L.open[d.name] or nil
        if type(w) == 'table' and w.open == false then
          return true, tonumber(w.next) or (now_ms + 60000)
        end
      end
    end
  end
  return false, nil, nil, room
end

