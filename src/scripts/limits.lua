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
-- that runs the job (its entry in `resq:sharing`); the call that ends the job (step,
-- complete, requeue, prune) returns the share and releases the held jobs that now fit — to a
-- slot of the same call that wants a job, else to the head of their queue. Rate- and
-- window-held jobs are released by time (release.lua), at most as many as the window allows.
--
-- The counts are read once per script call and kept here; their writes are made once, at the
-- end of the call (limits_flush): one HINCRBY per limit touched and one HSET / HDEL of the
-- slots' shares, whatever the number of jobs the call admitted and ended. Every key they
-- write is checked when it is first read, so the flush cannot fail.
--
-- Keys (see src/keys.rs; built here from the prefix P = '<ns>:'; a partitioned limit's base
-- is P..'resq:limit:'..name..':'..partition, an unpartitioned one's P..'resq:limit:'..name):
--   base..':holders'   hash: '__units' -> the units the slots hold in the limit now
--   base..':held'      zset of held jobs; member '<seq>\t<queue>\t<units>\t<name>\t<payload>'
--                      (payload '@<key>' for a large payload kept in a list of its own)
--   base..':rate'      sliding window: zset of starts (ms); base..':rate:'..<n> fixed window n
--   P..'resq:limit:'..name..':parts'  set of the partitions in use (for reports)
--   P..'resq:sharing'                 hash worker (slot) id -> the shares it holds: one
--                                     '<units> <length>:<holders key>' after another
--   P..'resq:held:due'                zset of held keys by when they may be released (ms)
--
-- The limits in force come from the worker as JSON: {"defs":[{name, kind, queue, class, key,
-- limit, interval_ms, sliding, weights, priority}…], "open":{name:{"open":b,"next":ms}}}; a
-- field that does not apply is absent (no queue, class or key; interval_ms and sliding only
-- for rate limits; weights and priority only when set).
--
-- A library made on first use (src/scripts/compose.rs) after guard.lua, whose functions it
-- uses; local functions only.
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

-- The limits that apply to a job of decoded payload obj from `queue`: a list of {def, base,
-- partition or nil, h = holders key}, or nil and an error text (a key template naming what the
-- job does not have).
local limits_seen = {}
local function limits_for(L, P, obj, queue)
  -- Without key templates the answer depends on the queue and the class only: made once per
  -- call for each pair (its entries also carry what limits_check found).
  local class = obj['class']
  local memo = nil
  if L.keyless ~= false then
    if L.keyless == nil then
      L.keyless = true
      for _, d in ipairs(L.defs) do
        if type(d.key) == 'string' and d.key ~= '' then L.keyless = false end
      end
    end
    if L.keyless and type(class) == 'string' then
      memo = limits_seen[queue]
      if not memo then
        memo = {}
        limits_seen[queue] = memo
      end
      local hit = memo[class]
      if hit then return hit end
    end
  end
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
        out[#out + 1] = { d, base, part, h = base .. ':holders' }
      else
        out[#out + 1] = { d, base, nil, h = base .. ':holders' }
      end
    end
  end
  if memo then memo[class] = out end
  return out
end

-- The holders key of an entry of limits_for (or one made like it without `h`).
local function holders_of(x) return x.h or (x[2] .. ':holders') end

-- The set of the partitions of limit def d in use.
local function limit_parts_key(P, d) return P .. 'resq:limit:' .. d.name .. ':parts' end

-- Per-call state of the concurrency counts (see the header): per holders key, the units it
-- held when first read and the change this call made; per worker, the shares it holds now
-- (a list of {holders key, units, entry text}, never changed in place: slots under the same
-- limits share one), the entry text of that list ('' for none), and its entry as last written
-- (false: none); per partitions set, the partitions to add.
local lim_units, lim_delta, lim_order = {}, {}, {}
local lim_shares, lim_text, lim_had, lim_dirty = {}, {}, {}, {}
local LIM_NONE = {}
local lim_parts = {}
local lim_held_empty = {}

-- The units held in limit h (a holders key) now, this call's changes included; or nil and the
-- error text when the key is unusable (another type, a sum that is no integer).
local function limit_units(h)
  local u = lim_units[h]
  if u == nil then
    -- HGET answers an error (not raised: pcall) for a key of another type: one command for
    -- the check and the read.
    local v = redis.pcall('HGET', h, '__units')
    if type(v) == 'table' then return nil, wrongtype_msg(h, redis.call('TYPE', h)['ok'], 'hash') end
    -- Up to 1e15 more units: far more than one call adds.
    local e = counter_err(h .. ' field __units', v, 1)
    if e then return nil, e end
    u = tonumber(v) or 0
    lim_units[h], lim_delta[h] = u, 0
    lim_order[#lim_order + 1] = h
  end
  return u + lim_delta[h]
end

-- Units held in a holders hash (0 when it is unusable: nothing can be taken from it then).
local function limit_used(h)
  return limit_units(h) or 0
end

-- The shares recorded for `worker` (entry text v of hash `key`): a list of {holders key,
-- units, the entry's text}, or nil and the error text when the entry is unusable. Slots under
-- the same limits hold the same text, which is taken apart once per call.
local LIMIT_SHARES_MAX = 1000
local shares_texts = {}
local function shares_parse(key, worker, v)
  local known = shares_texts[v]
  if not known then
    known = {}
    local i = 1
    while i <= #v do
      local u, n, j = string.match(v, '^(%d+) (%d+):()', i)
      if u then n = tonumber(n) end
      -- A slot holds one share per limit of its job: more than LIMIT_SHARES_MAX is not an
      -- entry resq wrote, and would cost a command per share to return.
      if not u or j + n - 1 > #v or #known >= LIMIT_SHARES_MAX then
        local why = (not u and '') or (j + n - 1 > #v and ' (cut short)')
          or (' (more than ' .. LIMIT_SHARES_MAX .. ' shares)')
        return nil, 'BADSHARES ' .. key .. ' field ' .. worker .. ' holds '
          .. string.format('%q', string.sub(v, 1, 60)) .. why
      end
      known[#known + 1] = { string.sub(v, j, j + n - 1), tonumber(u), string.sub(v, i, j + n - 1) }
      i = j + n
    end
    shares_texts[v] = known
  end
  return known
end

-- The entry text of a share of w units in holders key h, made once per call.
local share_texts = {}
local function share_text(h, w)
  local by = share_texts[h]
  if not by then
    by = {}
    share_texts[h] = by
  end
  local t = by[w]
  if not t then
    t = w .. ' ' .. #h .. ':' .. h
    by[w] = t
  end
  return t
end

-- Notes what `worker`'s entry (v, false when absent) of hash `key` holds: its shares (as
-- shares_parse makes them), or nil and the error text, noting nothing.
local function shares_note(key, worker, v)
  local list = LIM_NONE
  if v then
    local e
    list, e = shares_parse(key, worker, v)
    if not list then return nil, e end
  end
  lim_had[worker], lim_shares[worker], lim_text[worker] = v, list, v or ''
  return list
end

-- The shares `worker` holds now (a list, possibly empty), read once per call; or nil and the
-- error text when `<ns>:resq:sharing` or the worker's entry is unusable.
local function shares_of(P, worker)
  local cur = lim_shares[worker]
  if cur ~= nil then return cur end
  local key = P .. 'resq:sharing'
  local e = track_type_err(key, 'hash')
  if e then return nil, e end
  return shares_note(key, worker, redis.call('HGET', key, worker))
end

-- `worker`'s entry as this call leaves it ('' none), or nil when the call did not read it.
local function shares_known(worker)
  if lim_shares[worker] == nil then return nil end
  return lim_text[worker] or ''
end

-- Reads the entries of `workers` (slots about to end their jobs) with one HMGET, so that
-- shares_of answers each of them without a command of its own. Nothing when the hash is
-- unusable, and an unreadable entry is left for shares_of to report.
local function shares_prefetch(P, workers)
  local key = P .. 'resq:sharing'
  if #workers == 0 or track_type_err(key, 'hash') then return end
  local vs = redis.call('HMGET', key, unpack(workers))
  for i = 1, #workers do
    local w = workers[i]
    if lim_shares[w] == nil then shares_note(key, w, vs[i]) end
  end
end

-- `cmd key items…` in commands of at most 1,000 items (`unpack` is bounded by Lua's stack: a
-- call of thousands of slots must not make the flush raise after its first write); `per`:
-- items that belong together (a field and its value).
local function limits_each_batch(cmd, key, items, per)
  local n = #items
  local step = 1000 - 1000 % per
  for i = 1, n, step do
    redis.call(cmd, key, unpack(items, i, math.min(n, i + step - 1)))
  end
end

-- Writes what this call changed: each limit's sum, the slots' shares, the partitions. Every
-- key was checked when first read (limit_units, shares_of, limits_check), so nothing here can
-- fail. Called once, at the end of every script that frees or admits.
local function limits_flush(P)
  for _, h in ipairs(lim_order) do
    local d = lim_delta[h]
    if d ~= 0 then
      if lim_units[h] + d <= 0 then
        redis.call('HDEL', h, '__units')
      else
        redis.call('HINCRBY', h, '__units', d)
      end
    end
    lim_units[h], lim_delta[h] = lim_units[h] + d, 0
  end
  local dels, sets = {}, {}
  for worker in pairs(lim_dirty) do
    local v = lim_text[worker] or ''
    if v ~= '' then
      -- A slot that ended a job and took one under the same limits keeps the same entry.
      if v ~= lim_had[worker] then
        sets[#sets + 1] = worker
        sets[#sets + 1] = v
      end
      lim_had[worker] = v
    else
      if lim_had[worker] then dels[#dels + 1] = worker end
      lim_had[worker] = false
    end
  end
  lim_dirty = {}
  limits_each_batch('HDEL', P .. 'resq:sharing', dels, 1)
  limits_each_batch('HSET', P .. 'resq:sharing', sets, 2)
  for key, parts in pairs(lim_parts) do
    local list = {}
    for part in pairs(parts) do list[#list + 1] = part end
    limits_each_batch('SADD', key, list, 1)
  end
  lim_parts = {}
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

-- For a list `ls` of limits_for whose limits are all concurrency limits without a partition
-- (the usual case: a queue's or a class's limit), made once per list: {holders key, units,
-- limit, the list entry} per limit (ls.conc), the shares a job under them takes (ls.elems) and
-- their entry text (ls.text), with every key they use checked. False (ls.conc = false) for
-- any other list, and when a key is unusable (the general path reports it).
local function limits_prepare(P, ls, class)
  local c, elems, texts = {}, {}, {}
  for i = 1, #ls do
    local x = ls[i]
    local d = x[1]
    if d.kind ~= 'concurrency' or x[3] then
      ls.conc = false
      return false
    end
    if not x.checked then
      if track_type_err(x[2] .. ':held', 'zset') or track_type_err(limit_parts_key(P, d), 'set')
          or track_type_err(P .. 'resq:held:due', 'zset') then
        ls.conc = false
        return false
      end
      x.checked = true
    end
    local h = holders_of(x)
    local w = limit_weight(d, class)
    c[i] = { h, w, d.limit, x }
    elems[i] = { h, w, share_text(h, w) }
    texts[i] = elems[i][3]
  end
  ls.conc, ls.elems, ls.text = c, elems, table.concat(texts)
  return c
end

-- Checks limits `ls` for a job of `class` at now_ms (L: the limits JSON, for windows).
-- Returns nil when every limit admits it; else the blocking {def, base, part} and when it may
-- be released (ms; nil for concurrency: when a share is returned); or false and an error text
-- when a key is unusable.
local function limits_check(P, L, ls, class, now_ms)
  local c = ls.conc
  if c == nil then c = limits_prepare(P, ls, class) end
  if c then
    -- Concurrency limits only (the usual case): their keys were checked when the list was
    -- made; each entry is {holders key, units, limit, the list entry}.
    for i = 1, #c do
      local y = c[i]
      local used, e = limit_units(y[1])
      if e then return false, e end
      if used + (limit_pending[y[1]] or 0) + y[2] > y[3] then return y[4], nil end
    end
    return nil
  end
  for _, x in ipairs(ls) do
    local d, base = x[1], x[2]
    local e = nil
    if not x.checked then
      e = track_type_err(base .. ':held', 'zset')
        or track_type_err(limit_parts_key(P, d), 'set')
        or track_type_err(P .. 'resq:held:due', 'zset')
      if e then return false, e end
      x.checked = true
    end
    if d.kind == 'concurrency' then
      local h = holders_of(x)
      local used
      used, e = limit_units(h)
      if e then return false, e end
      if used + (limit_pending[h] or 0) + limit_weight(d, class) > d.limit then
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

-- Counts a job under a list prepared by limits_prepare for `worker`, whose shares are `mine`
-- (its sums checked): the units in each limit, and the slot's shares with the list's after
-- them (a new list: the slot's may be shared).
local function limits_count(ls, worker, mine)
  local c = ls.conc
  for i = 1, #c do
    local h = c[i][1]
    lim_delta[h] = lim_delta[h] + c[i][2]
  end
  if #mine == 0 then
    lim_shares[worker], lim_text[worker] = ls.elems, ls.text
  else
    local list = {}
    for i = 1, #mine do list[i] = mine[i] end
    for i = 1, #ls.elems do list[#list + 1] = ls.elems[i] end
    lim_shares[worker], lim_text[worker] = list, lim_text[worker] .. ls.text
  end
  lim_dirty[worker] = true
end

-- limits_check and limits_admit in one, for a list of concurrency limits only (limits_prepare)
-- and a slot whose shares are known to be none (it just returned them): true when the job was
-- admitted, the blocking entry of ls when a limit is full, or false and an error text; nil when
-- this is not such a case (the caller checks and admits the general way).
local function limits_take(P, ls, class, worker)
  local c = ls.conc
  if c == nil then c = limits_prepare(P, ls, class) end
  if not c then return nil end
  local mine = lim_shares[worker]
  if mine == nil or #mine > 0 then return nil end
  -- A list of concurrency limits is checked without the limits JSON or the time.
  local x, e = limits_check(P, nil, ls, class, nil)
  if x ~= nil then return x, e end
  limits_count(ls, worker, mine)
  return true
end

-- Takes a job of `class` into every limit of `ls` for `worker` (checked with limits_check):
-- concurrency shares (written by limits_flush), rate starts (`seq`: a member unique to this
-- start, or a function that makes one). Returns nil, or an error text (nothing written) when
-- the slot's shares are unusable.
local function limits_admit(P, ls, class, worker, now_ms, seq)
  local mine, e = shares_of(P, worker)
  if not mine then return e end
  -- Each limit's sum and partitions set are checked before the first write (limits_check
  -- checked them already when it came first, as it does in every script).
  for _, x in ipairs(ls) do
    if x[1].kind == 'concurrency' then
      local _, ue = limit_units(holders_of(x))
      if ue then return ue end
    end
    if x[3] then
      local pe = track_type_err(limit_parts_key(P, x[1]), 'set')
      if pe then return pe end
    end
  end
  local c = ls.conc
  if c == nil then c = limits_prepare(P, ls, class) end
  if c then
    limits_count(ls, worker, mine)
    return nil
  end
  -- The slot's list is shared with others: a new one, with the new shares after the old.
  local list, text = {}, lim_text[worker] or ''
  for i = 1, #mine do list[i] = mine[i] end
  for _, x in ipairs(ls) do
    local d, base, part = x[1], x[2], x[3]
    if part then
      local pk = limit_parts_key(P, d)
      lim_parts[pk] = lim_parts[pk] or {}
      lim_parts[pk][part] = true
    end
    if d.kind == 'concurrency' then
      local h = holders_of(x)
      local w = limit_weight(d, class)
      lim_delta[h] = lim_delta[h] + w
      local st = share_text(h, w)
      list[#list + 1] = { h, w, st }
      text = text .. st
      lim_dirty[worker] = true
    elseif d.kind == 'rate' then
      local iv = math.max(1, tonumber(d.interval_ms) or 1000)
      if d.sliding then
        local z = base .. ':rate'
        if type(seq) == 'function' then seq = seq() end
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
  lim_shares[worker], lim_text[worker] = list, text
  return nil
end

-- Holds a job (payload text, or '@<key>' of a list holding it) of `class` from `queue` under
-- the blocking limit x = {def, base, part}; `due`: when it may be released (ms), for rate and
-- window limits.
local function limit_hold(P, x, due, class, queue, payload, seq, now_ms)
  local d, base, part = x[1], x[2], x[3]
  if part then redis.call('SADD', limit_parts_key(P, d), part) end
  lim_held_empty[base .. ':held'] = nil
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

-- Puts held members `ms` (in the order they were held) back at the head of their queues, in
-- that order: each goes to the head, so the last goes first.
local function limit_requeue_all(P, ms)
  for i = #ms, 1, -1 do limit_requeue(P, ms[i]) end
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

-- The held set of holders key h (the same base), made once per call.
local held_names = {}
local function held_of(h)
  local hd = held_names[h]
  if not hd then
    hd = string.sub(h, 1, -9) .. ':held'
    held_names[h] = hd
  end
  return hd
end

-- Returns the concurrency shares of `worker` (its job ended; written by limits_flush) and
-- takes, from each limit whose capacity it freed, the held jobs that now fit (their units
-- counted in limit_pending until a slot takes them). Returns the released members (a list), or
-- nil and an error text when a key is unusable (nothing written then).
local LIM_NONE_RELEASED = {}
local function limits_free(P, L, worker)
  local mine, e = shares_of(P, worker)
  if not mine then return nil, e end
  local n = #mine
  if n == 0 then return LIM_NONE_RELEASED end
  for i = 1, n do
    local h = mine[i][1]
    local _
    _, e = limit_units(h)
    if e then return nil, e end
    -- The held set's head, read now (a key of another type answers an error: the check and
    -- the read in one command); once per call (true: empty, false: holds jobs).
    local hd = held_of(h)
    if lim_held_empty[hd] == nil then
      local r = redis.pcall('ZRANGE', hd, 0, 0)
      if r.err then return nil, wrongtype_msg(hd, redis.call('TYPE', hd)['ok'], 'zset') end
      lim_held_empty[hd] = r[1] == nil
    end
  end
  local released = LIM_NONE_RELEASED
  for i = 1, n do
    local x = mine[i]
    local h = x[1]
    lim_delta[h] = lim_delta[h] - x[2]
    local hd = held_of(h)
    if not lim_held_empty[hd] then
      if released == LIM_NONE_RELEASED then released = {} end
      local used = limit_units(h) + (limit_pending[h] or 0)
      while not lim_held_empty[hd] do
        local top = redis.call('ZRANGE', hd, 0, 0)[1]
        if not top then
          lim_held_empty[hd] = true
          break
        end
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
  end
  lim_shares[worker], lim_text[worker] = LIM_NONE, ''
  lim_dirty[worker] = true
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
    local out = {}
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
      out[#out + 1] = top
      limit_pending[hd] = (limit_pending[hd] or 0) + 1
      n = n + 1
    end
    limit_requeue_all(P, out)
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
  if limits_json == '' and redis.call('EXISTS', P .. 'resq:sharing') == 0 then
    return ''
  end
  local L = nil
  if limits_json ~= '' then
    local ok, l = pcall(cjson.decode, limits_json)
    if ok and type(l) == 'table' and type(l.defs) == 'table' then L = l end
  end
  local rel, e = limits_free(P, L, worker)
  if not rel then return e end
  local ms = {}
  for i, r in ipairs(rel) do ms[i] = r[1] end
  limit_requeue_all(P, ms)
  limits_flush(P)
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
        local used, e = limit_units(h)
        if e then return false, nil, e end
        local left = d.limit - used - (limit_pending[h] or 0)
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

