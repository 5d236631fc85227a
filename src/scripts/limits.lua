-- limits.lua (module Lim): flow control decided where the job is taken (docs/limits.md). One
-- model for every mix of limits: admission, a share's return and a held job's release are each
-- computed here and nowhere else.
--
-- A limit applies to the jobs of a queue, of a class, or both, optionally partitioned by a key
-- rendered from the job ('stripe-{args.0}'):
--   concurrency: at most `limit` units running at once (a job of weight w takes w units);
--   rate:        at most `limit` starts per `interval_ms` (a fixed or a sliding window);
--   window:      starts only while the window is open (the worker says whether it is).
-- A job a limit does not admit is *held* (limits_held.lua): moved out of its queue into the
-- limit's held zset in the same call that popped it. A concurrency share belongs to the worker
-- slot that runs the job (its entry in `resq:sharing`); the call that ends the job returns it
-- and releases the held jobs that now fit.
--
-- Counts are read once per call and written once at its end (Lim.flush): one HINCRBY per limit
-- touched and one HSET / HDEL of the slots' entries, whatever the number of jobs; a slot that
-- ends a job and takes another under the same limits keeps its entry untouched. Every key the
-- flush writes is checked when first read, so the flush cannot fail.
--
-- Keys (src/keys.rs; P = '<ns>:'; a limit's base is P..'resq:limit:'..name, plus
-- ':'..partition for a partitioned one):
--   base..':holders'   hash: '__units' -> units held now
--   base..':held'      zset of held jobs (limits_held.lua)
--   base..':rate'      sliding window: zset of starts (ms); base..':rate:'..<n> fixed window n
--   P..'resq:limit:'..name..':parts'  set of the partitions in use (for reports)
--   P..'resq:held:sets'               zset of the held sets that hold jobs (limits_held.lua)
--   P..'resq:sharing'                 hash slot id -> its shares: '<units> <length>:<holders
--                                     key>' one after another
-- The limits come from the worker as JSON {"defs":[{name, kind, queue, class, key, limit,
-- interval_ms, sliding, weights, priority}…], "open":{name:{"open":b,"next":ms}}}, decoded
-- once per text (the text is the cache key; its decoded form never holds per-call state).
--
-- KEYS / ARGV: none (a module).

-- Per-call state (see S()): units read and this call's changes per holders key, the slots
-- whose entry the call changed (`dirty`, a list of their records: Lim.slot), partitions to add,
-- held sets seen empty, units released and not yet taken.
local S_, S_call = nil, -1
local function S()
  if S_call ~= G.call then
    S_call = G.call
    S_ = { units = {}, delta = {}, order = {}, dirty = {}, parts = {}, held_empty = {},
      pending = {}, absent = {}, indexed = {} }
  end
  return S_
end
Lim.S = S

local NONE = {}
-- (The empty list of shares: shared, never changed.)
Lim.NONE = NONE

-- The limits of a JSON text for namespace prefix P (nil when there are none), decoded once per
-- namespace and text: what is kept with them (the limits of each queue and class, with their
-- keys) names the namespace's keys, so two namespaces sending the same text share nothing.
local cache, cached = {}, 0
function Lim.load(text, P)
  if text == '' then return nil end
  local by_text = cache[P]
  local L = by_text and by_text[text]
  if L == nil then
    local ok, l = pcall(cjson.decode, text)
    L = false
    if ok and type(l) == 'table' and type(l.defs) == 'table' and #l.defs > 0 then
      L = l
      L.keyless, L.by_name, L.memo, L.gates = true, {}, {}, {}
      for _, d in ipairs(l.defs) do
        if type(d.key) == 'string' and d.key ~= '' then L.keyless = false end
        L.by_name[d.name] = d
        d.limit = tonumber(d.limit) or 0
      end
    end
    if cached >= 64 then cache, cached = {}, 0 end
    by_text = cache[P]
    if not by_text then
      by_text = {}
      cache[P] = by_text
    end
    by_text[text], cached = L, cached + 1
  end
  return L or nil
end

-- The value at 'args.0.field' (or 'class', 'queue') of a decoded payload, as text; nil when
-- absent or not a scalar.
local function path_value(obj, queue, path)
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

