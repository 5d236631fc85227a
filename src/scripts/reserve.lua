-- reserve.lua (module Reserve): the second half of a step (step.lua) — the slots that want a job
-- take the polled queues' heads in priority order, in slot order, as if each had popped in
-- turn, with one LPOP per queue for the whole call.
--
-- An item becomes the slot's worker record `{"queue":…,"run_at":…,"payload":<bytes>}` in the
-- same call that pops it; one that is not a job becomes a failure entry of the slot it would
-- have gone to, which then takes the next (payload.lua); one too large to check here is
-- claimed (claim.lua): moved, as it is, to the slot's claim key for the worker to check. Up to 100 items per call: the remaining slots get 'none' and call again.
-- Only when they apply: a tracked job's record says it started (record.lua, status.lua), and
-- one whose record says cancelled is dropped instead — it never runs; a job its limits do not
-- admit is held (limits.lua), and held jobs the call's completions freed go to its slots first.
-- Queues in `<ns>:resq:paused_queues` are not popped; `<ns>:pause-all-workers` pauses all.
--
-- KEYS / ARGV: none (a module; the step's frame X is step.lua's).

local rcall, rpcall, sub, format, min, ipairs, type

on_init(function(E)
  rcall, rpcall, sub, format = E.redis.call, E.redis.pcall, E.string.sub, E.string.format
  min, ipairs, type = E.math.min, E.ipairs, E.type
end)

local function want(X) return X.nw - X.next + 1 end

-- A sequence unique in this call, zero-padded: held jobs of one millisecond sort by it.
local function seq(X)
  X.seq_n = (X.seq_n or 0) + 1
  return X.token .. '.' .. format('%06d', X.seq_n)
end

-- The next wanting slot's index in the call, and its slot.
local function slot(X)
  local i = X.wanting[X.next]
  return i, X.items[i].sl
end

-- Slot i stops the reserve: it gets the error, and what was popped but not taken goes back to
-- the head of its queue in its order.
local function stop(X, i, e, key, raws, from)
  X.tag[i], X.data[i] = 'error', e
  if raws then
    for j = #raws, from, -1 do rcall('LPUSH', key, raws[j]) end
  end
  X.stopped = true
end