-- The limits that apply to a job (decoded payload obj) from `queue`: a list of {def, base,
-- partition or nil, h = holders key, hd = held set} (the same list for every job of a queue and
-- class when no limit has a key); or nil and the error text (a key template naming what the job
-- lacks).
function Lim.for_job(L, P, obj, queue)
  local class = obj['class']
  local memo = nil
  if L.keyless and type(class) == 'string' then
    memo = L.memo[queue]
    if not memo then
      memo = {}
      L.memo[queue] = memo
    end
    local hit = memo[class]
    if hit then return hit end
  end
  local out = {}
  for _, d in ipairs(L.defs) do
    local dq, dc = d.queue, d.class
    if (type(dq) ~= 'string' or dq == queue) and (type(dc) ~= 'string' or dc == class) then
      local base = P .. 'resq:limit:' .. d.name
      local part = nil
      if type(d.key) == 'string' and d.key ~= '' then
        local missing
        part = string.gsub(d.key, '{([^}]*)}', function(path)
          local v = path_value(obj, queue, path)
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
      end
      local h = base .. ':holders'
      out[#out + 1] = { d, base, part, h = h, hd = base .. ':held' }
    end
  end
  if memo then
    memo[class] = out
    out.kept = true
  end
  return out
end

-- The set of the partitions of limit def d in use.
function Lim.parts_key(P, d) return P .. 'resq:limit:' .. d.name .. ':parts' end

-- The units held in limit h (a holders key) now, this call's changes included; or nil and the
-- error text when the key is unusable (another type, a sum that is no integer). A sum that is
-- not there (the key was deleted, or the partition is new or was forgotten) is derived from the
-- slots' entries in `<ns>:resq:sharing` (Lim.derived_units), never read as 0 while shares are
-- held: deleting the key cannot let a limit be exceeded. Lim.flush then writes the sum whole.
function Lim.units(h, P)
  local s = S()
  local u = s.units[h]
  if u == nil then
    -- HGET answers an error (not raised: pcall) for a key of another type.
    local v = redis.pcall('HGET', h, '__units')
    if type(v) == 'table' then return nil, G.wrongtype_of(h, 'hash') end
    local e = G.counter_err(h .. ' field __units', v, 1)
    if e then return nil, e end
    if v then
      u = tonumber(v) or 0
    else
      u, e = Lim.derived_units(P, h)
      if e then return nil, e end
      s.absent[h] = true
    end
    s.units[h], s.delta[h] = u, 0
    s.order[#s.order + 1] = h
  end
  return u + s.delta[h]
end

-- The units a job of `class` takes under def d (hipq's throttle factor; 1 by default).
function Lim.weight(d, class)
  local w = type(d.weights) == 'table' and tonumber(d.weights[class]) or nil
  if not w or w < 1 then return 1 end
  return math.floor(w)
end

-- Checks limits `ls` for a job of `class` at now_ms. nil when every limit admits it; else the
-- blocking entry of ls and when it may be released (ms; nil for concurrency: when a share comes
-- back); or false and an error text when a key is unusable.
local DUE = {}
function Lim.check(P, L, ls, class, now_ms)
  local s = S()
  local pending, units, delta = s.pending, s.units, s.delta
  local due_key = DUE[P]
  if not due_key then
    due_key = P .. 'resq:held:due'
    DUE[P] = due_key
  end
  -- (The entries of a list kept for every job of a queue and class are checked once a call.)
  local call, kept = G.call, ls.kept
  for i = 1, #ls do
    local x = ls[i]
    local d, base = x[1], x[2]
    local e = nil
    if not kept or x.checked ~= call then
      e = G.type_err(x.hd, 'zset') or G.type_err(due_key, 'zset')
        or (x[3] and G.type_err(Lim.parts_key(P, d), 'set'))
      if e then return false, e end
      if kept then x.checked = call end
    end
    if d.kind == 'concurrency' then
      local h = x.h
      local used = units[h]
      if used then
        used = used + delta[h]
      else
        used, e = Lim.units(h, P)
        if e then return false, e end
      end
      if used + (pending[h] or 0) + (d.weights and Lim.weight(d, class) or 1) > d.limit then
        return x, nil
      end
    elseif d.kind == 'rate' then
      local blocked, due, re = Lim.rate_full(base, d, now_ms)
      if re then return false, re end
      if blocked then return x, due end
    elseif d.kind == 'window' then
      local w = type(L.open) == 'table' and L.open[d.name] or nil
      if type(w) == 'table' and w.open == false then
        return x, tonumber(w.next) or (now_ms + 60000)
      end
    end
  end
  return nil
end

-- Whether rate limit d (base key) has no room at now_ms: blocked, when it may open (ms), or
-- nil, nil and the error text when its key is unusable.
function Lim.rate_full(base, d, now_ms)
  local iv = math.max(1, tonumber(d.interval_ms) or 1000)
  if d.sliding then
    local z = base .. ':rate'
    local e = G.type_err(z, 'zset')
    if e then return nil, nil, e end
    if redis.call('ZCOUNT', z, '(' .. (now_ms - iv), '+inf') >= d.limit then
      local oldest = redis.call('ZRANGEBYSCORE', z, '(' .. (now_ms - iv), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
      return true, (tonumber(oldest[2]) or now_ms) + iv
    end
    return false
  end
  local n = math.floor(now_ms / iv)
  local c = base .. ':rate:' .. n
  local e = G.bad_counter(c, 1)
  if e then return nil, nil, e end
  if (tonumber(redis.call('GET', c)) or 0) >= d.limit then return true, (n + 1) * iv end
  return false
end

-- Takes a job of `class` into every limit of `ls` for `worker` (checked with Lim.check first):
-- concurrency shares (written by Lim.flush), rate starts (`seq`: a member unique to this start,
-- or a function of `seq_arg` that makes one). Returns nil, or an error text (nothing written)
-- when the slot's shares are unusable.
function Lim.admit(P, ls, class, worker, now_ms, seq, seq_arg)
  local w, e = Lim.slot_of(P, worker)
  if not w then return e end
  local s = S()
  -- The concurrency shares a job of `class` takes under ls (their text and list): kept with a
  -- list kept for every job of a queue and class (no limit has a key), else made here.
  local kept = ls.took
  local took, took_text = nil, ''
  if kept then took, took_text = kept.list, kept.text end
  for i = 1, #ls do
    local x = ls[i]
    local d, base, part = x[1], x[2], x[3]
    if part then
      local pk = Lim.parts_key(P, d)
      s.parts[pk] = s.parts[pk] or {}
      s.parts[pk][part] = true
    end
    if d.kind == 'concurrency' then
      if not kept then took_text = took_text .. Lim.share_text(x.h, Lim.weight(d, class)) end
    elseif d.kind == 'rate' then
      local iv = math.max(1, tonumber(d.interval_ms) or 1000)
      if d.sliding then
        local z = base .. ':rate'
        if type(seq) == 'function' then seq = seq(seq_arg) end
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
  if not took then
    -- (A text already taken apart gives its list.)
    took = Lim.parsed(took_text)
    if not took then
      took = {}
      for i = 1, #ls do
        local x = ls[i]
        if x[1].kind == 'concurrency' then
          local u = Lim.weight(x[1], class)
          took[#took + 1] = { x.h, u, Lim.share_text(x.h, u), x.hd }
        end
      end
    end
    if ls.kept then ls.took = { text = took_text, list = took } end
  end
  if #took > 0 then
    local delta = s.delta
    for i = 1, #took do
      local sh = took[i]
      delta[sh[1]] = delta[sh[1]] + sh[2]
    end
    -- The slot's shares: the job's own when it held none (it returned them in this call, or
    -- is new), else its list with the job's added (an entry text already taken apart when
    -- there is one).
    local text, list = w.text, nil
    if text == '' then
      text, list = took_text, took
    else
      local mine = w.shares
      text = text .. took_text
      list = Lim.parsed(text)
      if not list then
        list = {}
        for i = 1, #mine do list[i] = mine[i] end
        for i = 1, #took do list[#list + 1] = took[i] end
      end
    end
    Lim.slot_set(w, list, text)
  end
  return nil
end

-- Writes what this call changed: each limit's sum, the slots' entries, the partitions. Every
-- key was checked when first read, so nothing here can fail.
function Lim.flush(P)
  local s = S()
  for _, h in ipairs(s.order) do
    local d = s.delta[h]
    -- A sum at 0 stays written (HSET, not HDEL): a sum that is not there is derived again
    -- (Lim.units). A sum that was derived is written whole.
    if s.absent[h] or (d ~= 0 and s.units[h] + d <= 0) then
      redis.call('HSET', h, '__units', math.max(0, s.units[h] + d))
    elseif d ~= 0 then
      redis.call('HINCRBY', h, '__units', d)
    end
    s.units[h], s.delta[h], s.absent[h] = s.units[h] + d, 0, nil
  end
  local dels, sets = {}, {}
  local dirty = s.dirty
  for i = 1, #dirty do
    local w = dirty[i]
    local v = w.text
    if v ~= '' then
      -- A slot that ended a job and took one under the same limits keeps the same entry.
      if v ~= w.had then
        sets[#sets + 1] = w.id
        sets[#sets + 1] = v
      end
      w.had = v
    else
      if w.had then dels[#dels + 1] = w.id end
      w.had = false
    end
    w.dirty = false
  end
  s.dirty = {}
  G.each_batch('HDEL', P .. 'resq:sharing', dels, 1)
  G.each_batch('HSET', P .. 'resq:sharing', sets, 2)
  for key, parts in pairs(s.parts) do
    local list = {}
    for part in pairs(parts) do list[#list + 1] = part end
    G.each_batch('SADD', key, list, 1)
  end
  s.parts = {}
end