-- The tracked part of a job about to start: 'drop' (cancelled), 'r' (resq's record, read into
-- X.rec_id / X.rec_v) or 's' (resque-status's, into X.st_*), to be written when the job starts
-- (start); nil when the job is not tracked (or has no record).
local function tracked(X, obj)
  local id = obj['resq_id']
  if id ~= nil then
    if not Rec.id_like(id) then return nil end
    local v, problem = Rec.peek(X.P, id)
    if v and not v[1] then
      -- No hash: a job enqueued by a build that kept resq's records in resque-status's JSON
      -- (docs/jobs.md, "Records of earlier builds") is followed there.
      local text, ms, close = Status.read(X.P, id)
      if text then
        if Status.cancelled(text, ms) then return 'drop' end
        X.st_id, X.st_class, X.st_text, X.st_ms, X.st_close = id, obj['class'], text, ms, close
        return 's'
      end
      if text == nil then problem = id .. ' ' .. ms end
    end
    if not v or not v[1] then
      Finish.problem(X, problem or (id .. ' has no record (' .. Rec.key(X.P, id) .. ')'))
      return nil
    end
    if v[1] == 'cancelled' then return 'drop' end
    X.rec_id, X.rec_v = id, v
    return 'r'
  end
  local class = obj['class']
  if not (X.C.any_statused and X.C.statused[class]) then return nil end
  id = Status.id_of(obj)
  if not id then return nil end
  local text, ms, close = Status.read(X.P, id)
  if text == nil then
    Finish.problem(X, id .. ' ' .. ms)
    return 'S'
  end
  if Status.cancelled(text, ms) then return 'drop' end
  X.st_id, X.st_class, X.st_text, X.st_ms, X.st_close = id, class, text, ms, close
  return 's'
end

-- Writes the start tracked() read (kind 'r' or 's'; 'S': a status that could not be read)
-- for slot sl taking item raw; the reply's extra.
local function start(X, kind, raw, sl)
  if kind == 'r' then return Rec.start(X.P, X.rec_id, sl.id, X.now, X.rec_v) end
  if kind == 's' then
    Status.start(X.P, X.st_id, X.st_class, raw, X.now_s, X.st_text, X.st_ms, X.st_close)
  end
  return 's'
end

-- The limits of job obj (raw) from queue q for slot sl: nil to run it; 'held' (held now);
-- 'failed' (its key template cannot be filled: a failure entry); or an error text.
local function limited(X, obj, raw, q, i, sl)
  local ls, why = Lim.for_job(X.L, X.P, obj, q.name)
  if not ls then
    local e = Finish.failure_err(X, sl)
    if e then return e end
    Finish.record_failure(X, sl, Pay.entry(X.failed_at, sl.json, q.json, 'Resq::LimitKeyError', why, raw))
    return 'failed'
  end
  if #ls == 0 then return nil end
  X.limits_touched = true
  local x, due = Lim.check(X.P, X.L, ls, obj['class'], X.now_ms)
  if x == false then return due end
  if x then
    Lim.hold(X.P, x, due, obj['class'], q.name, raw, seq(X), X.now_ms)
    if due and (not X.earliest or due < X.earliest) then X.earliest = due end
    return 'held'
  end
  return Lim.admit(X.P, ls, obj['class'], sl.id, X.now_ms, seq, X)
end

-- Gives item raw (popped from polled queue q) to the next wanting slot: its record, its claim,
-- or a failure entry. Returns an error text (and writes nothing) when the slot's keys cannot
-- take it.
local function take(X, raw, q)
  local i, sl = slot(X)
  local kind, obj = Pay.classify(X.C, raw)
  if kind == 'job' then
    local track = nil
    -- Only a payload with an id, or of a statused class, is looked at for tracking.
    if obj['resq_id'] ~= nil or X.C.any_statused then track = tracked(X, obj) end
    if track == 'drop' then
      X.budget = X.budget - 1
      -- Its limits may hold jobs that its place in the queue kept waiting: those that fit now
      -- are released, as a completion releases them.
      if X.L then Reserve.release_for(X, obj, q) end
      return nil
    end
    if X.L then
      local r = limited(X, obj, raw, q, i, sl)
      if r == 'held' or r == 'failed' then
        X.budget = X.budget - 1
        return nil
      end
      if r then return r end
    end
    if track then X.extra[i] = start(X, track, raw, sl) end
    local rec = '{"queue":' .. q.json .. ',"run_at":"' .. X.run_at .. '","payload":' .. raw .. '}'
    rcall('SET', sl.wkey, rec)
    X.tag[i], X.data[i], X.gone[i] = 'job', rec, false
    X.next = X.next + 1
  elseif kind == 'claim' then
    local claims = X.P .. 'resq:claims'
    local e = Claim.err(sl, claims)
    if e then return e end
    X.tag[i], X.data[i] = 'claim', Claim.item(sl, claims, raw, X.token .. '.' .. i, q.json)
    X.next = X.next + 1
  else
    local e = Finish.failure_err(X, sl)
    if e then return e end
    Finish.record_failure(X, sl, Pay.bad_entry(X.C, kind, obj, raw, X.failed_at, sl.json, q.json))
    X.budget = X.budget - 1
  end
  return nil
end

-- The held jobs that fit now in the concurrency limits of job obj (from queue q), which will not
-- run: out of their held sets, to be given to this call's slots (give_released).
function Reserve.release_for(X, obj, q)
  local ls = Lim.for_job(X.L, X.P, obj, q.name)
  if not ls then return end
  local s = Lim.S()
  for _, x in ipairs(ls) do
    if x[1].kind == 'concurrency' then
      local used = Lim.units(x.h, X.P)
      local hd = x[2] .. ':held'
      if used and not G.type_err(hd, 'zset') then
        X.limits_touched = true
        for _, m in ipairs(Lim.take_fitting(X.P, hd, x.h, used + (s.pending[x.h] or 0), x[1].limit, 1)) do
          X.released = X.released or {}
          X.released[#X.released + 1] = { m, x.h }
          X.more_released = true
        end
      end
    end
  end
end

-- Held jobs the completions freed go to this call's slots first (when their queue is one it
-- polls: they waited longest), the rest back to the head of their queue. One that does not run
-- after all (cancelled) gives its place to the next held job of its limit (Reserve.release_for,
-- from take), so a limit never sits idle while jobs wait behind it.
local function give_released(X)
  local by_name = {}
  for k = 1, X.np do by_name[X.polled[k].name] = X.polled[k] end
  local back, s = {}, Lim.S()
  X.more_released = false
  local list, k = X.released, X.released_at or 1
  while k <= #list do
    local member, h = list[k][1], list[k][2]
    k = k + 1
    local qname, units, _, payload = Lim.member(member)
    s.pending[h] = (s.pending[h] or 0) - units
    local q = by_name[qname]
    if q and want(X) > 0 and not X.stopped and sub(payload, 1, 1) ~= '@' then
      local i = X.wanting[X.next]
      local e = take(X, payload, q)
      if e then
        X.tag[i], X.data[i] = 'error', e
        X.stopped = true
        back[#back + 1] = member
      end
    else
      back[#back + 1] = member
    end
  end
  X.released_at = k
  Lim.requeue_all(X.P, back)
end

-- Pops polled queue q (the i-th) for the wanting slots; its flag in the reply.
local function pop_queue(X, q, paused)
  if paused and paused[q.name] then return 'p' end
  local flag = '1'
  -- A queue's own limits are looked at before the first round, and again before each round
  -- after one that their room bounded.
  local gate, room = X.L ~= nil, nil
  while want(X) > 0 and X.budget > 0 and not X.stopped do
    if gate then
      local blocked, due, e, r = Lim.gate(X.P, X.L, q.name, X.now_ms)
      X.limits_touched = true
      if e then
        stop(X, X.wanting[X.next], e)
        break
      end
      if blocked then
        if due and (not X.earliest or due < X.earliest) then X.earliest = due end
        return 'b'
      end
      room, gate = r, r ~= nil
    end
    local n = min(want(X), X.budget)
    if room then n = min(n, room) end
    if n > 0 then
      -- (The count as text: Redis writes a Lua number out with printf.)
      local raws = rpcall('LPOP', q.key, G.num(n))
      if type(raws) == 'table' and raws.err then
        flag = '0'
        if not q.zset then break end
        local due, period, e = Jes.due(q.key, q.freq, X.now_ms)
        if e then
          stop(X, X.wanting[X.next], e)
          break
        end
        if not due then break end
        flag = '1'
        -- Checked before the member leaves its zset, so a refusal leaves it where it was.
        local i, sl = slot(X)
        local kind = Pay.classify(X.C, due)
        if kind == 'claim' then e = Claim.err(sl, X.P .. 'resq:claims')
        elseif kind ~= 'job' then e = Finish.failure_err(X, sl) end
        if e then
          stop(X, i, e)
          break
        end
        Jes.consume(q.key, due, period)
        take(X, due, q)
      elseif type(raws) == 'table' then
        for j, raw in ipairs(raws) do
          local i = X.wanting[X.next]
          local e = take(X, raw, q)
          if e then
            stop(X, i, e, q.key, raws, j)
            break
          end
          if X.more_released then
            -- Held jobs freed by a dropped one go before the rest of this pop: back to the
            -- queue's head, in order, behind them.
            X.more_released = false
            if j < #raws then
              for r = #raws, j + 1, -1 do rcall('LPUSH', q.key, raws[r]) end
            end
            give_released(X)
            break
          end
        end
        if #raws < n then flag = '0' end
        if #raws < n or X.stopped then break end
      else
        flag = '0'
        break
      end
    end
  end
  -- A queue whose limit this call filled is closed, as one found full: idle slots are not
  -- woken to find it so.
  if X.L and flag == '1' and not X.stopped then
    local blocked, due = Lim.gate(X.P, X.L, q.name, X.now_ms)
    if blocked then
      if due and (not X.earliest or due < X.earliest) then X.earliest = due end
      return 'b'
    end
  end
  return flag
end

local flags = {}

function Reserve.run(X)
  if X.nw > 0 then
    local p = Finish.shared(X)[1]
    if type(p) == 'string' and string.lower(string.match(p, '^%s*(.-)%s*$')) == 'true' then
      for k = 1, X.nw do X.tag[X.wanting[k]] = 'paused' end
      X.nw = 0
    end
  end
  if X.released then give_released(X) end
  -- Queues paused with `resq pause --queue` (a key of another type pauses nothing).
  local paused = nil
  if want(X) > 0 then
    local names = rpcall('SMEMBERS', X.P .. 'resq:paused_queues')
    if type(names) == 'table' and not names.err and #names > 0 then
      paused = {}
      for _, name in ipairs(names) do paused[name] = true end
    end
  end
  for k = 1, X.np do
    local q = X.polled[k]
    if X.stopped then
      flags[k] = '1'
    elseif want(X) > 0 or (paused and paused[q.name]) then
      flags[k] = pop_queue(X, q, paused)
    else
      flags[k] = '1'
    end
  end
  for k = X.np + 1, #flags do flags[k] = nil end
  X.qflags = table.concat(flags)
end
